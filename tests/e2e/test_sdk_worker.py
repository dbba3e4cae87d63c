"""The SDK worker loop against `dovecote dev` (dispatcher every 0.5 s), each test in an authority of
its own so "the oldest claimable task" is the test's: a task is claimed by long-poll and kept past a
short lease timeout by heartbeats; a killed worker's task is fenced by the dispatcher and reclaimed
by another worker with fence + 1; a parked task resumes on the caller's reply, across a restart; a
handler that raises fails its task; wait_for follows the event stream."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from dovecote.client import DovecoteClient, DovecoteError, WaitTimeout
from dovecote.client.worker import Job, Worker
from tests.conftest import ROOT
from tests.support.authorities import Authority, fresh_authority
from tests.support.workers import take_over


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def authority(dev_runtime: dict[str, Any]) -> Authority:
    return fresh_authority(dev_runtime, "wk")


class Counted:
    """Counts requests by (method, path, status) through httpx event hooks."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []

    def hooks(self) -> dict[str, list[Any]]:
        return {"response": [self.response]}

    def response(self, response: httpx.Response) -> None:
        request = response.request
        path = request.url.path
        if "/lease/heartbeat" in path:
            path = "heartbeat"
        self.requests[f"{request.method} {path} {response.status_code}"] += 1
        if path == "/v1/leases/claim":
            import json

            self.bodies.append(json.loads(request.content))


def sdk(authority: Authority, role: str, worker: str | None = None, **options: Any) -> DovecoteClient:
    return DovecoteClient(authority.endpoint, authority.token(role, worker), **options)


def test_a_task_is_claimed_by_long_poll_kept_by_heartbeats_and_completed(
    authority: Authority, running: Callable[[Worker], threading.Thread]
) -> None:
    caller = sdk(authority, "caller")
    counted = Counted()
    client = sdk(authority, "worker", "w-beat", event_hooks=counted.hooks())
    seen: list[tuple[int, str]] = []

    def handle(job: Job) -> None:
        seen.append((job.fence, job.state))
        time.sleep(5)  # two and a half lease timeouts: only the heartbeats keep the lease
        assert not job.lost.is_set()
        job.complete(f"done: {Job.text_of(job.messages()[0])}")

    running(Worker(client, handle, wait_seconds=10))
    time.sleep(1.5)  # the worker is now inside a long-poll claim
    tid = uid("t")
    caller.create_task(tid, "beat me", lease_timeout_seconds=2)
    task = caller.wait_for(tid, "completed", timeout=40)
    assert (task["revision"], task["message_count"]) == (3, 2)
    assert seen == [(1, "working")]  # one lease, never fenced: fence 1 throughout
    events = [e["type"] for e in caller.events(tid)["items"]]
    assert events == ["task_submitted", "task_accepted", "task_completed"]
    # Every 0.5 s (a quarter of 2 s) in principle; at least 2 in 5 s were needed to keep a 2 s lease
    # (how many fit depends on the machine's load: speed is for bench/workers.py).
    assert counted.requests["POST heartbeat 200"] >= 2
    assert counted.requests["POST heartbeat 409"] == 0
    claims = [b for b in counted.bodies if b.get("wait_seconds")]
    assert claims and all(b["wait_seconds"] == 10 for b in claims)  # a long-poll, not a poll loop
    assert counted.requests["POST /v1/leases/claim 200"] == 1


KILLABLE = """
import os, sys, time
from dovecote.client import DovecoteClient
from dovecote.client.worker import Worker

def handle(job):
    print("holding", job.id, job.fence, flush=True)
    time.sleep(3600)

client = DovecoteClient(os.environ["DOVECOTE_ENDPOINT"], os.environ["DOVECOTE_TOKEN"])
Worker(client, handle, wait_seconds=5).run()
"""


