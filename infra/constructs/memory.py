"""Memory in the cloud: the serialized write queue (SQS FIFO) with its dead-letter queue, the memory
worker's event source, and the two memory functions' access.

- The write queue is FIFO, one message group per scope (dovecote/memory/queue.py), so writes to a
  scope apply in the order they were submitted; the deduplication id is the write id and its
  generation (content-based deduplication off). Visibility six times the worker's timeout (Lambda's
  advice for an SQS source). The worker itself moves a poison message to the DLQ on its
  GIVE_UP_AT-th receive and marks the write failed, so the writes behind it in its group flow;
  the queue's RedrivePolicy (REDRIVE_MAX_RECEIVES) is the backstop for a worker that cannot run.
- The event source mapping: batch size 10 (the FIFO maximum), ReportBatchItemFailures (Powertools'
  SqsFifoPartialProcessor skips the rest of a failed group).
- SQS-managed encryption: a message holds only ids (the content lives in the table, encrypted with
  the data key); a KMS key here would widen every grant for nothing.
- Access, per function: the memory table (the actions each one's store calls use, the data key only
  through DynamoDB for this table's context); memory_api sends to the queue and, for a redrive,
  receives from and deletes on the DLQ; memory_worker sends to the DLQ only.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from dovecote.memory.worker import REDRIVE_MAX_RECEIVES
from infra.constructs.data import Data
from infra.constructs.grants import Grants, fifo_queues, sqs_source
from infra.event_sources import queue_of
from infra.routes import MEMORY_WORKER

QUEUE_AGE_ALARM_SECONDS = 600


class MemoryQueue(Construct):
    def __init__(self, scope: Construct, id: str, *, data: Data) -> None:
        super().__init__(scope, id)
        self._data = data
        self.queue, self.dlq = fifo_queues(
            self,
            "Writes",
            "WriteFailures",
            max_receives=REDRIVE_MAX_RECEIVES,
            visibility=Duration.seconds(6 * MEMORY_WORKER.timeout_s),
            retention_period=Duration.days(4),
        )

    @property
    def settings(self) -> dict[str, str]:
        """The settings the memory functions read (infra/routes.py names which each receives)."""
        return {
            "memory_table": self._data.memory.table_name,
            "memory_queue_url": self.queue.queue_url,
            "memory_dlq_url": self.dlq.queue_url,
        }

    def connect(self, functions: Mapping[str, lambda_.Function]) -> None:
        """The worker's event source (the worker itself moves a poison message to the DLQ; the
        RedrivePolicy backs it up), and each memory function's least privilege."""
        d = self._data
        sqs_source(functions[MEMORY_WORKER.name], self.queue, queue_of(MEMORY_WORKER))
        grants = Grants(self, functions, d)
        allow = grants.allow

        # memory_api: submit (PutItem, then UpdateItem `sent`), status (GetItem), cancel and redrive
        # flips (UpdateItem), lists (Query), judgments (TransactGet/TransactWrite: GetItem, PutItem,
        # UpdateItem). The queue: send; the DLQ: receive, delete, release (redrive).
        allow(
            "memory_api",
            ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"],
            [d.memory.table_arn],
        )
        grants.table_key("memory_api", d.memory, write=True)
        allow("memory_api", ["sqs:SendMessage"], [self.queue.queue_arn])
        allow(
            "memory_api",
            ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"],
            [self.dlq.queue_arn],
        )
        # memory_worker: flips (UpdateItem), status (GetItem), the scope view (TransactGet: GetItem),
        # prior memories (BatchGetItem), the application (TransactWrite: PutItem, UpdateItem); the
        # DLQ: send a poison message. The event source mapping's own queue actions come with it.
        name = MEMORY_WORKER.name
        allow(
            name,
            ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:BatchGetItem"],
            [d.memory.table_arn],
        )
        grants.table_key(name, d.memory, write=True)
        allow(name, ["sqs:SendMessage"], [self.dlq.queue_arn])
