"""The worker loop never strands a task (issue 16, item 6), against a small fake of the task routes
behind httpx.MockTransport: a stop releases the leases it has not accepted and keeps (and reports) the
accepted ones; a signal during a long-poll replays that claim's id and releases what it granted; a
restart resumes what it can start and releases the unaccepted rest; a task taken over past submitted
is beaten at once (that accepts its grant); an inherited frozen artifact is completed, or the task
failed when the artifact is not this task's frozen one. Real signals: tests/e2e/test_worker_signals.py."""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

import httpx
import pytest

from dovecote.client import DovecoteClient
from dovecote.client.worker import INHERITED, Job, Worker
from tests.support.fake_api import FakeRoutes
from tests.support.threads import eventually

NOT_FOUND = {"error": {"code": "not_found", "message": "none", "details": {}}}
STALE = {"error": {"code": "stale_lease", "message": "", "details": {}}}
MOVES = {
    "accept": "working",
    "reject": "rejected",
    "fail": "failed",
    "complete": "completed",
    "request-input": "input_required",
}


class Tasks(FakeRoutes):
    """Tasks leased to worker "w": `leases` are held already (GET /v1/leases), `claimable` are granted
    one per claim id (a claim id seen again replays its grant). Records every request."""

    def __init__(
        self, leases: list[dict[str, Any]] | None = None, claimable: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__()
        self.tasks: dict[str, dict[str, Any]] = {}
        self.fences: dict[str, int] = {}
        self.accepted: dict[str, bool] = {}
        self.held: list[str] = []
        for task in leases or []:
            self._add(task, held=True)
        self.claimable = [dict(t) for t in claimable or []]
        for task in claimable or []:
            self._add(task, held=False)
        self.grants: dict[str, str] = {}  # claim id → task
        self.artifacts: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self.on_claim: Any = None

    def _add(self, task: dict[str, Any], *, held: bool) -> None:
        self.tasks[task["id"]] = {"revision": 1, "lease_timeout_seconds": 0, "workspace": "ws", **task}
        self.fences[task["id"]] = 1 if held else 0
        self.accepted[task["id"]] = held and task.pop("accepted", False)
        if held:
            self.held.append(task["id"])

    def assignment(self, tid: str) -> dict[str, Any]:
        out = {"task": dict(self.tasks[tid]), "fence": self.fences[tid], "worker": "w", "granted_at": "g"}
        if self.accepted[tid]:
            out["accepted_at"] = "a"
        return out

    def answer(self, request: httpx.Request, path: str, body: dict[str, Any]) -> httpx.Response:
        if request.method == "GET" and path == "/v1/leases":
            return httpx.Response(200, json={"items": [self.assignment(t) for t in self.held]})
        if request.method == "GET" and path.startswith("/v1/workspaces/"):
            artifact = self.artifacts.get(path.rsplit("/", 1)[-1])
            if artifact is None:
                return httpx.Response(404, json=NOT_FOUND)
            return httpx.Response(
                200, json={"artifact": artifact, "payload": {"media_type": "text/plain", "text": "x"}}
            )
        if path.endswith("/messages"):
            return httpx.Response(200, json={"items": [], "next": 0, "has_more": False})
        if path == "/v1/leases/claim":
            self.requests.append(("claim", "", body))
            tid = self.grants.get(body["command_id"])
            if tid is None and self.claimable:
                tid = self.claimable.pop(0)["id"]
                self.grants[body["command_id"]] = tid
                self.fences[tid] += 1
                self.held.append(tid)
            if self.on_claim is not None:
                self.on_claim(body)  # e.g. a signal arriving while this claim's answer is on its way
            if tid is None:
                return httpx.Response(404, json=NOT_FOUND)
            return httpx.Response(200, json={"assignment": self.assignment(tid)})
        parts = path.split("/")  # /v1/tasks/{id}/<kind> or /v1/tasks/{id}/lease/<kind>
        tid, kind = parts[3], parts[-1]
        self.requests.append((kind, tid, body))
        if tid not in self.held or body.get("fence") != self.fences[tid]:
            return httpx.Response(409, json=STALE)
        task = self.tasks[tid]
        if kind == "heartbeat":
            if task["state"] != "submitted":
                self.accepted[tid] = True
            return httpx.Response(200, json={"assignment": self.assignment(tid)})
        if kind == "fence":
            self.held.remove(tid)
            return httpx.Response(204)
        self.accepted[tid] = True
        task.update(state=MOVES[kind], revision=task["revision"] + 1)
        if kind == "complete":
            task["final"] = body["message"]["parts"][0]["text"]
            task["named"] = body.get("artifact_id")
        if task["state"] in ("completed", "failed", "rejected"):
            self.held.remove(tid)
        return httpx.Response(200, json={"task": dict(task)})

    def sent(self, tid: str) -> list[str]:
        return [kind for kind, t, _ in self.requests if t == tid and kind != "heartbeat"]


def client(fake: Tasks) -> DovecoteClient:
    return DovecoteClient("http://fake", "dvc_w_s", transport=httpx.MockTransport(fake), backoff=0, max_attempts=2)


def wait_until(predicate: Any, seconds: float = 10) -> None:
    assert eventually(predicate, seconds, poll=0.02), "condition not reached in time"


def test_a_signal_releases_what_it_has_not_accepted_and_keeps_what_it_has(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = Tasks(claimable=[{"id": "decide", "state": "submitted"}, {"id": "hold", "state": "submitted"}])
    gate = threading.Event()

    def handle(job: Job) -> None:
        if job.id == "hold":
            job.accept()
        gate.wait(30)  # both handlers are still running when the worker stops

    worker = Worker(client(fake), handle, wait_seconds=0, concurrency=2, auto_accept=False, stop_grace_seconds=0.5)
    thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False})
    try:
        with caplog.at_level(logging.INFO, logger="dovecote.worker"):
            thread.start()
            wait_until(lambda: fake.sent("hold") == ["accept"] and "decide" in worker.held)
            # As SIGTERM does; both slots are busy, so the loop is not inside a claim.
            worker._on_signal(signal.SIGTERM, None)
            thread.join(10)
        assert not thread.is_alive()  # it did not wait for the handlers past the grace
        assert fake.sent("decide") == ["fence"] and "decide" not in fake.held
        assert fake.sent("hold") == ["accept"] and "hold" in fake.held
        assert (worker.released, worker.kept) == (["decide"], ["hold"])
        assert "released 1 unaccepted lease(s): decide" in caplog.text
        assert "keeping 1 accepted lease(s): hold (fence 1, working)" in caplog.text
    finally:
        gate.set()


