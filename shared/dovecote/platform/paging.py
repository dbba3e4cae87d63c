"""Page limits: one rule for every list. 0 or none means the default; a limit over the maximum
(or negative) is refused, never clamped."""

from __future__ import annotations

from dovecote.platform.errors import InvalidArgument


def page_limit(limit: int | None, *, default: int, maximum: int) -> int:
    if limit is None or limit == 0:
        return default
    if limit < 0 or limit > maximum:
        raise InvalidArgument(f"limit must be between 0 and {maximum}, got {limit}", field="limit", limit=limit)
    return limit
