"""Push fan-out function: the tasks table's stream (NEW_IMAGE, filtered to the task item writes that
append events: dovecote/tasks/dynamo_stream.py) → one queued notification per live webhook of the event's task
(dovecote.push.sender.Fanout). Reports the first failed record of a batch (Lambda retries from it;
the FIFO queue drops a notice sent twice within five minutes, and the sender skips one already
delivered, so a retried batch notifies nobody twice)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from dovecote.platform import gc_pause
from dovecote.platform.observability import logger
from dovecote.push.sender import Fanout
from dovecote.tasks.dynamo_stream import event_keys


@lru_cache(maxsize=1)
def fanout() -> Fanout:
    """Composition root: wires the AWS adapters on the first batch of the container."""
    from dovecote.push.wiring import fanout as wired

    return wired()


def process(event: dict[str, Any], consumer: Fanout) -> dict[str, Any]:
    records = event.get("Records") or []
    committed = []
    for record in records:
        committed.extend(event_keys(record))
    try:
        consumer.events(committed)
    except Exception:
        logger.exception("webhook fan-out failed: the batch is retried")
        first = records[0]["dynamodb"]["SequenceNumber"] if records else ""
        return {"batchItemFailures": [{"itemIdentifier": first}] if first else []}
    return {"batchItemFailures": []}


@gc_pause.resumes_gc
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process(event, fanout())
