"""An idle `dovecote dev` is idle: its event sources poll moto when a write reaches their source
(infra/local/wakeups.py in front of a real moto server), not on a timer; a failed message still comes
back after its visibility timeout with no write to announce it; the lease dispatcher's schedule skips
the runs that can find no overdue lease (infra/local/schedules.py ExpiryGate) and still runs at least
every `at_least_every_s`."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from moto.backends import get_backend

from infra.local.journal import JournalingApp
from infra.local.moto_patches import dispatcher_app
from infra.local.queues import QueuePoller
from infra.local.schedules import ExpiryGate, Schedule
from infra.local.streams import StreamPoller
from infra.local.wakeups import Wakeups
from infra.routes import Function
from tests.support.moto_server import moto_client, serving
from tests.support.threads import eventually

# The sources load their handler by name, as from the route table.
SEEN: list[dict[str, Any]] = []
FAIL_FIRST: set[str] = set()


def handler(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    failures = []
    for record in event["Records"]:
        SEEN.append(record)
        body = record.get("body", "")
        if body in FAIL_FIRST:
            FAIL_FIRST.discard(body)
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}


TEST_FUNCTION = Function("test_source", f"{__name__}.handler")


def wait_for(check: Any, timeout: float = 20.0) -> bool:
    return eventually(check, timeout)


@pytest.fixture
def served() -> Iterator[dict[str, Any]]:
    wakeups = Wakeups(JournalingApp(dispatcher_app()))
    SEEN.clear()
    FAIL_FIRST.clear()
    try:
        with serving(wakeups) as endpoint:
            yield {"wakeups": wakeups, "client": lambda name: moto_client(name, endpoint)}
    finally:
        for name in ("s3", "dynamodb", "sqs", "dynamodbstreams"):
            get_backend(name).reset()  # type: ignore[call-overload]


def table(dynamodb: Any, name: str, *, expiring: bool = False, stream: bool = False) -> None:
    spec: dict[str, Any] = {
        "TableName": name,
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "BillingMode": "PAY_PER_REQUEST",
    }
    if expiring:
        spec["AttributeDefinitions"] += [
            {"AttributeName": "exp_pk", "AttributeType": "S"},
            {"AttributeName": "exp_sk", "AttributeType": "S"},
        ]
        spec["GlobalSecondaryIndexes"] = [
            {
                "IndexName": "expiring",
                "KeySchema": [
                    {"AttributeName": "exp_pk", "KeyType": "HASH"},
                    {"AttributeName": "exp_sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ]
    if stream:
        spec["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    dynamodb.create_table(**spec)


def test_a_write_wakes_only_the_sources_of_its_resource(served: dict[str, Any]) -> None:
    dynamodb, sqs, s3 = served["client"]("dynamodb"), served["client"]("sqs"), served["client"]("s3")
    table(dynamodb, "wake-a")
    table(dynamodb, "wake-b")
    queue = sqs.create_queue(QueueName="wake-q")["QueueUrl"]
    other = sqs.create_queue(QueueName="wake-other")["QueueUrl"]
    s3.create_bucket(Bucket="wake-bucket")
    wakeups = served["wakeups"]
    a, b = wakeups.watch_table("wake-a"), wakeups.watch_table("wake-b")
    q, notified = wakeups.watch_queue(queue), wakeups.watch_queue(other, s3_writes=True)

    dynamodb.get_item(TableName="wake-a", Key={"pk": {"S": "x"}})  # a read wakes nothing
    dynamodb.query(TableName="wake-a", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "x"}})
    s3.list_objects_v2(Bucket="wake-bucket")
    assert not any(e.is_set() for e in (a, b, q, notified))

    dynamodb.put_item(TableName="wake-a", Item={"pk": {"S": "x"}})
    assert a.is_set() and not b.is_set() and not q.is_set() and not notified.is_set()
    a.clear()
    dynamodb.transact_write_items(
        TransactItems=[{"Update": {"TableName": "wake-b", "Key": {"pk": {"S": "y"}}, "UpdateExpression": "SET v = :v",
                                   "ExpressionAttributeValues": {":v": {"S": "1"}}}}]
    )  # fmt: skip
    assert b.is_set() and not a.is_set()

    sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=0)  # a receive is not a send
    assert not q.is_set()
    sqs.send_message(QueueUrl=queue, MessageBody="m")
    assert q.is_set() and not notified.is_set()
    # S3 event notifications are sent inside moto: an S3 write wakes the queue that asked for them.
    s3.put_object(Bucket="wake-bucket", Key="k", Body=b"x")
    assert notified.is_set()


def test_an_idle_queue_source_does_not_poll_and_a_send_is_delivered(served: dict[str, Any]) -> None:
    sqs = served["client"]("sqs")
    url = sqs.create_queue(QueueName="idle-q", Attributes={"VisibilityTimeout": "1"})["QueueUrl"]
    source = QueuePoller(sqs=sqs, queue_url=url, function=TEST_FUNCTION, interval_s=0.01)
    source.wake_on(served["wakeups"].watch_queue(url), idle_s=60).start()
    try:
        assert wait_for(lambda: source.polls >= 1)
        time.sleep(0.2)
        polls = source.polls
        time.sleep(1.5)  # at interval_s=0.01 an unwoken poller would have polled ~150 times
        assert source.polls == polls

        sqs.send_message(QueueUrl=url, MessageBody="hello")
        assert wait_for(lambda: [r["body"] for r in SEEN] == ["hello"])
        # Woken once: the send's poll, and the one after it that finds the queue empty.
        assert source.polls - polls <= 3
    finally:
        source.stop()


def test_a_failed_message_comes_back_after_its_visibility_timeout_with_no_write(served: dict[str, Any]) -> None:
    sqs = served["client"]("sqs")
    url = sqs.create_queue(QueueName="retry-q", Attributes={"VisibilityTimeout": "1"})["QueueUrl"]
    FAIL_FIRST.add("again")
    source = QueuePoller(sqs=sqs, queue_url=url, function=TEST_FUNCTION)
    source.wake_on(served["wakeups"].watch_queue(url), idle_s=60).start()
    try:
        sqs.send_message(QueueUrl=url, MessageBody="again")
        # Nothing is sent after the failure: only the source's own due time can fetch it again.
        assert wait_for(lambda: len(SEEN) == 2)
        assert [r["attributes"]["ApproximateReceiveCount"] for r in SEEN] == ["1", "2"]
        assert wait_for(lambda: source.delivered == 2 and source.failed == 1)
        assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)  # deleted after success
    finally:
        source.stop()


def test_a_table_write_wakes_its_stream_source_and_records_keep_their_order(served: dict[str, Any]) -> None:
    dynamodb = served["client"]("dynamodb")
    table(dynamodb, "streamed", stream=True)
    source = StreamPoller(
        dynamodb=dynamodb, streams=served["client"]("dynamodbstreams"), table="streamed", function=TEST_FUNCTION
    )
    source.wake_on(served["wakeups"].watch_table("streamed"), idle_s=60).start()
    try:
        assert wait_for(lambda: source.polls >= 1)
        time.sleep(0.2)
        polls = source.polls
        time.sleep(1.0)
        assert source.polls == polls
        for i in range(12):
            dynamodb.put_item(TableName="streamed", Item={"pk": {"S": f"k{i:02d}"}})
        assert wait_for(lambda: len(SEEN) == 12)
        assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in SEEN] == [f"k{i:02d}" for i in range(12)]
    finally:
        source.stop()


def test_the_expiry_gate_opens_only_for_a_lease_past_its_deadline(served: dict[str, Any]) -> None:
    dynamodb = served["client"]("dynamodb")
    name = f"tasks-{uuid.uuid4().hex[:6]}"
    table(dynamodb, name, expiring=True)
    changed = served["wakeups"].watch_table(name)
    gate = ExpiryGate(table=name, changed=changed)
    assert gate() is False and gate.scans == 1  # no lease at all
    dynamodb.put_item(TableName=name, Item={"pk": {"S": "unleased"}})
    dynamodb.put_item(
        TableName=name,
        Item={"pk": {"S": "later"}, "exp_pk": {"S": "X#1"}, "exp_sk": {"S": "2999-01-01T00:00:00.000Z#a#later"}},
    )
    assert gate() is False and gate.scans == 2
    for _ in range(5):
        assert gate() is False
    assert gate.scans == 2  # no write, no scan: nothing O(state) per tick
    dynamodb.put_item(
        TableName=name,
        Item={"pk": {"S": "due"}, "exp_pk": {"S": "X#3"}, "exp_sk": {"S": "2001-01-01T00:00:00.000Z#a#due"}},
    )
    assert gate() is True and gate.scans == 3
    dynamodb.delete_item(TableName=name, Key={"pk": {"S": "due"}})  # the dispatcher fenced it
    assert gate() is False


def test_without_the_index_the_gate_always_runs_the_dispatcher(served: dict[str, Any]) -> None:
    dynamodb = served["client"]("dynamodb")
    name = f"plain-{uuid.uuid4().hex[:6]}"
    table(dynamodb, name)
    gate = ExpiryGate(table=name, changed=served["wakeups"].watch_table(name))
    assert gate() is True


RUNS: list[str] = []


def scheduled(event: dict[str, Any], _context: Any) -> None:
    RUNS.append(event["detail-type"])


def test_a_closed_gate_skips_ticks_but_the_function_still_runs_at_least_every_period() -> None:
    RUNS.clear()
    function = Function("test_schedule", f"{__name__}.scheduled")
    closed = Schedule(function=function, interval_s=0.05, gate=lambda: False, at_least_every_s=3600).start()
    time.sleep(0.6)
    closed.stop()
    # The first tick runs (nothing ran yet in the last period); the others are skipped.
    assert closed.runs == 1 and closed.skipped >= 5 and RUNS == ["Scheduled Event"]

    def broken() -> bool:
        raise RuntimeError("cannot tell")

    periodic = Schedule(function=function, interval_s=0.05, gate=lambda: False, at_least_every_s=0.2).start()
    failing = Schedule(function=function, interval_s=0.05, gate=broken, at_least_every_s=3600).start()
    time.sleep(1.0)
    periodic.stop()
    failing.stop()
    assert 2 <= periodic.runs <= 8 and periodic.skipped >= periodic.runs
    assert failing.runs >= 10 and failing.skipped == 0  # a gate that fails opens
