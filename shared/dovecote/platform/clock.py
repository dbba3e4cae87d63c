"""Timestamps are RFC 3339 UTC with millisecond precision; the clock is injectable for tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Callable

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
