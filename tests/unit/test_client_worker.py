"""The worker loop's decisions, against a small fake of the task routes behind httpx.MockTransport:
what happens after `handle` returns or raises, when Dovecote is unreachable, when a heartbeat finds
the lease fenced, how fast leases are beaten, and that command ids are derived, not random."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest

from dovecote.client import DovecoteClient
from dovecote.client.worker import Job, Worker
from tests.support.fake_api import FakeRoutes


class FakeTasks(FakeRoutes):
    """One task, leased to this worker with fence 1; records every command it receives."""

    def __init__(self, state: str = "submitted", lease_timeout: int = 0) -> None:
        super().__init__()
        self.task = {"id": "t1", "state": state, "revision": 1, "lease_timeout_seconds": lease_timeout}
        self.fence, self.owner = 1, "w"
        self.commands: list[tuple[str, dict[str, Any]]] = []
        self.claimed = False
        self.unreachable: set[str] = set()

    def assignment(self) -> dict[str, Any]:
        return {"task": dict(self.task), "fence": self.fence, "worker": self.owner, "granted_at": "g"}

    def answer(self, request: httpx.Request, path: str, body: dict[str, Any]) -> httpx.Response:
        kind = path.rsplit("/", 1)[-1]
        if kind in self.unreachable:
            raise httpx.ConnectError("refused")
        if path == "/v1/leases":
            return httpx.Response(200, json={"items": []})
        if path == "/v1/leases/claim":
            if self.claimed:
                return httpx.Response(404, json={"error": {"code": "not_found", "message": "none", "details": {}}})
            self.claimed = True
            self.commands.append(("claim", body))
            return httpx.Response(200, json={"assignment": self.assignment()})
        if path.endswith("/messages"):
            return httpx.Response(200, json={"items": [], "next": 0, "has_more": False})
        self.commands.append((kind, body))
        if kind in ("heartbeat", "fence"):
            if not self.owner or body["fence"] != self.fence:
                return httpx.Response(409, json={"error": {"code": "stale_lease", "message": "", "details": {}}})
            if kind == "fence":
                self.owner = ""
                return httpx.Response(204)
            return httpx.Response(200, json={"assignment": self.assignment()})
        moves = {"accept": "working", "reject": "rejected", "fail": "failed", "complete": "completed"}
        moves["request-input"] = "input_required"
        self.task = {**self.task, "state": moves[kind], "revision": self.task["revision"] + 1}
        return httpx.Response(200, json={"task": dict(self.task)})

    def kinds(self) -> list[str]:
        return [k for k, _ in self.commands if k not in ("heartbeat",)]


def client(fake: FakeTasks) -> DovecoteClient:
    return DovecoteClient("http://fake", "dvc_w_s", transport=httpx.MockTransport(fake), backoff=0, max_attempts=2)


def run_once(fake: FakeTasks, handle: Any, **options: Any) -> Worker:
    worker = Worker(client(fake), handle, wait_seconds=0, **options)
    worker.run(once=True)
    return worker


def test_a_finished_task_is_accepted_handled_and_dropped() -> None:
    fake = FakeTasks()
    worker = run_once(fake, lambda job: job.complete("done"))
    assert fake.kinds() == ["claim", "accept", "complete"] and worker.handled == 1 and not worker.held
    accept, complete = fake.commands[1][1], fake.commands[2][1]
    c = client(fake)
    # Derived ids: (task, fence, command, revision), so a crash-and-retry sends the same command.
    assert accept["command_id"] == c.derived_id("w", "t1", 1, "accept", 1)
    assert complete["command_id"] == c.derived_id("w", "t1", 1, "complete", 2)
    assert complete["submission_id"] == c.derived_id("s", "submission", complete["command_id"])


def test_a_handler_that_returns_early_releases_the_lease() -> None:
    fake = FakeTasks()
    run_once(fake, lambda job: None)
    assert fake.kinds() == ["claim", "accept", "fence"] and fake.owner == ""


def test_a_handler_that_raises_fails_the_task_and_rejects_a_submitted_one() -> None:
    fake = FakeTasks()

    def boom(job: Job) -> None:
        raise RuntimeError("bug")

    run_once(fake, boom)
    assert fake.kinds() == ["claim", "accept", "fail"]
    submitted = FakeTasks()
    run_once(submitted, boom, auto_accept=False)
    assert submitted.kinds() == ["claim", "reject"]


def test_an_unreachable_dovecote_drops_the_job_without_failing_or_releasing() -> None:
    fake = FakeTasks()
    fake.unreachable.add("complete")
    worker = run_once(fake, lambda job: job.complete("done"))
    assert fake.kinds() == ["claim", "accept"] and not worker.held and fake.owner == "w"


def test_a_parked_job_is_kept_and_comes_back_when_the_caller_replies() -> None:
    fake = FakeTasks(lease_timeout=300)
    calls: list[str] = []

    def converse(job: Job) -> None:
        calls.append(job.state)
        if len(calls) == 1:
            job.request_input("?")
        else:
            job.complete("thanks")

    worker = Worker(client(fake), converse, wait_seconds=0, park_poll_seconds=0.1)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not (worker.held.get("t1") and worker.held["t1"].parked) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert worker.held["t1"].parked
    with fake.lock:
        fake.task = {**fake.task, "state": "working", "revision": fake.task["revision"] + 1}  # the reply
    while fake.task["state"] != "completed" and time.monotonic() < deadline:
        time.sleep(0.02)
    worker.stop()
    thread.join(timeout=10)
    assert calls == ["working", "working"] and fake.task["state"] == "completed"
    beats = [k for k, _ in fake.commands if k == "heartbeat"]
    assert beats  # the parked lease was watched through heartbeats, at the parked pace


def test_heartbeats_run_at_a_quarter_of_the_timeout_and_stop_on_a_stale_lease() -> None:
    fake = FakeTasks(lease_timeout=1)
    lost: list[bool] = []

    def slow(job: Job) -> None:
        time.sleep(1.2)
        with fake.lock:
            fake.fence = 2  # the dispatcher fenced this lease and another worker took it
        time.sleep(0.6)
        lost.append(job.lost.is_set())

    run_once(fake, slow)
    beats = [body for kind, body in fake.commands if kind == "heartbeat"]
    assert 4 <= len(beats) <= 8  # every 0.25 s for about 1.2 s, then one that finds the fence moved
    assert lost == [True]
    assert fake.kinds()[-1] == "accept"  # nothing sent on the lost lease: no release, no fail


def test_the_worker_refuses_a_long_poll_the_api_would_refuse() -> None:
    with pytest.raises(ValueError):
        Worker(client(FakeTasks()), lambda job: None, wait_seconds=21)
