"""The memory write queue end to end on moto: DynamoDB + SQS FIFO, Lambda's delivery emulated by
infra/local/queues.py and the real worker handler. Ordering under concurrent producers,
at-least-once delivery, the cancel race with real threads, poison messages and the DLQ, faults
injected at botocore level, and the AWS round trips per command."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError

from dovecote.memory.dynamo import DynamoMemoryStore
from dovecote.memory.model import RELATION_DETECTION_FAILED, WRITE_COMPLETE, WRITE_FAILED, QueueMessage
from dovecote.memory.queue import SqsMemoryQueue
from dovecote.memory.service import MemoryService
from dovecote.memory.worker import GIVE_UP_AT, WriteWorker
from dovecote.platform.cursors import CursorSigner
from dovecote.platform.errors import CommitUnknown, DomainError
from dovecote.platform.principal import Principal
from functions.memory_worker.handler import process_batch
from infra.local.metering import count_round_trips
from infra.local.queues import QueuePoller
from infra.routes import MEMORY_WORKER
from tests.conftest import CI
from tests.support.faults import failing, heal, inject, server_error
from tests.support.memory import MemoryEdge
from tests.support.threads import eventually
from tests.unit.test_memory_service import CountingDetector

KEY = b"memory-pipeline-key-0123456789ab"
CALLER = Principal("acme", "caller")
ADMIN = Principal("acme", "admin")


@dataclass
class Pipeline:
    env: dict[str, Any]
    store: DynamoMemoryStore
    queue: SqsMemoryQueue
    service: MemoryEdge  # the service as the HTTP handler drives it: the API's JSON in and out
    worker: WriteWorker
    detector: CountingDetector
    poller: QueuePoller
    sqs: Any  # the emulator's own client (Lambda's, in the cloud): faults here do not touch producers

    def handler(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        return process_batch(event, context, self.worker)

    def drain(self) -> int:
        return self.poller.drain(self.handler)

    def submit(self, write_id: str, content: str, scope: str = "s") -> dict[str, Any]:
        return self.service.submit(CALLER, {"id": write_id, "scope": scope, "content": content})

    def status(self, write_id: str) -> dict[str, Any]:
        return self.service.status(CALLER, write_id)

    def conflicting(self) -> str:
        """Apply a ("the retry limit is 5") and submit b ("... is 7", a conflict): b's queue message."""
        self.submit("a", "the retry limit is 5")
        self.drain()
        self.submit("b", "the retry limit is 7")
        return QueueMessage("acme", "b", "s").to_body()

    def memory_ids(self, scope: str = "s") -> list[str]:
        return [m.id for m in self.store.memories("acme", scope, 0, 1000)]

    def dead_bodies(self) -> list[str]:
        url = self.env["settings"].memory_dlq_url
        response = self.env["sqs"].receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
        return [m["Body"] for m in response.get("Messages", [])]


@pytest.fixture
def pipeline(moto_env: dict[str, Any]) -> Iterator[Pipeline]:
    settings = moto_env["settings"]
    store = DynamoMemoryStore(table=settings.memory_table, dynamodb=moto_env["dynamodb"])
    queue = SqsMemoryQueue(queue_url=settings.memory_queue_url, dlq_url=settings.memory_dlq_url, sqs=moto_env["sqs"])
    detector = CountingDetector()
    emulator_sqs = boto3.client("sqs", region_name="us-east-1")
    poller = QueuePoller(sqs=emulator_sqs, queue_url=settings.memory_queue_url, function=MEMORY_WORKER).bind()
    yield Pipeline(
        moto_env,
        store,
        queue,
        MemoryEdge(MemoryService(store, queue, CursorSigner(KEY))),
        WriteWorker(store, queue, detector),
        detector,
        poller,
        emulator_sqs,
    )


def wait_until(predicate: Callable[[], bool], seconds: float = 120) -> None:
    assert eventually(predicate, seconds, poll=0.2), "timed out"


# ---- ordering --------------------------------------------------------------------------------------


# Writes per producer below: each applied write costs moto 0.1–0.4 s here, so a desk run checks 80.
WRITES = 50 if CI else 20


