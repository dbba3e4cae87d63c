"""The SQS FIFO MemoryQueue (boto3): the write queue and its dead-letter queue.

- `send`: one SendMessage with MessageGroupId = digest(authority, scope) (a scope's writes are
  serialized, scopes run in parallel) and MessageDeduplicationId = digest(authority, write id,
  generation) (a resubmit or a status read that re-sends within five minutes is dropped by SQS).
- `bury`: the worker's give-up copy into the DLQ (a FIFO queue too), same group.
- `dead_letters`: ReceiveMessage on the DLQ, ≤ 10 per call, at most ceil(limit / 10) calls; the
  letters stay hidden (platform/queues.py) until deleted (moved back) or released.
The queue's RedrivePolicy (infra/local/resources.py, CDK) sends a message SQS delivered
REDRIVE_MAX_RECEIVES times to the DLQ by itself: the backstop for a worker that cannot run.
"""

from __future__ import annotations

from dovecote.memory.model import QueueMessage
from dovecote.memory.ports import DeadLetter
from dovecote.platform.queues import BATCH, FifoQueues


class SqsMemoryQueue(FifoQueues):
    WHAT = "the memory queue"
    SETTINGS = "DOVECOTE_MEMORY_*"

    def send(self, message: QueueMessage) -> None:
        self._send_one(self._queue_url, message.to_body(), message.group_id, message.deduplication_id)

    def bury(self, body: str, group_id: str, deduplication_id: str) -> None:
        self._send_one(self._dlq_url, body, group_id or "unreadable", deduplication_id)

    def dead_letters(self, limit: int) -> list[DeadLetter]:
        letters: list[DeadLetter] = []
        for _ in range(-(-limit // BATCH)):
            received = self._receive_letters(
                min(BATCH, limit - len(letters)), MessageSystemAttributeNames=["MessageGroupId"]
            )
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
        self._delete_letter(letter.handle)

    def release_dead_letter(self, letter: DeadLetter) -> None:
        self._release_letter(letter.handle)
