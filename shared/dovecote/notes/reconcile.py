"""Reconciliation of note bodies: which S3 versions under `notes/` no note pins. Pure.

The janitor deletes a body version as soon as the stream says a note stopped pinning it. What it
cannot see is swept here, periodically:
- a Put whose S3 write succeeded but whose index transaction failed (its version is pinned by
  nothing, and it made the pinned one noncurrent);
- records the janitor gave up on: Lambda's on-failure destination for a stream receives only the
  batch's metadata (shard and sequence numbers), not the records, and the stream keeps records for
  24 hours, so the body versions those records named are found here instead;
- bodies of notes deleted while the janitor was down.

A version younger than the grace period is never touched: a Put writes S3 first and indexes a
moment later, and that in-flight version must survive.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

GRACE = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class StoredVersion:
    key: str
    version: str
    modified: datetime
    delete_marker: bool = False


def note_of(key: str) -> tuple[str, str] | None:
    """(authority, ref) of a body key `notes/<authority>/<ref>`, or None for anything else."""
    parts = key.split("/")
    if len(parts) != 3 or parts[0] != "notes" or not parts[1] or len(parts[2]) != 64:
        return None
    return parts[1], parts[2]


def orphans(
    versions: list[StoredVersion], pinned: dict[str, str | None], now: datetime, grace: timedelta = GRACE
) -> list[StoredVersion]:
    """The versions to delete: every version (and delete marker) of a key except the one its note
    pins, when older than the grace period. `pinned` maps a key to its note's pinned version; a key
    absent from it has no note (deleted, or never committed)."""
    cutoff = now - grace
    out = []
    for v in versions:
        if v.modified > cutoff or note_of(v.key) is None:
            continue
        if v.key in pinned and pinned[v.key] == v.version:
            continue
        out.append(v)
    return out
