"""The memory write queue over the in-memory fakes: the reference's reference tests (docs/design/memory.md),
cancel and resubmit semantics, redelivery, giving up on poison, redrive, lists, judgments.

The scenarios that take `harness` are the conformance suite: tests/integration/
test_memory_conformance.py runs them again over DynamoDB + SQS FIFO on moto, with Lambda's
delivery emulated by infra/local/queues.py."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from dovecote.memory import machine
from dovecote.memory.detector import LexicalDetector
from dovecote.memory.fakes import InMemoryMemoryQueue, InMemoryMemoryStore
from dovecote.memory.model import (
    RELATION_DETECTION_FAILED,
    WRITE_CANCELLED,
    WRITE_COMPLETE,
    WRITE_FAILED,
    Candidate,
    Evidence,
    Memory,
    QueueMessage,
)
from dovecote.memory.ports import MemoryQueue, MemoryStore, RelationsRefused
from dovecote.memory.retrieval import TermStats
from dovecote.memory.service import MemoryService
from dovecote.memory.worker import GIVE_UP_AT, WriteWorker
from dovecote.platform.cursors import CursorSigner
from dovecote.platform.errors import DomainError
from dovecote.platform.principal import Principal
from tests.support.memory import MemoryEdge

KEY = b"memory-unit-key-0123456789abcdef"
CALLER = Principal("acme", "caller")
ADMIN = Principal("acme", "admin")
OTHER = Principal("globex", "caller")


class CountingDetector:
    """The default detector, counting its runs per memory; `fail` makes it raise."""

    def __init__(self, fail: bool = False) -> None:
        self.runs: Counter[str] = Counter()
        self.fail = fail
        self._inner = LexicalDetector()
        self._lock = threading.Lock()

    def detect(self, new: Memory, prior: Sequence[Memory], stats: TermStats) -> list[Candidate]:
        with self._lock:
            self.runs[new.id] += 1
        if self.fail:
            raise RuntimeError("detector exploded")
        return self._inner.detect(new, prior, stats)


@dataclass
class Harness:
    service: MemoryEdge  # the service as the HTTP handler drives it: the API's JSON in and out
    worker: WriteWorker
    store: MemoryStore
    queue: MemoryQueue
    detector: CountingDetector
    drain: Callable[[], int]
    # Re-deliver the message of each write id, as SQS may (a lost delete, a visibility timeout).
    redeliver: Callable[[list[str]], None] = field(default=lambda ids: None)

    def submit(self, write_id: str, content: str, scope: str = "s", tags: list[str] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"id": write_id, "scope": scope, "content": content}
        if tags is not None:
            body["tags"] = tags
        return self.service.submit(CALLER, body)

    def status(self, write_id: str, who: Principal = CALLER) -> dict[str, Any]:
        return self.service.status(who, write_id)

    def memories(self, scope: str = "s", who: Principal = CALLER) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = self.service.list_memories(who, scope, 3, cursor)
            items += page["items"]
            cursor = page.get("cursor")  # absent on the last page, as the API answers
            if not cursor:
                return items


def fake_harness(detector: CountingDetector | None = None, store: Any = None, queue: Any = None) -> Harness:
    store = store or InMemoryMemoryStore()
    queue = queue or InMemoryMemoryQueue()
    detector = detector or CountingDetector()
    service = MemoryEdge(MemoryService(store, queue, CursorSigner(KEY)))
    worker = WriteWorker(store, queue, detector)

    def redeliver(ids: list[str]) -> None:
        for write_id in ids:
            write = store.get_write(CALLER.authority, write_id)
            assert write is not None
            worker.handle(QueueMessage(write.authority, write.id, write.scope).to_body())

    return Harness(service, worker, store, queue, detector, lambda: queue.drain(worker.handle), redeliver)


@pytest.fixture
def harness() -> Harness:
    return fake_harness()


def code_of(call: Callable[[], Any]) -> str:
    try:
        call()
    except DomainError as err:
        return err.code
    return "ok"


# ---- the reference's reference tests ------------------------------------------------------------------


def test_five_sequential_writes_apply_in_order_all_complete(harness: Harness) -> None:
    ids = [f"w{i}" for i in range(5)]
    for i, write_id in enumerate(ids):
        assert harness.submit(write_id, f"fact number {i} about the ledger") == {
            "id": write_id,
            "scope": "s",
            "status": "queued",
        }
    harness.drain()
    for write_id in ids:
        status = harness.status(write_id)
        assert status["status"] == "complete", status
        assert status["evidence"]["code"] == WRITE_COMPLETE and status["evidence"]["write_ok"] is True
    memories = harness.memories()
    assert [m["id"] for m in memories] == ids
    assert [m["seq"] for m in memories] == [1, 2, 3, 4, 5]


def test_cancel_before_start_is_never_stored_and_a_later_cancel_of_a_completed_write_is_false(
    harness: Harness,
) -> None:
    harness.submit("keep", "the deploy window is friday")
    harness.submit("drop", "the deploy window is monday")
    assert harness.service.cancel(CALLER, "drop") == {"id": "drop", "cancelled": True}
    harness.drain()
    assert [m["id"] for m in harness.memories()] == ["keep"]
    dropped = harness.status("drop")
    assert dropped["status"] == "cancelled"
    assert dropped["evidence"] == {"code": WRITE_CANCELLED, "write_ok": False, "candidates": []}
    assert harness.detector.runs["drop"] == 0
    # A completed write cannot be cancelled; a consumed cancellation is not pending any more.
    assert harness.service.cancel(CALLER, "keep") == {"id": "keep", "cancelled": False}
    assert harness.service.cancel(CALLER, "drop") == {"id": "drop", "cancelled": False}


def test_a_pending_cancel_repeats_true_until_the_worker_consumes_it(harness: Harness) -> None:
    harness.submit("w", "the cache is enabled")
    assert harness.service.cancel(CALLER, "w")["cancelled"] is True
    assert harness.service.cancel(CALLER, "w")["cancelled"] is True  # still pending: idempotent
    harness.drain()
    assert harness.service.cancel(CALLER, "w")["cancelled"] is False
    assert harness.memories() == []


def test_cancel_of_an_unknown_or_malformed_id(harness: Harness) -> None:
    assert code_of(lambda: harness.service.cancel(CALLER, "nope")) == "not_found"
    assert code_of(lambda: harness.service.cancel(CALLER, "")) == "invalid_argument"
    assert code_of(lambda: harness.service.cancel(CALLER, "w\n")) == "invalid_argument"


def test_a_failing_detector_still_applies_the_write() -> None:
    harness = fake_harness(CountingDetector(fail=True))
    harness.submit("a", "the retry limit is 5")
    harness.submit("b", "the retry limit is 7")
    harness.drain()
    for write_id in ("a", "b"):
        status = harness.status(write_id)
        assert status["status"] == "complete"
        evidence = status["evidence"]
        assert evidence["code"] == RELATION_DETECTION_FAILED and evidence["write_ok"] is True
        assert evidence["candidates"] == [] and "detector exploded" in evidence["error"]["message"]
    assert [m["id"] for m in harness.memories()] == ["a", "b"]
    assert harness.service.list_relations(CALLER, "s", "", None, None)["items"] == []


def test_the_detector_runs_once_per_write_even_when_messages_are_redelivered(harness: Harness) -> None:
    ids = [f"w{i}" for i in range(4)]
    for write_id in ids:
        harness.submit(write_id, "the retry limit is " + write_id)
    harness.drain()
    harness.redeliver(ids)
    harness.redeliver(ids)
    assert harness.detector.runs == Counter({write_id: 1 for write_id in ids})
    assert [m["id"] for m in harness.memories()] == ids
    relations = harness.service.list_relations(CALLER, "s", "", None, None)["items"]
    assert len(relations) == len({r["id"] for r in relations})  # stored once each


# ---- submit ------------------------------------------------------------------------------------


def test_an_exact_resubmit_answers_the_same_and_a_different_write_is_a_conflict(harness: Harness) -> None:
    first = harness.submit("w", "the cache is enabled", tags=["subject:cache"])
    harness.drain()
    again = harness.submit("w", "the cache is enabled", tags=["subject:cache"])
    assert again == first == {"id": "w", "scope": "s", "status": "queued"}
    assert code_of(lambda: harness.submit("w", "the cache is disabled")) == "idempotency_conflict"
    assert code_of(lambda: harness.submit("w", "the cache is enabled", scope="t")) == "idempotency_conflict"
    assert code_of(lambda: harness.submit("w", "the cache is enabled")) == "idempotency_conflict"  # tags differ
    harness.drain()
    assert [m["content"] for m in harness.memories()] == ["the cache is enabled"]
    assert harness.memories("t") == []


def test_bad_input_is_refused_and_nothing_is_queued(harness: Harness) -> None:
    bad: list[Any] = [
        None,
        [],
        {"id": "w", "scope": "s"},
        {"id": "w\n", "scope": "s", "content": "x"},
        {"id": "", "scope": "s", "content": "x"},
        {"id": "w#1", "scope": "s", "content": "x"},
        {"id": 10**40, "scope": "s", "content": "x"},
        {"id": "w", "scope": "s\n", "content": "x"},
        {"id": "w", "scope": "", "content": "x"},
        {"id": "w", "scope": "s", "content": ""},
        {"id": "w", "scope": "s", "content": "   "},
        {"id": "w", "scope": "s", "content": "\ud800"},
        {"id": "w", "scope": "s", "content": "a\x00b"},
        {"id": "w", "scope": "s", "content": "x" * (8 * 1024 + 1)},
        {"id": "w", "scope": "s", "content": 5},
        {"id": "w", "scope": "s", "content": "x", "tags": "subject:a"},
        {"id": "w", "scope": "s", "content": "x", "tags": [1]},
        {"id": "w", "scope": "s", "content": "x", "tags": ["a", "A"]},
        {"id": "w", "scope": "s", "content": "x", "tags": ["subject:a", "subject:b"]},
        {"id": "w", "scope": "s", "content": "x", "tags": ["subject:"]},
        {"id": "w", "scope": "s", "content": "x", "tags": ["t"] * 17},
        {"id": "w", "scope": "s", "content": "x", "tags": ["x" * 65]},
        {"id": "w", "scope": "s", "content": "x", "tags": [[["deep"]]]},
        {"id": "w", "scope": "s", "content": "x", "extra": 1},
    ]
    for body in bad:
        assert code_of(lambda body=body: harness.service.submit(CALLER, body)) == "invalid_argument", body
    assert harness.drain() == 0
    assert harness.memories() == []


def test_a_send_that_fails_after_the_insert_is_sent_again_by_a_status_read() -> None:
    class FlakyQueue(InMemoryMemoryQueue):
        failures = 1

        def send(self, message: QueueMessage) -> None:
            if self.failures:
                self.failures -= 1
                from dovecote.platform.errors import CommitUnknown

                raise CommitUnknown("injected")
            super().send(message)

    harness = fake_harness(queue=FlakyQueue())
    assert code_of(lambda: harness.submit("w", "the cache is enabled")) == "commit_unknown"
    assert harness.drain() == 0
    assert harness.status("w")["status"] == "queued"  # the read re-sends it
    harness.drain()
    assert harness.status("w")["status"] == "complete"
    assert [m["id"] for m in harness.memories()] == ["w"]


def test_a_resubmit_sends_an_unsent_write_exactly_once_more() -> None:
    class FlakyQueue(InMemoryMemoryQueue):
        failures = 1
        attempts = 0

        def send(self, message: QueueMessage) -> None:
            self.attempts += 1
            if self.failures:
                self.failures -= 1
                raise RuntimeError("injected")
            super().send(message)

    queue = FlakyQueue()
    harness = fake_harness(queue=queue)
    with pytest.raises(RuntimeError):
        harness.submit("w", "x is 1")
    assert harness.submit("w", "x is 1")["status"] == "queued"
    assert harness.submit("w", "x is 1")["status"] == "queued"  # sent by now: no third send
    assert queue.attempts == 2
    harness.drain()
    assert [m["id"] for m in harness.memories()] == ["w"]


# ---- status ------------------------------------------------------------------------------------


def test_status_waits_for_the_evidence_with_bounded_reads() -> None:
    store, queue = InMemoryMemoryStore(), InMemoryMemoryQueue()
    worker = WriteWorker(store, queue, LexicalDetector())
    clock = {"now": 0.0, "sleeps": 0}

    def sleep(seconds: float) -> None:
        clock["now"] += seconds
        clock["sleeps"] += 1
        if clock["now"] > 3:  # the worker gets to it after three seconds
            queue.drain(worker.handle)

    service = MemoryEdge(MemoryService(store, queue, CursorSigner(KEY), sleep=sleep, monotonic=lambda: clock["now"]))
    service.submit(CALLER, {"id": "w", "scope": "s", "content": "x is 1"})
    assert service.status(CALLER, "w")["status"] == "queued"  # no wait: no sleep
    assert clock["sleeps"] == 0
    assert service.status(CALLER, "w", wait=20)["status"] == "complete"
    assert 3 < clock["now"] < 5 and clock["sleeps"] <= 8


def test_status_wait_gives_up_at_the_deadline() -> None:
    clock = {"now": 0.0, "sleeps": 0}

    def sleep(seconds: float) -> None:
        clock["now"] += seconds
        clock["sleeps"] += 1

    service = MemoryEdge(
        MemoryService(
            InMemoryMemoryStore(), InMemoryMemoryQueue(), CursorSigner(KEY), sleep=sleep, monotonic=lambda: clock["now"]
        )
    )
    service.submit(CALLER, {"id": "w", "scope": "s", "content": "x is 1"})
    assert service.status(CALLER, "w", wait=20)["status"] == "queued"
    assert clock["now"] == pytest.approx(20.0)
    assert clock["sleeps"] <= 25
    for wait in (-1, 21, 10**30, True):
        assert code_of(lambda wait=wait: service.status(CALLER, "w", wait=wait)) == "invalid_argument"


# ---- isolation and lists ------------------------------------------------------------------------


def test_another_authority_sees_nothing(harness: Harness) -> None:
    harness.submit("w", "the retry limit is 5")
    harness.submit("v", "the retry limit is 7")
    harness.drain()
    assert code_of(lambda: harness.status("w", OTHER)) == "not_found"
    assert code_of(lambda: harness.service.cancel(OTHER, "w")) == "not_found"
    assert harness.memories(who=OTHER) == []
    assert harness.service.list_relations(OTHER, "s", "", None, None)["items"] == []
    relation = harness.service.list_relations(CALLER, "s", "", None, None)["items"][0]
    judgment = {"command_id": "c1", "decision": "confirmed"}
    assert code_of(lambda: harness.service.judge(OTHER, relation["id"], judgment)) == "not_found"
    # The same write id in another authority is another write.
    assert harness.service.submit(OTHER, {"id": "w", "scope": "s", "content": "unrelated"})["status"] == "queued"


def test_memories_page_in_applied_order_with_signed_cursors(harness: Harness) -> None:
    for i in range(7):
        harness.submit(f"w{i}", f"fact {i}", scope="paged")
    harness.drain()
    page = harness.service.list_memories(CALLER, "paged", 3, None)
    assert [m["id"] for m in page["items"]] == ["w0", "w1", "w2"] and page["cursor"]
    assert [m["id"] for m in harness.memories("paged")] == [f"w{i}" for i in range(7)]
    # A cursor is bound to its scope and authority.
    assert code_of(lambda: harness.service.list_memories(CALLER, "other", 3, page["cursor"])) == "invalid_argument"
    assert code_of(lambda: harness.service.list_memories(OTHER, "paged", 3, page["cursor"])) == "invalid_argument"
    assert code_of(lambda: harness.service.list_memories(CALLER, "paged", 101, None)) == "invalid_argument"
    assert code_of(lambda: harness.service.list_memories(CALLER, "bad\n", 3, None)) == "invalid_argument"


# ---- relations and judgments ---------------------------------------------------------------------


def _relations(harness: Harness, status: str = "") -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = harness.service.list_relations(CALLER, "s", status, 2, cursor)
        items += page["items"]
        cursor = page.get("cursor")
        if not cursor:
            return items


def test_candidates_are_pending_and_judged_once(harness: Harness) -> None:
    harness.submit("a", "the retry limit is 5")
    harness.submit("b", "the retry limit is 7")
    harness.submit("c", "the cache is enabled")
    harness.submit("d", "the cache is not enabled")
    harness.drain()
    pending = _relations(harness, "pending")
    assert [(r["from"], r["to"], r["verb"]) for r in pending] == [
        ("b", "a", "conflicts_with"),
        ("d", "c", "conflicts_with"),
    ]
    assert all("judgment" not in r for r in pending)
    evidence = harness.status("b")["evidence"]
    assert [c["id"] for c in evidence["candidates"]] == [pending[0]["id"]]
    rid = pending[0]["id"]
    judged = harness.service.judge(CALLER, rid, {"command_id": "j1", "decision": "confirmed", "note": "7 is right"})
    assert judged["relation"]["status"] == "confirmed"
    assert judged["relation"]["judgment"]["decision"] == "confirmed"
    assert judged["relation"]["judgment"]["note"] == "7 is right"
    # The exact retry answers the same; another judgment is a conflict; the same id reused, too.
    again = harness.service.judge(CALLER, rid, {"command_id": "j1", "decision": "confirmed", "note": "7 is right"})
    assert again == judged
    assert code_of(lambda: harness.service.judge(CALLER, rid, {"command_id": "j2", "decision": "dismissed"})) == (
        "judgment_conflict"
    )
    assert code_of(lambda: harness.service.judge(CALLER, rid, {"command_id": "j1", "decision": "dismissed"})) == (
        "idempotency_conflict"
    )
    assert [r["id"] for r in _relations(harness, "confirmed")] == [rid]
    assert [r["id"] for r in _relations(harness, "pending")] == [pending[1]["id"]]
    assert len(_relations(harness)) == 2
    assert code_of(lambda: harness.service.list_relations(CALLER, "s", "judged", None, None)) == "invalid_argument"
    missing = "r-" + "0" * 32
    assert code_of(lambda: harness.service.judge(CALLER, missing, {"command_id": "j3", "decision": "confirmed"})) == (
        "not_found"
    )
    assert code_of(lambda: harness.service.judge(CALLER, rid, {"command_id": "j4", "decision": "maybe"})) == (
        "invalid_argument"
    )


def test_racing_judgments_exactly_one_wins(harness: Harness) -> None:
    harness.submit("a", "the retry limit is 5")
    harness.submit("b", "the retry limit is 7")
    harness.drain()
    rid = _relations(harness)[0]["id"]
    barrier = threading.Barrier(6)
    outcomes: list[str] = []

    def judge(i: int) -> None:
        barrier.wait()
        decision = "confirmed" if i % 2 else "dismissed"
        outcomes.append(
            code_of(lambda: harness.service.judge(CALLER, rid, {"command_id": f"j{i}", "decision": decision}))
        )

    threads = [threading.Thread(target=judge, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["judgment_conflict"] * 5 + ["ok"]


def test_relations_the_store_refuses_leave_the_write_applied_with_detection_failed() -> None:
    class RefusingStore(InMemoryMemoryStore):
        def apply(self, application: Any) -> None:
            if application.relations:
                raise RelationsRefused("injected")
            super().apply(application)

    harness = fake_harness(store=RefusingStore())
    harness.submit("a", "the retry limit is 5")
    harness.submit("b", "the retry limit is 7")
    harness.drain()
    evidence = harness.status("b")["evidence"]
    assert evidence["code"] == RELATION_DETECTION_FAILED and evidence["write_ok"] is True
    assert [m["id"] for m in harness.memories()] == ["a", "b"]


# ---- poison, dead letters, redrive --------------------------------------------------------------


class PoisonStore(InMemoryMemoryStore):
    """Every apply in the poisoned scopes, or of the poisoned writes, fails, like a persistent
    storage error."""

    def __init__(self, *poisoned: str) -> None:
        super().__init__()
        self.poisoned = set(poisoned)
        self.poisoned_writes: set[str] = set()

    def apply(self, application: Any) -> None:
        if application.write.scope in self.poisoned or application.write.id in self.poisoned_writes:
            raise RuntimeError("storage keeps failing")
        super().apply(application)


def test_a_poison_write_is_failed_after_bounded_receives_and_other_scopes_keep_flowing() -> None:
    store = PoisonStore("bad")
    harness = fake_harness(store=store)
    harness.submit("p", "the retry limit is 5", scope="bad")
    for i in range(3):
        harness.submit(f"ok{i}", f"fact {i}", scope="good")
    queue = harness.queue
    assert isinstance(queue, InMemoryMemoryQueue)
    queue.deliver_round(harness.worker.handle)
    assert [m["id"] for m in harness.memories("good")] == ["ok0", "ok1", "ok2"]  # not held back
    harness.drain()
    status = harness.status("p")
    assert status["status"] == "failed"
    assert status["evidence"]["code"] == WRITE_FAILED and status["evidence"]["write_ok"] is False
    assert "storage keeps failing" in status["evidence"]["error"]["message"]
    assert [m.body for m in queue.dead] == [QueueMessage("acme", "p", "bad").to_body()]
    assert queue.messages == []


def test_the_writes_behind_a_poison_write_in_its_scope_are_not_swept_into_the_dlq() -> None:
    store = PoisonStore()
    harness = fake_harness(store=store)
    harness.submit("p", "poison", scope="s")
    for i in range(3):
        harness.submit(f"f{i}", f"follower {i}", scope="s")
    store.poisoned.add("s")
    queue = harness.queue
    assert isinstance(queue, InMemoryMemoryQueue)
    for _ in range(GIVE_UP_AT - 1):
        queue.deliver_round(harness.worker.handle)
    store.poisoned.clear()  # the followers would succeed; only `p` is poison
    store.poisoned_writes.add("p")
    harness.drain()
    assert harness.status("p")["status"] == "failed"
    assert [m["id"] for m in harness.memories()] == ["f0", "f1", "f2"]
    assert [QueueMessage.from_body(m.body).id for m in queue.dead] == ["p"]


def test_an_unreadable_message_is_buried_at_once() -> None:
    harness = fake_harness()
    assert harness.worker.handle("{not json", receive_count=1, group_id="g") == "buried"
    queue = harness.queue
    assert isinstance(queue, InMemoryMemoryQueue)
    assert [m.body for m in queue.dead] == ["{not json"]
    letters = queue.dead_letters(10)
    assert letters[0].message is None


def test_redrive_requeues_this_authoritys_failed_writes_only() -> None:
    store = PoisonStore("bad")
    harness = fake_harness(store=store)
    harness.submit("p", "the retry limit is 5", scope="bad")
    harness.service.submit(OTHER, {"id": "q", "scope": "bad", "content": "theirs"})
    harness.drain()
    assert harness.status("p")["status"] == "failed"
    assert harness.status("q", OTHER)["status"] == "failed"
    assert code_of(lambda: harness.service.redrive(CALLER)) == "forbidden"
    store.poisoned.clear()  # the cause is fixed
    assert harness.service.redrive(ADMIN) == {"moved": 1, "writes": ["p"]}
    assert harness.status("p")["status"] == "queued"
    harness.drain()
    status = harness.status("p")
    assert status["status"] == "complete" and status["evidence"]["code"] == WRITE_COMPLETE
    assert [m["id"] for m in harness.memories("bad")] == ["p"]
    queue = harness.queue
    assert isinstance(queue, InMemoryMemoryQueue)
    assert [QueueMessage.from_body(m.body).id for m in queue.dead] == ["q"]  # left for its own admin
    assert harness.service.redrive(Principal("globex", "admin")) == {"moved": 1, "writes": ["q"]}


def _cancel_race(trial: int) -> tuple[bool, str, list[str]]:
    store, queue = InMemoryMemoryStore(), InMemoryMemoryQueue()
    service = MemoryEdge(MemoryService(store, queue, CursorSigner(KEY)))
    worker = WriteWorker(store, queue, LexicalDetector())
    write_id = f"w{trial}"
    service.submit(CALLER, {"id": write_id, "scope": "s", "content": "x is 1"})
    barrier = threading.Barrier(2)
    result: dict[str, Any] = {}

    def cancel() -> None:
        barrier.wait()
        result["cancel"] = service.cancel(CALLER, write_id)["cancelled"]

    def start() -> None:
        barrier.wait()
        queue.drain(worker.handle)

    threads = [threading.Thread(target=cancel), threading.Thread(target=start)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    status = service.status(CALLER, write_id)["status"]
    return result["cancel"], status, [m.id for m in store.memories("acme", "s", 0, 10)]


def test_the_cancel_race_exactly_one_of_cancel_and_start_wins() -> None:
    outcomes = Counter()
    for trial in range(100):
        cancelled, status, stored = _cancel_race(trial)
        assert (cancelled, status, stored) in ((True, "cancelled", []), (False, "complete", [f"w{trial}"]))
        outcomes[status] += 1
    assert sum(outcomes.values()) == 100


def test_relying_on_sqs_redrive_alone_would_sweep_the_followers_too() -> None:
    """Why the worker gives up on its own: the contrast case, a worker that never gives up."""
    store = PoisonStore()
    queue = InMemoryMemoryQueue()
    service = MemoryEdge(MemoryService(store, queue, CursorSigner(KEY)))
    stubborn = WriteWorker(store, queue, LexicalDetector(), give_up_at=10**6)
    service.submit(CALLER, {"id": "p", "scope": "s", "content": "poison"})
    service.submit(CALLER, {"id": "f", "scope": "s", "content": "follower"})
    store.poisoned_writes.add("p")
    queue.drain(stubborn.handle)
    assert sorted(QueueMessage.from_body(m.body).id for m in queue.dead) == ["f", "p"]
    assert service.status(CALLER, "f")["status"] == "queued"  # innocent, and stranded


# ---- the state machine, flip by flip --------------------------------------------------------------

FLIPS = ("start", "cancel", "fail", "requeue")


def _write_in(harness: Harness, status: str, write_id: str) -> None:
    harness.submit(write_id, "x is 1", scope=f"scope-{write_id}")
    if status == "complete":
        harness.worker.process(QueueMessage("acme", write_id, f"scope-{write_id}"))
    elif status != "queued":
        kind = {"started": "start", "cancelled": "cancel", "failed": "fail"}[status]
        assert _flip(harness, kind, write_id, "2026-01-01T00:00:00.000Z")
    assert harness.status(write_id)["status"] == status


def _flip(harness: Harness, kind: str, write_id: str, now: str = "2026-01-01T00:00:01.000Z") -> bool:
    store = harness.store
    if kind == "start":
        return store.start_write("acme", write_id, now)[0]
    if kind == "cancel":
        return store.cancel_write("acme", write_id, Evidence(WRITE_CANCELLED, False), now)[0]
    if kind == "fail":
        return store.fail_write("acme", write_id, Evidence(WRITE_FAILED, False), now)
    before = store.get_write("acme", write_id)
    after = store.redrive_write("acme", write_id, now)
    assert before is not None and after is not None
    return before.status == "failed" and after.status == "queued"


@pytest.mark.parametrize("status", machine.STATUSES)
@pytest.mark.parametrize("kind", FLIPS)
def test_every_flip_in_every_status(harness: Harness, kind: str, status: str) -> None:
    write_id = f"{kind}-{status}"
    _write_in(harness, status, write_id)
    allowed = machine.next_status(kind, status)
    assert _flip(harness, kind, write_id) is (allowed is not None)
    assert harness.status(write_id)["status"] == (allowed or status)


def test_a_bulk_load_indexes_a_scope_as_applying_it_one_by_one(harness: Harness) -> None:
    from dataclasses import replace

    from dovecote.memory.retrieval import index_terms

    contents = ["The retry limit is 5", "Deploys happen on Fridays", "The retry limit is 7", "the ledger uses Postgres"]
    for i, content in enumerate(contents):
        harness.submit(f"w{i}", content, tags=["subject:x"] if i % 2 else None)
    harness.drain()
    applied = harness.store.memories("acme", "s", 0, 100)
    harness.store.bulk_load("acme", "copy", [replace(m, scope="copy") for m in applied])  # type: ignore[attr-defined]
    terms = tuple({t for m in applied for t in index_terms(m.content, m.tags)})
    assert harness.store.scope_view("acme", "copy", terms) == harness.store.scope_view("acme", "s", terms)
    assert [m.content for m in harness.store.memories("acme", "copy", 0, 100)] == contents
    with pytest.raises(ValueError):
        harness.store.bulk_load("acme", "copy", [])  # type: ignore[attr-defined]
