"""The SQS FIFO MemoryQueue (boto3): the write queue and its dead-letter queue.

- `send`: one SendMessage with MessageGroupId = digest(authority, scope) (a scope's writes are
  serialized, scopes run in parallel) and MessageDeduplicationId = digest(authority, write id,
  generation) (a resubmit or a status read that re-sends within five minutes is dropped by SQS).
- `bury`: the worker's give-up copy into the DLQ (a FIFO queue too), same group.
- `dead_letters`: ReceiveMessage on the DLQ, ≤ 10 per call; the letters stay hidden for
  LETTER_HOLD_S until deleted (moved back) or released (visibility 0: left for another authority).
The queue's RedrivePolicy (infra/local/resources.py, CDK) sends a message SQS delivered
REDRIVE_MAX_RECEIVES times to the DLQ by itself: the backstop for a worker that cannot run.
"""

from __future__ import annotations

from typing import Any

from dovecote.memory.model import QueueMessage
from dovecote.memory.ports import DeadLetter
from dovecote.platform.aws import aws_errors

LETTER_HOLD_S = 60
RECEIVE_BATCH = 10  # the SQS maximum per ReceiveMessage


class SqsMemoryQueue:
    def __init__(self, *, queue_url: str, dlq_url: str, sqs: Any) -> None:
        if not queue_url or not dlq_url:
            raise ValueError("the memory queue needs its queue and dead-letter queue URLs (DOVECOTE_MEMORY_*)")
        self._queue_url = queue_url
        self._dlq_url = dlq_url
        self._sqs = sqs

    def send(self, message: QueueMessage) -> None:
        with aws_errors(write=True):
            self._sqs.send_message(
                QueueUrl=self._queue_url,
                MessageBody=message.to_body(),
                MessageGroupId=message.group_id,
                MessageDeduplicationId=message.deduplication_id,
            )

    def bury(self, body: str, group_id: str, deduplication_id: str) -> None:
        with aws_errors(write=True):
            self._sqs.send_message(
                QueueUrl=self._dlq_url,
                MessageBody=body,
                MessageGroupId=group_id or "unreadable",
                MessageDeduplicationId=deduplication_id,
            )

    def dead_letters(self, limit: int) -> list[DeadLetter]:
        letters: list[DeadLetter] = []
        for _ in range(-(-limit // RECEIVE_BATCH)):
            with aws_errors(write=False):
                response = self._sqs.receive_message(
                    QueueUrl=self._dlq_url,
                    MaxNumberOfMessages=min(RECEIVE_BATCH, limit - len(letters)),
                    VisibilityTimeout=LETTER_HOLD_S,
                    WaitTimeSeconds=0,
                    MessageSystemAttributeNames=["MessageGroupId"],
                )
            received = response.get("Messages") or []
            for raw in received:
                try:
                    message: QueueMessage | None = QueueMessage.from_body(raw["Body"])
                except ValueError:
                    message = None
                group_id = (raw.get("Attributes") or {}).get("MessageGroupId", "")
                letters.append(DeadLetter(raw["Body"], raw["ReceiptHandle"], group_id, message))
            if not received or len(letters) >= limit:
                break
        return letters

    def delete_dead_letter(self, letter: DeadLetter) -> None:
        with aws_errors(write=True):
            self._sqs.delete_message(QueueUrl=self._dlq_url, ReceiptHandle=letter.handle)

    def release_dead_letter(self, letter: DeadLetter) -> None:
        with aws_errors(write=True):
            self._sqs.change_message_visibility(
                QueueUrl=self._dlq_url, ReceiptHandle=letter.handle, VisibilityTimeout=0
            )
