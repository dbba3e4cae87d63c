"""moto-backed fixtures: the same resources `dovecote dev` creates, in mock_aws."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from dovecote.platform import aws
from dovecote.platform.settings import get_settings
from infra.local.moto_patches import serialize_dynamodb, serialize_sqs
from infra.local.resources import create_everything
from tests.support.moto_env import kept_clients, shared_symmetric_rsa
from tests.support.tasks import Clock

serialize_dynamodb()
serialize_sqs()


@pytest.fixture
def clock() -> Clock:
    """The task service's clock, moved by the test."""
    return Clock()


@pytest.fixture
def moto_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Fresh, empty moto resources of the test's own, reached through the worker's kept clients
    (tests/support/moto_env.py: their hooks are reset after each test)."""
    with mock_aws(), shared_symmetric_rsa(), kept_clients():
        get_settings.cache_clear()
        # A failed memory message is seen again after 1 s (tests of retries and dead letters).
        env = create_everything(memory_visibility_s=1)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()
        yield {
            "dynamodb": aws.client("dynamodb"),
            "s3": aws.client("s3"),
            "sqs": aws.client("sqs"),
            "settings": get_settings(),
        }
    get_settings.cache_clear()
