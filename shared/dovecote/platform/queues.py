"""An SQS FIFO queue and its dead-letter queue (boto3), as the memory write queue and the webhook
queue both keep them: a send carries the group and deduplication ids its service chose; a dead letter
is received hidden for LETTER_HOLD_S, then deleted (moved back, or forgotten) or released (visibility
0: left for another authority's redrive). How many receives a redrive makes is each queue's own rule.
"""

from __future__ import annotations

from typing import Any

from dovecote.platform.aws import aws_errors

LETTER_HOLD_S = 60
BATCH = 10  # the SQS maximum per SendMessageBatch and ReceiveMessage


class FifoQueues:
    # What the queue is and the settings that name its URLs, for the error when one is missing.
    WHAT = "the queue"
    SETTINGS = "DOVECOTE_*"

    def __init__(self, *, queue_url: str, dlq_url: str, sqs: Any) -> None:
        if not queue_url or not dlq_url:
            raise ValueError(f"{self.WHAT} needs its queue and dead-letter queue URLs ({self.SETTINGS})")
        self._queue_url, self._dlq_url, self._sqs = queue_url, dlq_url, sqs

    def _send_one(self, queue_url: str, body: str, group_id: str, deduplication_id: str) -> None:
        with aws_errors(write=True):
            self._sqs.send_message(
                QueueUrl=queue_url, MessageBody=body, MessageGroupId=group_id, MessageDeduplicationId=deduplication_id
            )

    def _receive_letters(self, count: int, **extra: Any) -> list[dict[str, Any]]:
        """One ReceiveMessage of up to `count` (≤ BATCH) dead letters, hidden LETTER_HOLD_S."""
        with aws_errors(write=False):
            response = self._sqs.receive_message(
                QueueUrl=self._dlq_url,
                MaxNumberOfMessages=count,
                VisibilityTimeout=LETTER_HOLD_S,
                WaitTimeSeconds=0,
                **extra,
            )
        return list(response.get("Messages") or [])

    def _delete_letter(self, handle: str) -> None:
        with aws_errors(write=True):
            self._sqs.delete_message(QueueUrl=self._dlq_url, ReceiptHandle=handle)

    def _release_letter(self, handle: str) -> None:
        with aws_errors(write=True):
            self._sqs.change_message_visibility(QueueUrl=self._dlq_url, ReceiptHandle=handle, VisibilityTimeout=0)