def test_concurrent_producers_each_scopes_applied_order_is_its_submit_order(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4 producer threads × 50 writes (20 at a desk) over 3 scopes, the emulator running the real
    Lambda handler on two threads. A write whose submit returned before another's began is applied
    before it."""
    from functions.memory_worker import handler as worker_module

    monkeypatch.setattr(worker_module, "worker", lambda: pipeline.worker)
    # A batch can outlast the fixture's 1 s visibility timeout on a loaded machine; redeliveries are
    # harmless (tested below) but slow this test down. Lambda's queues use 6× the function timeout.
    url = pipeline.env["settings"].memory_queue_url
    pipeline.env["sqs"].set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "60"})
    ticks = itertools.count()
    tick_lock = threading.Lock()
    spans: dict[str, tuple[int, int, str]] = {}
    barrier = threading.Barrier(4)

    def produce(producer: int) -> None:
        barrier.wait()
        for i in range(WRITES):
            write_id, scope = f"p{producer}-{i}", f"scope-{(producer + i) % 3}"
            with tick_lock:
                start = next(ticks)
            pipeline.submit(write_id, f"producer {producer} fact {i}", scope)
            with tick_lock:
                spans[write_id] = (start, next(ticks), scope)

    source = QueuePoller(
        sqs=pipeline.sqs, queue_url=pipeline.env["settings"].memory_queue_url, function=MEMORY_WORKER, concurrency=2
    ).start()
    try:
        producers = [threading.Thread(target=produce, args=(p,)) for p in range(4)]
        for t in producers:
            t.start()
        for t in producers:
            t.join()
        # moto costs ~0.1–0.4 s per applied write on a shared 2-core machine: a generous deadline.
        wait_until(lambda: sum(len(pipeline.memory_ids(f"scope-{s}")) for s in range(3)) == 4 * WRITES, 600)
    finally:
        source.stop()
    checked = 0
    for s in range(3):
        applied = {m: n for n, m in enumerate(pipeline.memory_ids(f"scope-{s}"))}
        ids = [w for w, (_, _, scope) in spans.items() if scope == f"scope-{s}"]
        assert set(applied) == set(ids)
        for a, b in itertools.permutations(ids, 2):
            if spans[a][1] < spans[b][0]:  # a's submit returned before b's began
                assert applied[a] < applied[b], (a, b)
                checked += 1
    # The producers really interleaved, and the order was checked: 5,000 pairs of 200 writes, 800 of 80.
    assert checked > 2 * WRITES**2
    assert all(pipeline.status(w)["status"] == "complete" for w in list(spans)[::17])


# ---- at-least-once --------------------------------------------------------------------------------


def test_every_message_delivered_three_times_applies_once_and_detects_once(pipeline: Pipeline) -> None:
    """The emulator's deletes are lost twice per message (a botocore hook drops them from the
    DeleteMessageBatch call), so SQS delivers each message three times."""
    deliveries: Counter[str] = Counter()
    by_handle: dict[str, str] = {}

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        for r in event["Records"]:
            deliveries[r["messageId"]] += 1
            by_handle[r["receiptHandle"]] = r["messageId"]
        return pipeline.handler(event, context)

    def lose_early_deletes(params: dict[str, Any], **_: Any) -> None:
        params["Entries"] = [e for e in params["Entries"] if deliveries[by_handle[e["ReceiptHandle"]]] >= 3]
        if not params["Entries"]:
            raise server_error("DeleteMessageBatch")

    contents = [
        "The retry limit is 5",
        "The retry limit is 7",
        "Deploys happen on Fridays",
        "Deploys never happen on Fridays",
        "The ledger service stores balances in Postgres",
        "We chose Postgres for the ledger service",
    ]
    ids = [f"w{i}" for i in range(len(contents))]
    for write_id, content in zip(ids, contents, strict=True):
        pipeline.submit(write_id, content)
    inject(pipeline.sqs, "before-parameter-build.sqs.DeleteMessageBatch", lose_early_deletes)
    wait_until(lambda: (pipeline.poller.drain(handler), len(deliveries) == 6 and min(deliveries.values()) >= 3)[1])
    assert sorted(deliveries.values()) == [3] * 6
    assert pipeline.memory_ids() == ids
    assert pipeline.detector.runs == Counter({w: 1 for w in ids})
    relations = pipeline.service.list_relations(CALLER, "s", "", None, None)["items"]
    assert [(r["from"], r["to"], r["verb"]) for r in relations] == [
        ("w1", "w0", "conflicts_with"),
        ("w3", "w2", "conflicts_with"),
        ("w5", "w4", "related"),
    ]
    for write_id in ids:
        assert pipeline.status(write_id)["evidence"]["code"] == WRITE_COMPLETE


# ---- the cancel race ------------------------------------------------------------------------------


def race_once(pipeline: Pipeline, trial: int) -> tuple[bool, str, str, list[str]]:
    write_id = scope = f"race-{trial}"
    pipeline.submit(write_id, f"fact {trial}", scope=scope)
    body = QueueMessage("acme", write_id, scope).to_body()
    barrier = threading.Barrier(2)
    result: dict[str, Any] = {}

    def cancel() -> None:
        barrier.wait()
        result["cancelled"] = pipeline.service.cancel(CALLER, write_id)["cancelled"]

    def start() -> None:
        barrier.wait()
        result["worker"] = pipeline.worker.handle(body)

    threads = [threading.Thread(target=cancel), threading.Thread(target=start)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return result["cancelled"], result["worker"], pipeline.status(write_id)["status"], pipeline.memory_ids(scope)


def test_cancel_races_start_with_real_threads_exactly_one_wins(pipeline: Pipeline) -> None:
    outcomes: Counter[str] = Counter()
    for trial in range(100):
        cancelled, worker, status, stored = race_once(pipeline, trial)
        assert (cancelled, worker, status, stored) in (
            (True, "cancelled", "cancelled", []),
            (False, WRITE_COMPLETE, "complete", [f"race-{trial}"]),
        )
        outcomes[status] += 1
    assert sum(outcomes.values()) == 100


# ---- poison messages ------------------------------------------------------------------------------


def poison_write(write_id: str) -> Callable[..., None]:
    """Every transaction that applies `write_id` fails, like a persistent storage error."""

    def fail(params: dict[str, Any], **_: Any) -> None:
        if f"'W#acme#{write_id}'" in str(params.get("TransactItems", "")):
            raise server_error("TransactWriteItems")

    return fail


def test_a_poison_write_goes_to_the_dlq_failed_and_other_scopes_keep_flowing(pipeline: Pipeline) -> None:
    ddb = pipeline.env["dynamodb"]
    inject(ddb, "before-parameter-build.dynamodb.TransactWriteItems", poison_write("p"))
    pipeline.submit("p", "the retry limit is 5", scope="bad")
    pipeline.submit("p2", "behind the poison", scope="bad")
    for i in range(4):
        pipeline.submit(f"g{i}", f"good fact {i}", scope="good")
    pipeline.drain()
    assert pipeline.memory_ids("good") == ["g0", "g1", "g2", "g3"]  # not held back by "bad"
    receives = 0
    while pipeline.status("p")["status"] != "failed":
        time.sleep(1.1)  # the visibility timeout
        pipeline.drain()
        receives += 1
        assert receives <= GIVE_UP_AT + 1
    status = pipeline.status("p")
    assert status["evidence"]["code"] == WRITE_FAILED and status["evidence"]["write_ok"] is False
    assert pipeline.dead_bodies() == [QueueMessage("acme", "p", "bad").to_body()]
    # The write behind the poison, held back while it was retried, flows once it is buried; its
    # receive count climbed with the poison's, yet SQS did not sweep it into the DLQ.
    wait_until(lambda: (pipeline.drain(), pipeline.memory_ids("bad") == ["p2"])[1], 20)
    assert pipeline.status("p2")["status"] == "complete"
    # The fault is fixed: a redrive brings the poison back, applied after p2.
    heal(ddb, "before-parameter-build.dynamodb.TransactWriteItems")
    assert pipeline.service.redrive(ADMIN) == {"moved": 1, "writes": ["p"]}
    pipeline.drain()
    assert pipeline.status("p")["status"] == "complete"
    assert pipeline.memory_ids("bad") == ["p2", "p"]
    assert pipeline.dead_bodies() == []


# ---- faults at botocore level ---------------------------------------------------------------------


def test_submit_put_failing_stores_and_queues_nothing_and_the_retry_converges(pipeline: Pipeline) -> None:
    with failing(pipeline.env["dynamodb"], "before-call.dynamodb.PutItem", server_error("PutItem")):
        pytest.raises(CommitUnknown, pipeline.submit, "w", "x is 1")
    assert pipeline.store.get_write("acme", "w") is None
    assert pipeline.drain() == 0
    pipeline.submit("w", "x is 1")
    pipeline.drain()
    assert pipeline.memory_ids() == ["w"]


def test_a_send_failing_after_the_put_is_resent_by_a_status_read(pipeline: Pipeline) -> None:
    sqs = pipeline.env["sqs"]
    with failing(sqs, "before-call.sqs.SendMessage", server_error("SendMessage")):
        pytest.raises(CommitUnknown, pipeline.submit, "w", "x is 1")
    write = pipeline.store.get_write("acme", "w")
    assert write is not None and write.status == "queued" and not write.sent
    assert pipeline.drain() == 0  # nothing is in the queue
    with count_round_trips(pipeline.env["dynamodb"], sqs) as meter:
        assert pipeline.status("w")["status"] == "queued"
    assert meter.calls == Counter({"dynamodb.GetItem": 1, "sqs.SendMessage": 1, "dynamodb.UpdateItem": 1})
    pipeline.drain()
    assert pipeline.status("w")["status"] == "complete" and pipeline.memory_ids() == ["w"]


def test_a_send_whose_answer_is_lost_is_deduplicated_on_the_exact_retry(pipeline: Pipeline) -> None:
    with failing(pipeline.env["sqs"], "after-call.sqs.SendMessage", ReadTimeoutError(endpoint_url="https://sqs")):
        pytest.raises(CommitUnknown, pipeline.submit, "w", "x is 1")
    assert pipeline.submit("w", "x is 1")["status"] == "queued"  # re-sent: the same deduplication id
    assert pipeline.drain() == 1  # SQS kept one copy
    assert pipeline.memory_ids() == ["w"]


def test_the_sent_mark_failing_still_queues_the_write(pipeline: Pipeline) -> None:
    with failing(pipeline.env["dynamodb"], "before-call.dynamodb.UpdateItem", server_error("UpdateItem")):
        assert pipeline.submit("w", "x is 1")["status"] == "queued"
    pipeline.drain()
    assert pipeline.memory_ids() == ["w"]


def test_an_apply_transaction_failing_leaves_nothing_partial_and_the_redelivery_converges(pipeline: Pipeline) -> None:
    body = pipeline.conflicting()
    refused = server_error("TransactWriteItems")
    with failing(pipeline.env["dynamodb"], "before-call.dynamodb.TransactWriteItems", refused):
        pytest.raises(DomainError, pipeline.worker.handle, body)
    # Nothing partial: b is started, not applied; no memory, no posting, no relation for it.
    assert pipeline.status("b")["status"] == "started"
    assert pipeline.memory_ids() == ["a"]
    view = pipeline.store.scope_view("acme", "s", ("retry", "limit", "7"))
    assert view.memories == 1 and "7" not in view.postings and view.postings["retry"].df == 1
    assert pipeline.service.list_relations(CALLER, "s", "", None, None)["items"] == []
    pipeline.drain()  # the original message: the worker resumes the started write
    assert pipeline.memory_ids() == ["a", "b"]
    assert [r["verb"] for r in pipeline.service.list_relations(CALLER, "s", "", None, None)["items"]] == [
        "conflicts_with"
    ]


def test_an_apply_whose_answer_is_lost_is_not_applied_again(pipeline: Pipeline) -> None:
    body = pipeline.conflicting()
    lost = ReadTimeoutError(endpoint_url="https://ddb")
    with failing(pipeline.env["dynamodb"], "after-call.dynamodb.TransactWriteItems", lost):
        pytest.raises(DomainError, pipeline.worker.handle, body)
    assert pipeline.worker.handle(body) == "duplicate"
    pipeline.drain()
    assert pipeline.memory_ids() == ["a", "b"]
    assert pipeline.detector.runs == Counter({"a": 1, "b": 1})
    assert len(pipeline.service.list_relations(CALLER, "s", "", None, None)["items"]) == 1


def test_prior_memories_unreadable_is_detection_failed_and_the_write_applies(pipeline: Pipeline) -> None:
    pipeline.conflicting()
    with failing(pipeline.env["dynamodb"], "before-call.dynamodb.BatchGetItem", server_error("BatchGetItem")):
        pipeline.drain()
    evidence = pipeline.status("b")["evidence"]
    assert evidence["code"] == RELATION_DETECTION_FAILED and evidence["write_ok"] is True
    assert pipeline.memory_ids() == ["a", "b"]


def test_a_judgment_commit_failing_leaves_the_relation_pending_and_the_retry_converges(pipeline: Pipeline) -> None:
    ddb = pipeline.env["dynamodb"]
    pipeline.submit("a", "the retry limit is 5")
    pipeline.submit("b", "the retry limit is 7")
    pipeline.drain()
    rid = pipeline.service.list_relations(CALLER, "s", "pending", None, None)["items"][0]["id"]
    judgment = {"command_id": "j1", "decision": "dismissed", "note": "5 was a typo"}
    with failing(ddb, "before-call.dynamodb.TransactWriteItems", server_error("TransactWriteItems")):
        pytest.raises(CommitUnknown, pipeline.service.judge, CALLER, rid, judgment)
    assert [r["id"] for r in pipeline.service.list_relations(CALLER, "s", "pending", None, None)["items"]] == [rid]
    first = pipeline.service.judge(CALLER, rid, judgment)
    assert first == pipeline.service.judge(CALLER, rid, judgment)
    assert pipeline.service.list_relations(CALLER, "s", "pending", None, None)["items"] == []
    assert [r["id"] for r in pipeline.service.list_relations(CALLER, "s", "dismissed", None, None)["items"]] == [rid]


# ---- round trips ----------------------------------------------------------------------------------


def test_round_trips_per_command(pipeline: Pipeline) -> None:
    ddb, sqs = pipeline.env["dynamodb"], pipeline.env["sqs"]
    seen: dict[str, Counter[str]] = defaultdict(Counter)

    def measure(label: str, call: Callable[[], Any]) -> Any:
        with count_round_trips(ddb, sqs) as meter:
            out = call()
        seen[label] = meter.calls
        return out

    measure("submit", lambda: pipeline.submit("a", "the retry limit is 5"))
    measure("resubmit", lambda: pipeline.submit("a", "the retry limit is 5"))
    pipeline.submit("b", "the retry limit is 7")
    first, second = QueueMessage("acme", "a", "s").to_body(), QueueMessage("acme", "b", "s").to_body()
    measure("apply, empty scope", lambda: pipeline.worker.handle(first))
    measure("apply, with a candidate", lambda: pipeline.worker.handle(second))
    measure("redelivery", lambda: pipeline.worker.handle(second))
    measure("status", lambda: pipeline.status("b"))
    pipeline.submit("c", "x is 1")
    measure("cancel", lambda: pipeline.service.cancel(CALLER, "c"))
    measure("list memories", lambda: pipeline.service.list_memories(CALLER, "s", 10, None))
    rid = measure("list relations", lambda: pipeline.service.list_relations(CALLER, "s", "", 10, None))["items"][0]
    measure("judgment", lambda: pipeline.service.judge(CALLER, rid["id"], {"command_id": "j", "decision": "confirmed"}))
    assert seen == {
        "submit": Counter({"dynamodb.PutItem": 1, "sqs.SendMessage": 1, "dynamodb.UpdateItem": 1}),
        "resubmit": Counter({"dynamodb.PutItem": 1, "dynamodb.GetItem": 1}),
        "apply, empty scope": Counter(
            {"dynamodb.UpdateItem": 1, "dynamodb.TransactGetItems": 1, "dynamodb.TransactWriteItems": 1}
        ),
        "apply, with a candidate": Counter(
            {
                "dynamodb.UpdateItem": 1,
                "dynamodb.TransactGetItems": 1,
                "dynamodb.BatchGetItem": 1,
                "dynamodb.TransactWriteItems": 1,
            }
        ),
        "redelivery": Counter({"dynamodb.UpdateItem": 1, "dynamodb.GetItem": 1}),
        "status": Counter({"dynamodb.GetItem": 1}),
        "cancel": Counter({"dynamodb.UpdateItem": 1}),
        "list memories": Counter({"dynamodb.Query": 1}),
        "list relations": Counter({"dynamodb.Query": 1}),
        "judgment": Counter({"dynamodb.TransactGetItems": 1, "dynamodb.TransactWriteItems": 1}),
    }
