"""What the conformance suites share: a fixture with `params=["memory", "dynamo"]` stands for the fake,
then for the real adapter over the moto environment, so every case runs once per store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


def fake_or_moto(request: pytest.FixtureRequest, fake: Callable[[], T], on_moto: Callable[[dict[str, Any]], T]) -> T:
    """`fake()` for the "memory" param, else `on_moto(moto_env)` (the `moto_env` fixture is only
    started for the adapter)."""
    if request.param == "memory":
        return fake()
    return on_moto(request.getfixturevalue("moto_env"))
