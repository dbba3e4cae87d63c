"""Page limits: one rule for every list. 0 or none means the default; a limit over the maximum
(or negative) is refused, never clamped. `Page` is a keyset list's typed answer: what a service
returns, which the HTTP edge renders as `{items, cursor}`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from dovecote.platform.errors import InvalidArgument

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """A page of a list, and the sealed cursor that continues it (None: the list ends here)."""

    items: tuple[T, ...]
    cursor: str | None = None


def page_limit(limit: int | None, *, default: int, maximum: int) -> int:
    if limit is None or limit == 0:
        return default
    if limit < 0 or limit > maximum:
        raise InvalidArgument(f"limit must be between 0 and {maximum}, got {limit}", field="limit", limit=limit)
    return limit
