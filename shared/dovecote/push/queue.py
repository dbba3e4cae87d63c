"""The SQS FIFO NotificationQueue (boto3): the webhook queue and its dead-letter queue.

- `send`: SendMessageBatch, 10 a call; MessageGroupId = the task (push/model.Notice.group_id),
  MessageDeduplicationId = the notice (a fan-out that runs twice within five minutes sends once).
- `retry_later`: ChangeMessageVisibility on the received message (the sender's backoff); the
  message's FIFO group waits behind it.
- `bury`: a copy into the dead-letter queue (FIFO too, same group), sent by the sender itself on a
  give-up: the messages behind it in its group were received and skipped with it each time, so
  their receive counts climb too, and SQS's own redrive would sweep them away with it. The queue's
  RedrivePolicy (MAX_ATTEMPTS + REDRIVE_MARGIN receives) stays as the backstop.
- `dead_letters`: ReceiveMessage on the dead-letter queue until `limit` letters or none, the letters
  hidden (platform/queues.py) until forgotten (redriven) or released.
"""

from __future__ import annotations

from dovecote.platform.aws import aws_errors
from dovecote.platform.queues import BATCH, FifoQueues
from dovecote.push.model import MAX_ATTEMPTS, Notice

REDRIVE_MARGIN = 5  # the queue's own redrive: a message received this many times past MAX_ATTEMPTS


class SqsNotificationQueue(FifoQueues):
    WHAT = "the webhook queue"
    SETTINGS = "DOVECOTE_PUSH_*"

    def send(self, notices: list[Notice]) -> None:
        for at in range(0, len(notices), BATCH):
            chunk = notices[at : at + BATCH]
            entries = [
                {
                    "Id": str(i),
                    "MessageBody": n.to_body(),
                    "MessageGroupId": n.group_id,
                    "MessageDeduplicationId": n.deduplication_id,
                }
                for i, n in enumerate(chunk)
            ]
            with aws_errors(write=True):
                answer = self._sqs.send_message_batch(QueueUrl=self._queue_url, Entries=entries)
            if answer.get("Failed"):
                from dovecote.platform.errors import Unavailable

                raise Unavailable("the webhook queue refused some notifications", failed=len(answer["Failed"]))

    def retry_later(self, handle: str, seconds: int) -> None:
        with aws_errors(write=True):
            self._sqs.change_message_visibility(
                QueueUrl=self._queue_url, ReceiptHandle=handle, VisibilityTimeout=min(int(seconds), 12 * 3600)
            )

    def bury(self, notice: Notice) -> None:
        self._send_one(self._dlq_url, notice.to_body(), notice.group_id, notice.deduplication_id)

    def dead_letters(self, limit: int) -> list[tuple[Notice | None, str]]:
        letters: list[tuple[Notice | None, str]] = []
        while len(letters) < limit:
            received = self._receive_letters(min(BATCH, limit - len(letters)))
            for raw in received:
                try:
                    notice: Notice | None = Notice.from_body(raw["Body"])
                except ValueError:
                    notice = None
                letters.append((notice, raw["ReceiptHandle"]))
            if not received:
                break
        return letters

    def forget_dead_letter(self, handle: str) -> None:
        self._delete_letter(handle)

    def release_dead_letter(self, handle: str) -> None:
        self._release_letter(handle)


def redrive_max_receives() -> int:
    return MAX_ATTEMPTS + REDRIVE_MARGIN