def test_a_killed_workers_task_is_fenced_and_reclaimed_by_another_worker(
    authority: Authority, running: Callable[[Worker], threading.Thread]
) -> None:
    caller = sdk(authority, "caller")
    tid = uid("t")
    caller.create_task(tid, "survive a crash", lease_timeout_seconds=2)
    env = {
        **os.environ,
        "DOVECOTE_ENDPOINT": authority.endpoint,
        "DOVECOTE_TOKEN": authority.token("worker", "w-doomed"),
    }
    doomed = subprocess.Popen(
        [sys.executable, "-c", KILLABLE], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert doomed.stdout is not None
        line = doomed.stdout.readline()
        assert line.split() == ["holding", tid, "1"], line
        time.sleep(3)  # it is heartbeating: its lease outlives its timeout while it lives
        assert sdk(authority, "worker", "w-doomed").lease(tid) is not None
    finally:
        doomed.kill()
        doomed.wait(timeout=10)

    survivor = sdk(authority, "worker", "w-survivor")
    fences, task = take_over(running, survivor, caller, tid, "finished by the survivor", wait_seconds=3, timeout=40)
    assert fences == [2]  # the dispatcher fenced generation 1; the survivor holds generation 2
    assert task["state"] == "completed"
    with pytest.raises(DovecoteError) as stale:
        sdk(authority, "worker", "w-doomed").heartbeat(tid, 1)
    assert stale.value.code == "stale_lease"
    events = [e["type"] for e in caller.events(tid)["items"]]
    assert events == ["task_submitted", "task_accepted", "task_completed"]  # accepted once, by the first


def test_a_parked_task_resumes_on_the_reply_even_after_a_restart(
    authority: Authority, running: Callable[[Worker], threading.Thread]
) -> None:
    caller = sdk(authority, "caller")
    token = authority.token("worker", "w-park")

    def converse(job: Job) -> None:
        replies = [m for m in job.messages() if m["author"] == "caller"][1:]
        if not replies:
            job.request_input("which colour?")
            return
        job.complete(f"you said {Job.text_of(replies[-1])}")

    first = Worker(DovecoteClient(authority.endpoint, token), converse, wait_seconds=2, park_poll_seconds=0.5)
    thread = running(first)
    tid = uid("t")
    caller.create_task(tid, "paint it")
    asked = caller.wait_for(tid, "input_required", timeout=30)
    assert tid in first.held and first.held[tid].parked
    first.stop()
    thread.join(timeout=30)
    caller.reply(tid, asked["revision"], "blue")

    second = Worker(DovecoteClient(authority.endpoint, token), converse, wait_seconds=2, park_poll_seconds=0.5)
    running(second)
    done = caller.wait_for(tid, "completed", timeout=30)
    assert caller.messages(tid)["items"][-1]["parts"][0]["text"] == "you said blue"
    assert done["revision"] == 5  # accept, ask, reply, complete: nothing ran twice
    assert second.handled == 1


def test_a_handler_that_raises_fails_its_task(
    authority: Authority, running: Callable[[Worker], threading.Thread]
) -> None:
    caller = sdk(authority, "caller")

    def broken(job: Job) -> None:
        raise RuntimeError("bug")

    running(Worker(sdk(authority, "worker", "w-broken"), broken, wait_seconds=2))
    tid = uid("t")
    caller.create_task(tid, "x")
    assert caller.wait_for(tid, timeout=30)["state"] == "failed"


def test_wait_for_times_out_with_the_state_it_saw(authority: Authority) -> None:
    caller = sdk(authority, "caller")
    tid = uid("t")
    caller.create_task(tid, "nobody works here")
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as caught:
        caller.wait_for(tid, "completed", timeout=1.5)
    assert 1.4 <= time.monotonic() - started < 10
    assert caught.value.details["state"] == "submitted"


def test_concurrency_runs_handlers_side_by_side(
    authority: Authority, running: Callable[[Worker], threading.Thread]
) -> None:
    caller = sdk(authority, "caller")
    together = threading.Barrier(2, timeout=30)

    def meet(job: Job) -> None:
        together.wait()  # passes only when two handlers run at once
        job.complete("met")

    running(Worker(sdk(authority, "worker", "w-pair"), meet, wait_seconds=2, concurrency=2))
    tids = [uid("t"), uid("t")]
    for tid in tids:
        caller.create_task(tid, "pair up")
    assert [caller.wait_for(tid, timeout=40)["state"] for tid in tids] == ["completed", "completed"]