def test_a_stop_keeps_a_parked_lease_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    fake = Tasks(claimable=[{"id": "ask", "state": "submitted"}])
    worker = Worker(client(fake), lambda job: job.request_input("?"), wait_seconds=0)
    thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False})
    with caplog.at_level(logging.INFO, logger="dovecote.worker"):
        thread.start()
        wait_until(lambda: "ask" in worker.held and worker.held["ask"].parked)
        worker.stop()
        thread.join(10)
    assert fake.sent("ask") == ["accept", "request-input"] and "ask" in fake.held  # nothing released
    assert (worker.kept, worker.released) == (["ask"], [])
    assert "keeping 1 accepted lease(s): ask (fence 1, input_required)" in caplog.text


def test_a_signal_during_a_long_poll_replays_the_claim_and_releases_its_grant() -> None:
    fake = Tasks(claimable=[{"id": "late", "state": "submitted"}])
    handled: list[str] = []
    worker = Worker(client(fake), lambda job: handled.append(job.id), wait_seconds=20)

    def signal_once(body: dict[str, Any]) -> None:
        if len([r for r in fake.requests if r[0] == "claim"]) == 1:
            # Granted server side; the answer is still on its way when the signal arrives (the
            # handler runs in the thread that is inside the request, as a real one does).
            worker._on_signal(signal.SIGTERM, None)

    fake.on_claim = signal_once
    worker.run(handle_signals=False)
    claims = [body for kind, _, body in fake.requests if kind == "claim"]
    assert len(claims) == 2 and claims[0]["command_id"] == claims[1]["command_id"]
    assert claims[0].get("wait_seconds") == 20 and "wait_seconds" not in claims[1]  # the replay does not wait
    assert fake.sent("late") == ["fence"] and worker.released == ["late"] and handled == []
    assert "late" not in fake.held


def test_a_restart_resumes_what_it_can_start_and_releases_the_unaccepted_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = Tasks(
        leases=[
            {"id": "new-1", "state": "submitted"},
            {"id": "busy", "state": "working", "accepted": True},
            {"id": "asked", "state": "input_required", "accepted": True},
            {"id": "new-2", "state": "submitted"},
        ]
    )
    worker = Worker(client(fake), lambda job: None, wait_seconds=0)
    with caplog.at_level(logging.INFO, logger="dovecote.worker"):
        resumed = worker.recover()
    assert sorted(j.id for j in resumed) == ["asked", "busy"]  # one handler slot: the working one first
    assert fake.sent("new-1") == ["fence"] and fake.sent("new-2") == ["fence"]
    assert "released 2 lease(s) it cannot start now: new-1, new-2" in caplog.text
    with_two = Tasks(leases=[{"id": "new-1", "state": "submitted"}, {"id": "new-2", "state": "submitted"}])
    assert len(Worker(client(with_two), lambda job: None, concurrency=2).recover()) == 2
    assert with_two.sent("new-1") == []


