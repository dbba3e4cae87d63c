"""Notes reconciler: a scheduled sweep that deletes body versions no note pins (see
dovecote.notes.reconcile for what it catches and why). It pages through `notes/` versions, looks up
each page's pinned versions in one BatchGetItem per 100 keys, and deletes the rest, stopping while
time remains; the next run starts over, and a sweep is idempotent."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from dovecote.notes.reconcile import orphans
from dovecote.platform import gc_pause
from dovecote.platform.observability import logger

# Stop paging with this much of the invocation left, so the last deletions finish.
RESERVE_MS = 30_000


@lru_cache(maxsize=1)
def store() -> Any:
    from dovecote.notes.dynamo import DynamoNoteStore
    from dovecote.platform import aws
    from dovecote.platform.settings import get_settings

    settings = get_settings()
    return DynamoNoteStore(
        table=settings.notes_table, bucket=settings.bucket, dynamodb=aws.client("dynamodb"), s3=aws.client("s3")
    )


def reconcile(notes: Any, now: datetime, time_left_ms: Any = lambda: 10**9) -> dict[str, int]:
    marker = None
    seen = deleted = 0
    while True:
        versions, marker = notes.body_versions(marker)
        seen += len(versions)
        pinned = notes.pinned_versions(sorted({v.key for v in versions}))
        for version in orphans(versions, pinned, now):
            notes.delete_body_version(version.key, version.version)
            deleted += 1
        if marker is None or time_left_ms() < RESERVE_MS:
            return {"versions_seen": seen, "versions_deleted": deleted, "complete": int(marker is None)}


@gc_pause.resumes_gc
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    summary = reconcile(store(), datetime.now(UTC), context.get_remaining_time_in_millis)
    logger.info("notes reconciled", extra=summary)
    return summary
