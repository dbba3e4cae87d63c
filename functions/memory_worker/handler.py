"""Memory worker: consumes the memory write queue (SQS FIFO) and runs the reference's Submit steps for
each message (dovecote.memory.worker.WriteWorker).

A message that raises is reported in `batchItemFailures` with the messages behind it in its own
message group, while the other scopes of the batch are processed (dovecote/platform/fifo.py: one bad
write never holds back every other scope).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from dovecote.memory.worker import WriteWorker
from dovecote.platform import gc_pause
from dovecote.platform.fifo import SQSRecord, process_fifo
from dovecote.platform.observability import logger


@lru_cache(maxsize=1)
def worker() -> WriteWorker:
    """Composition root: wires the AWS adapters on the first message of the container."""
    from dovecote.memory.detector import LexicalDetector
    from dovecote.memory.dynamo import DynamoMemoryStore
    from dovecote.memory.queue import SqsMemoryQueue
    from dovecote.platform import aws
    from dovecote.platform.settings import get_settings

    settings = get_settings()
    store = DynamoMemoryStore(table=settings.memory_table, dynamodb=aws.client("dynamodb"))
    queue = SqsMemoryQueue(queue_url=settings.memory_queue_url, dlq_url=settings.memory_dlq_url, sqs=aws.client("sqs"))
    return WriteWorker(store, queue, LexicalDetector())


def process_batch(event: dict[str, Any], context: Any, consumer: WriteWorker) -> dict[str, Any]:
    def record_handler(record: SQSRecord) -> str:
        attributes = record.attributes
        return consumer.handle(
            record.body,
            receive_count=int(attributes.approximate_receive_count or 1),
            group_id=attributes.message_group_id or "",
        )

    return process_fifo(event, context, record_handler)


@gc_pause.resumes_gc
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process_batch(event, context, worker())