def test_a_task_taken_over_past_submitted_is_beaten_at_once() -> None:
    fake = Tasks(claimable=[{"id": "left", "state": "working", "lease_timeout_seconds": 300}])
    seen: list[bool] = []

    def handle(job: Job) -> None:
        wait_until(lambda: job.accepted, 5)  # the heartbeat thread accepts it, not a command
        seen.append(job.accepted)
        job.complete("done")

    Worker(client(fake), handle, wait_seconds=0).run(once=True, handle_signals=False)
    assert seen == [True]
    assert [k for k, t, _ in fake.requests if t == "left"] == ["heartbeat", "complete"]


def test_an_inherited_frozen_artifact_is_completed_without_calling_the_handler() -> None:
    fake = Tasks(claimable=[{"id": "t1", "state": "working", "artifact": "patch-1"}])
    fake.artifacts["patch-1"] = {"id": "patch-1", "task": "t1", "state": "frozen", "digest": "sha256:" + "ab" * 32}
    handled: list[str] = []
    Worker(client(fake), lambda job: handled.append(job.id), wait_seconds=0).run(once=True, handle_signals=False)
    assert handled == [] and fake.tasks["t1"]["state"] == "completed"
    assert fake.tasks["t1"]["named"] == "patch-1"
    assert fake.tasks["t1"]["final"] == INHERITED.format(artifact="patch-1", digest="sha256:" + "ab" * 32)


@pytest.mark.parametrize(
    "stored",
    [
        None,  # gone
        {"id": "patch-1", "task": "t1", "state": "discarded", "digest": "sha256:00"},
        {"id": "patch-1", "task": "other", "state": "frozen", "digest": "sha256:00"},
    ],
)
def test_an_inherited_artifact_that_is_not_this_tasks_frozen_one_fails_the_task(
    stored: dict[str, Any] | None, caplog: pytest.LogCaptureFixture
) -> None:
    fake = Tasks(claimable=[{"id": "t1", "state": "working", "artifact": "patch-1"}])
    if stored is not None:
        fake.artifacts["patch-1"] = stored
    handled: list[str] = []
    with caplog.at_level(logging.WARNING, logger="dovecote.worker"):
        Worker(client(fake), lambda job: handled.append(job.id), wait_seconds=0).run(once=True, handle_signals=False)
    assert handled == [] and fake.tasks["t1"]["state"] == "failed"
    assert "t1: failing the task: its artifact patch-1 is" in caplog.text


def test_a_job_that_froze_its_own_artifact_goes_back_to_its_handler() -> None:
    """Freeze, ask, and on the reply the handler (not the inherited path) completes."""
    fake = Tasks(claimable=[{"id": "t1", "state": "submitted"}])
    calls: list[str] = []

    def handle(job: Job) -> None:
        calls.append(job.state)
        if len(calls) == 1:
            job.froze = True  # as Job.freeze leaves it (the fake has no freeze route)
            job.task = {**job.task, "artifact": "mine"}
            job.request_input("ok?")
        else:
            job.complete("done", artifact_id="mine")

    worker = Worker(client(fake), handle, wait_seconds=0, park_poll_seconds=0.1)
    thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False}, daemon=True)
    thread.start()
    wait_until(lambda: "t1" in worker.held and worker.held["t1"].parked)
    with fake.lock:
        fake.tasks["t1"].update(state="working", revision=fake.tasks["t1"]["revision"] + 1, artifact="mine")
    wait_until(lambda: fake.tasks["t1"]["state"] == "completed")
    worker.stop()
    thread.join(10)
    assert calls == ["working", "working"] and fake.tasks["t1"]["final"] == "done"


def test_a_heartbeat_never_races_a_command_of_its_job() -> None:
    """A beat due while a (slow) complete is on the wire is not sent: the command is the beat, and a
    beat sent beside it would come back stale_lease once the complete ends the task."""
    fake = Tasks(claimable=[{"id": "t1", "state": "submitted", "lease_timeout_seconds": 1}])
    answer = fake.answer
    stale: list[float] = []

    def slow(request: httpx.Request, path: str, body: dict[str, Any]) -> httpx.Response:
        if path.endswith("/complete"):
            time.sleep(1.0)  # four beat intervals (a quarter of 1 s) on the wire
        response = answer(request, path, body)
        if response.status_code == 409:
            stale.append(time.monotonic())
        return response

    fake.answer = slow  # type: ignore[method-assign]

    def handle(job: Job) -> None:
        time.sleep(0.6)  # beats run meanwhile
        job.complete("done")

    Worker(client(fake), handle, wait_seconds=0).run(once=True, handle_signals=False)
    kinds = [k for k, t, _ in fake.requests if t == "t1"]
    assert kinds[-1] == "complete" and "heartbeat" in kinds[:-1]
    assert stale == []
