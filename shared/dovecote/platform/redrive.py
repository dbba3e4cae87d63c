"""The redrive of a dead-letter queue, as the memory and webhook services both offer it (admin): how
many dead letters one call looks at. 0 or none means DEFAULT_REDRIVE; otherwise 1 to MAX_REDRIVE,
refused (never clamped) outside that."""

from __future__ import annotations

from dovecote.platform.errors import InvalidArgument

MAX_REDRIVE = 100
DEFAULT_REDRIVE = 10


def redrive_size(limit: int | None) -> int:
    size = DEFAULT_REDRIVE if not limit else limit
    if isinstance(size, bool) or not 1 <= size <= MAX_REDRIVE:
        raise InvalidArgument(f"limit must be between 1 and {MAX_REDRIVE}", field="limit")
    return size
