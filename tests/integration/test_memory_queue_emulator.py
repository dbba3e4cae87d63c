"""The SQS event-source emulator (infra/local/queues.py) against moto's FIFO queue: Lambda's record
shape, partial batch failures, visibility timeouts, message-group blocking, and SQS's own redrive
to the dead-letter queue. Generic: the handlers here are plain functions, not the memory worker."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from infra.local.queues import QueuePoller
from infra.routes import MEMORY_WORKER


@pytest.fixture
def fifo(moto_env: dict[str, Any]) -> Iterator[dict[str, Any]]:
    settings = moto_env["settings"]
    yield {"sqs": moto_env["sqs"], "url": settings.memory_queue_url, "dlq": settings.memory_dlq_url}


def send(env: dict[str, Any], body: str, group: str, dedup: str) -> None:
    env["sqs"].send_message(QueueUrl=env["url"], MessageBody=body, MessageGroupId=group, MessageDeduplicationId=dedup)


def poller(env: dict[str, Any], batch_size: int = 10) -> QueuePoller:
    return QueuePoller(sqs=env["sqs"], queue_url=env["url"], function=MEMORY_WORKER, batch_size=batch_size).bind()


def test_records_have_lambdas_sqs_shape(fifo: dict[str, Any]) -> None:
    send(fifo, "hello", "g1", "d1")
    seen: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        seen.extend(event["Records"])
        assert context.function_name == "memory_worker"
        return {"batchItemFailures": []}

    assert poller(fifo).poll_once(handler) == 1
    (record,) = seen
    assert record["body"] == "hello" and record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"].endswith(":dovecote-memory.fifo")
    attributes = record["attributes"]
    assert attributes["MessageGroupId"] == "g1" and attributes["MessageDeduplicationId"] == "d1"
    assert attributes["ApproximateReceiveCount"] == "1"
    assert {"SequenceNumber", "SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"} <= set(attributes)
    assert record["messageId"] and record["receiptHandle"] and record["md5OfBody"]
    assert poller(fifo).poll_once(handler) == 0  # deleted after success


def test_batches_hold_at_most_ten_and_keep_each_groups_order(fifo: dict[str, Any]) -> None:
    for i in range(25):
        send(fifo, f"a{i}", "ga", f"a{i}")
        send(fifo, f"b{i}", "gb", f"b{i}")
    sizes: list[int] = []
    bodies: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        sizes.append(len(event["Records"]))
        bodies.extend(r["body"] for r in event["Records"])
        return {"batchItemFailures": []}

    assert poller(fifo).drain(handler) == 50
    assert max(sizes) == 10
    assert [b for b in bodies if b[0] == "a"] == [f"a{i}" for i in range(25)]
    assert [b for b in bodies if b[0] == "b"] == [f"b{i}" for i in range(25)]


def test_failed_items_come_back_after_the_visibility_timeout_and_the_rest_are_deleted(fifo: dict[str, Any]) -> None:
    send(fifo, "ok", "g1", "d1")
    send(fifo, "bad", "g2", "d2")
    calls: list[tuple[str, str]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        failures = []
        for r in event["Records"]:
            calls.append((r["body"], r["attributes"]["ApproximateReceiveCount"]))
            if r["body"] == "bad" and r["attributes"]["ApproximateReceiveCount"] == "1":
                failures.append({"itemIdentifier": r["messageId"]})
        return {"batchItemFailures": failures}

    source = poller(fifo)
    assert source.poll_once(handler) == 2
    assert source.poll_once(handler) == 0  # "bad" is invisible until its visibility timeout ends
    time.sleep(1.2)
    assert source.poll_once(handler) == 1
    assert calls == [("ok", "1"), ("bad", "1"), ("bad", "2")]
    assert source.poll_once(handler) == 0


def test_a_failed_group_comes_back_in_order_after_the_visibility_timeout(fifo: dict[str, Any]) -> None:
    """moto alone hands out the last message of such a group first (infra/local/moto_patches.py)."""
    for body in ("x", "y", "z"):
        send(fifo, body, "g", body)
    batches: list[list[str]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        batches.append([r["body"] for r in event["Records"]])
        if len(batches) == 1:
            return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"]]}
        return {"batchItemFailures": []}

    source = poller(fifo)
    assert source.poll_once(handler) == 3
    time.sleep(1.2)
    source.drain(handler)
    assert batches == [["x", "y", "z"], ["x", "y", "z"]]


def test_a_raising_handler_fails_the_whole_batch(fifo: dict[str, Any]) -> None:
    send(fifo, "one", "g1", "d1")
    send(fifo, "two", "g2", "d2")
    attempts: list[int] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        attempts.append(len(event["Records"]))
        if len(attempts) == 1:
            raise RuntimeError("boom")
        return {"batchItemFailures": []}

    source = poller(fifo)
    source.poll_once(handler)
    time.sleep(1.2)
    assert source.drain(handler) == 2
    assert attempts == [2, 2]


def test_a_group_is_not_handed_out_while_one_of_its_messages_is_in_flight(fifo: dict[str, Any]) -> None:
    for i in range(3):
        send(fifo, f"a{i}", "ga", f"a{i}")
    send(fifo, "b0", "gb", "b0")
    gate = threading.Event()
    first: list[str] = []
    second: list[str] = []

    def slow(event: dict[str, Any], context: Any) -> dict[str, Any]:
        first.extend(r["body"] for r in event["Records"])
        gate.wait(5)
        return {"batchItemFailures": []}

    source = QueuePoller(sqs=fifo["sqs"], queue_url=fifo["url"], function=MEMORY_WORKER, batch_size=1).bind()
    thread = threading.Thread(target=source.poll_once, args=(slow,))
    thread.start()
    time.sleep(0.3)  # a0 is in flight

    def fast(event: dict[str, Any], context: Any) -> dict[str, Any]:
        second.extend(r["body"] for r in event["Records"])
        return {"batchItemFailures": []}

    source.poll_once(fast)
    gate.set()
    thread.join()
    assert first == ["a0"] and second == ["b0"]  # group ga stayed blocked behind a0


def test_sqs_moves_a_message_received_max_receive_count_times_to_the_dlq(fifo: dict[str, Any]) -> None:
    """moto implements RedrivePolicy: after maxReceiveCount receives the next receive moves it."""
    attributes = fifo["sqs"].get_queue_attributes(QueueUrl=fifo["url"], AttributeNames=["RedrivePolicy"])
    max_receives = json.loads(attributes["Attributes"]["RedrivePolicy"])["maxReceiveCount"]
    send(fifo, "poison", "g1", "d1")
    receives: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        receives.extend(r["attributes"]["ApproximateReceiveCount"] for r in event["Records"])
        return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"]]}

    source = poller(fifo)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(receives) < max_receives:
        source.poll_once(handler)
        time.sleep(0.2)
    time.sleep(1.2)
    assert source.poll_once(handler) == 0  # this receive moved it
    assert receives == [str(i) for i in range(1, max_receives + 1)]
    dead = fifo["sqs"].receive_message(QueueUrl=fifo["dlq"], MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in dead] == ["poison"]
