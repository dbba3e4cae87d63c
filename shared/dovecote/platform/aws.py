"""Cached AWS SDK clients: created lazily, once per container, and shared by every adapter.

The clients are botocore's, made by its session directly: a `boto3.client(...)` is the same botocore
client, and importing boto3 also loads s3transfer and multiprocessing for its resource and transfer
layers, which no function uses (about a sixth of a notes cold start). The SDK is imported on first
use, not at module import, so a function that never reaches AWS on a request path (health) never
pays for it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache, lru_cache
from typing import Any

_lock = threading.Lock()

# Error codes that mean "AWS refused for rate": nothing was applied.
THROTTLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "SlowDown",
        "TooManyRequestsException",
    }
)


@cache
def _loader() -> Any:
    """botocore's data loader, one per process: each service model and endpoint rule set is parsed
    from botocore's JSON once, however many sessions ask for it (every reset_clients, in the tests),
    and more cheaply than botocore's own does it (platform/sdk_data.py)."""
    from dovecote.platform.sdk_data import QuickLoader

    return QuickLoader()


@cache
def _session() -> Any:
    """One session for every client until reset_clients: its handlers are registered once, not once
    per client, and its service models come from the shared loader."""
    import botocore.session

    core = botocore.session.get_session()
    core.register_component("data_loader", _loader())
    return core


@cache
def client(service: str) -> Any:
    with _lock:
        import os

        from botocore.config import Config

        from dovecote.platform.settings import get_settings

        s3_style = {"addressing_style": "path"} if os.environ.get("AWS_ENDPOINT_URL") else None
        config = Config(
            region_name=get_settings().region,
            s3=s3_style,
            retries={"mode": "standard", "max_attempts": 3},
            connect_timeout=3,
            read_timeout=10,
            # S3 presigned URLs must use SigV4 (KMS-encrypted objects refuse SigV2).
            signature_version="s3v4" if service == "s3" else None,
        )
        return _session().create_client(service, config=config)


class LazyClient:
    """A client created on its first use. A composition root wires every adapter a function may
    need, but one request often needs only some: an inline note get never reaches S3, and building
    the S3 client (its service model) costs a cold start tens of milliseconds for nothing."""

    def __init__(self, service: str) -> None:
        self._service = service

    def __getattr__(self, name: str) -> Any:
        return getattr(client(self._service), name)


def lazy_client(service: str) -> Any:
    return LazyClient(service)


def reset_clients() -> None:
    """Forget cached clients and their session (tests that start a new moto backend)."""
    with _lock:
        client.cache_clear()
        _session.cache_clear()


@lru_cache(maxsize=1)
def _secret_cursor_key(arn: str) -> bytes:
    value = client("secretsmanager").get_secret_value(SecretId=arn)["SecretString"]
    return value.encode("utf-8")


def cursor_key() -> bytes:
    """Cloud: the Secrets Manager secret (fetched once per container). Local: the dev key."""
    from dovecote.platform.settings import get_settings

    settings = get_settings()
    if settings.cursor_secret_arn:
        return _secret_cursor_key(settings.cursor_secret_arn)
    if settings.cursor_key:
        return settings.cursor_key.encode("utf-8")
    raise RuntimeError("no cursor key: set DOVECOTE_CURSOR_SECRET_ARN or DOVECOTE_CURSOR_KEY")


def aws_error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str((response.get("Error") or {}).get("Code") or "")


@contextmanager
def aws_errors(*, write: bool) -> Iterator[None]:
    """Map AWS infrastructure failures to domain errors: a throttle is `throttled` (nothing was
    applied); a write that may have been sent is `commit_unknown` (retry the exact request); a
    failed read is `unavailable`."""
    from botocore.exceptions import BotoCoreError, ClientError

    from dovecote.platform.errors import CommitUnknown, Throttled, Unavailable

    try:
        yield
    except ClientError as exc:
        code = aws_error_code(exc)
        if code in THROTTLE_CODES:
            raise Throttled("AWS throttled the request; retry with backoff", aws_code=code) from exc
        if write:
            raise CommitUnknown("the write may not have completed; retry the exact request", aws_code=code) from exc
        raise Unavailable("a storage dependency failed; retry", aws_code=code) from exc
    except BotoCoreError as exc:
        cls = CommitUnknown if write else Unavailable
        raise cls("a storage dependency failed; retry the exact request", cause=type(exc).__name__) from exc
