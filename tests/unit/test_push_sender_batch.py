"""The webhook sender's batch (functions/push_sender/handler.py): a notification waiting for its retry
goes back to the queue through batchItemFailures, with the records behind it in its task's group,
and a batch of only such is answered, not raised (a raise is a Lambda error: every retry would count
as one)."""

from __future__ import annotations

from typing import Any

import pytest

from dovecote.push.model import Notice
from dovecote.push.sender import RetryLater
from functions.push_sender.handler import process_batch


def record(message_id: str, notice: Notice, group: str) -> dict[str, Any]:
    return {
        "messageId": message_id,
        "receiptHandle": f"handle-{message_id}",
        "body": notice.to_body(),
        "attributes": {"ApproximateReceiveCount": "1", "MessageGroupId": group, "SequenceNumber": "1"},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:webhooks.fifo",
        "awsRegion": "us-east-1",
    }


class Receiver:
    """The sender's side as the batch sees it: which notices wait for a retry."""

    def __init__(self, waiting: set[str]) -> None:
        self.waiting, self.delivered = waiting, []  # type: tuple[set[str], list[str]]

    def deliver(self, notice: Notice, *, receive_count: int, handle: str) -> str:
        if notice.task in self.waiting:
            raise RetryLater(5)
        self.delivered.append(notice.task)
        return "delivered"


def event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


def test_a_batch_of_notifications_that_all_wait_is_answered_not_raised() -> None:
    waiting = record("m1", Notice("acme", "t1", "w1", 1), "acme/t1")
    answer = process_batch(event(waiting), None, Receiver({"t1"}))  # type: ignore[arg-type]
    assert answer == {"batchItemFailures": [{"itemIdentifier": "m1"}]}


def test_a_waiting_notification_holds_its_group_and_others_are_delivered() -> None:
    receiver = Receiver({"t1"})
    batch = event(
        record("m1", Notice("acme", "t1", "w1", 1), "acme/t1"),
        record("m2", Notice("acme", "t2", "w1", 1), "acme/t2"),
        record("m3", Notice("acme", "t1", "w1", 2), "acme/t1"),
    )
    answer = process_batch(batch, None, receiver)  # type: ignore[arg-type]
    assert sorted(f["itemIdentifier"] for f in answer["batchItemFailures"]) == ["m1", "m3"]
    assert receiver.delivered == ["t2"]


def test_the_memory_workers_batches_still_raise_when_all_fail() -> None:
    from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

    from dovecote.platform.fifo import process_fifo

    def broken(record: Any) -> None:
        raise RuntimeError("the store is down")

    with pytest.raises(BatchProcessingError):
        process_fifo(event(record("m1", Notice("acme", "t1", "w1", 1), "g")), None, broken)
