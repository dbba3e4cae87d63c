"""Push sender function: consumes the webhook queue (SQS FIFO, group = task) and delivers each
notification (dovecote.push.sender.Sender): signed, with the config's credentials, to the address
it checked, retried with backoff for hours (the message hidden for the wait), then dead-lettered.

A notification that waits for its retry is reported in `batchItemFailures` with the messages behind
it in its task's group (their order must hold), while other tasks' notifications in the batch are
delivered (dovecote/platform/fifo.py). Its composition
root builds the A2A service too: a notification is the A2A StreamResponse the task's stream sends.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from dovecote.platform import gc_pause
from dovecote.platform.fifo import SQSRecord, process_fifo
from dovecote.platform.observability import logger
from dovecote.push.model import Notice
from dovecote.push.sender import Sender


@lru_cache(maxsize=1)
def sender() -> Sender:
    """Composition root: the task service (read-only here), the A2A service over it, the sender."""
    from dovecote.a2a.service import A2AService
    from dovecote.push.wiring import sender as wired
    from dovecote.tasks.wiring import task_service

    return wired(A2AService(task_service()))


def process_batch(event: dict[str, Any], context: Any, consumer: Sender) -> dict[str, Any]:
    def record_handler(record: SQSRecord) -> str:
        try:
            notice = Notice.from_body(record.body)
        except ValueError:
            logger.error("not a webhook notification: dropped", extra={"message_id": record.message_id})
            return "unreadable"
        count = int(record.attributes.approximate_receive_count or 1)
        return consumer.deliver(notice, receive_count=count, handle=record.receipt_handle)

    # A notification waiting for its retry is the normal course, not a fault of the function: a batch
    # of only such is answered with its batchItemFailures, not raised (a Lambda error each retry).
    return process_fifo(event, context, record_handler, raise_when_all_fail=False)


@gc_pause.resumes_gc
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process_batch(event, context, sender())
