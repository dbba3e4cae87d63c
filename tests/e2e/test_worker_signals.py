"""Workers never strand a task (issue 16, item 6), against `dovecote dev` (dispatcher every 0.5 s), with
real processes and real signals, each test in an authority of its own:
- a worker that claims and dies without accepting: the dispatcher fences its grant at the task's
  accept timeout and another worker gets the task with fence + 1; the dead one's late accept is stale;
- SIGTERM: the SDK worker releases the lease it has not accepted (claimable at once, long before its
  accept timeout) and keeps, and names, the one it has; a restart resumes it;
- SIGINT during an idle long-poll: the echo worker exits at once, and a task created while its
  abandoned long-poll still runs on the server is not stranded;
- SIGTERM on the echo worker keeps its parked lease, resumed after a restart;
- an inherited frozen artifact: the echo worker completes the task naming it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from dovecote.client import DovecoteClient, DovecoteError
from dovecote.client.worker import INHERITED, Job, Worker
from tests.conftest import ROOT
from tests.support.authorities import Authority, fresh_authority
from tests.support.workers import take_over

ECHO = str(ROOT / "examples" / "echo_worker.py")


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def authority(dev_runtime: dict[str, Any]) -> Authority:
    return fresh_authority(dev_runtime, "sig")


def sdk(authority: Authority, role: str, worker: str | None = None) -> DovecoteClient:
    return DovecoteClient(authority.endpoint, authority.token(role, worker))


def worker_env(authority: Authority, worker: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")}
    return env | {"DOVECOTE_ENDPOINT": authority.endpoint, "DOVECOTE_TOKEN": authority.token("worker", worker)}


def spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(args, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def read_until(process: subprocess.Popen[str], wanted: Callable[[list[str]], bool], seconds: float = 60) -> list[str]:
    """Lines of the process's output, read until `wanted` accepts the lines read so far."""
    assert process.stdout is not None
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if wanted(lines):
                found.set()
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert found.wait(seconds), "not seen in time:\n" + "\n".join(lines)
    return lines


def finish(process: subprocess.Popen[str], seconds: float = 20) -> tuple[int, str, float]:
    """Wait for the process to exit on its own: (exit code, the rest of its output, seconds taken)."""
    started = time.monotonic()
    try:
        output, _ = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate(timeout=10)
        raise AssertionError(f"still running {seconds} s after the signal:\n{output}") from None
    return process.returncode, output, time.monotonic() - started


def test_a_worker_that_dies_without_accepting_strands_nothing(
    authority: Authority, running: Callable[[Worker], threading.Thread]
) -> None:
    caller = sdk(authority, "caller")
    tid = uid("t")
    caller.create_task(tid, "take me", accept_timeout_seconds=2)  # the lease timeout stays 300 s
    # A real process claims it and exits: a worker gone between its claim and its accept.
    claim = subprocess.run(
        [sys.executable, "-m", "dovecote.cli", "worker", "claim", "--json"],
        env=worker_env(authority, "w-dies"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert claim.returncode == 0, claim.stdout + claim.stderr
    assert '"fence": 1' in claim.stdout and tid in claim.stdout
    granted = time.monotonic()

    lives = sdk(authority, "worker", "w-lives")
    fences, task = take_over(running, lives, caller, tid, "taken over", wait_seconds=5, timeout=60)
    waited = time.monotonic() - granted
    assert fences == [2]  # the dispatcher fenced generation 1, never accepted
    assert 1.5 < waited < 60  # the accept timeout, not the 300 s lease timeout
    assert [e["type"] for e in caller.events(tid)["items"]] == ["task_submitted", "task_accepted", "task_completed"]
    # The dead worker's late accept is stale and changes nothing.
    with pytest.raises(DovecoteError) as stale:
        sdk(authority, "worker", "w-dies").worker_command("accept", tid, 1, 1, uid("c"))
    assert stale.value.code == "stale_lease"
    assert caller.get_task(tid)["revision"] == task["revision"] == 3


HOLDER = """
import logging, os, sys, threading
from dovecote.client import DovecoteClient
from dovecote.client.worker import Job, Worker

logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
logging.getLogger("httpx").setLevel(logging.WARNING)

def handle(job):
    if job.state == "submitted" and Job.text_of(job.messages()[0]) == "accept me":
        job.accept()
    print("holding", job.id, job.state, flush=True)
    threading.Event().wait()  # busy until the process ends

client = DovecoteClient(os.environ["DOVECOTE_ENDPOINT"], os.environ["DOVECOTE_TOKEN"])
worker = Worker(client, handle, wait_seconds=5, concurrency=2, auto_accept=False, stop_grace_seconds=1)
worker.run()
print("released", worker.released, "kept", worker.kept, flush=True)
"""


def test_sigterm_releases_the_unaccepted_lease_and_keeps_the_accepted_one(authority: Authority) -> None:
    caller = sdk(authority, "caller")
    kept, released = uid("kept"), uid("released")
    # A long accept timeout: only the worker's own release can make the task claimable at once.
    caller.create_task(kept, "accept me", accept_timeout_seconds=600)
    caller.create_task(released, "just look", accept_timeout_seconds=600)
    env = worker_env(authority, "w-term")
    holder = spawn([sys.executable, "-c", HOLDER], env)
    try:
        seen = read_until(holder, lambda lines: sum(line.startswith("holding") for line in lines) == 2)
    except AssertionError:
        holder.kill()
        raise
    assert f"holding {kept} working" in seen and f"holding {released} submitted" in seen
    holder.send_signal(signal.SIGTERM)
    code, output, took = finish(holder)
    assert code == 0, output
    assert took < 15  # the grace (1 s) for its busy handlers, not their end
    assert f"released 1 unaccepted lease(s): {released}" in output
    assert f"keeping 1 accepted lease(s): {kept} (fence 1, working)" in output
    assert f"released ['{released}'] kept ['{kept}']" in output
    # Released: claimable now, by anyone, with fence + 1; still submitted, nothing else moved.
    other = sdk(authority, "worker", "w-other").claim(uid("c"))
    assert other is not None and (other["task"]["id"], other["fence"]) == (released, 2)
    assert other["task"]["revision"] == 1
    # Kept: still this worker's, and a restart resumes it.
    assert sdk(authority, "worker", "w-term").lease(kept)["fence"] == 1
    again = spawn([sys.executable, "-c", HOLDER], env)
    try:
        resumed = read_until(again, lambda lines: lines[-1].startswith("holding"))
    finally:
        again.kill()
        again.communicate(timeout=10)
    assert f"resuming 1 lease(s): {kept}" in resumed and f"holding {kept} working" in resumed


def test_sigint_in_an_idle_long_poll_exits_at_once_and_strands_nothing(
    authority: Authority, running: Callable[[Worker], threading.Thread]
) -> None:
    echo = spawn([sys.executable, ECHO, "--wait", "20"], worker_env(authority, "w-echo"))
    read_until(echo, lambda lines: lines[-1].startswith("echo worker on"))
    time.sleep(1.5)  # inside its 20 s long-poll
    echo.send_signal(signal.SIGINT)
    code, output, took = finish(echo)
    assert code == 0, output
    assert took < 10  # not the rest of its 20 s long-poll
    assert "SIGINT: stopping; releasing the leases not accepted" in output
    # The case: the abandoned long-poll still runs on the server and may grant a task created
    # now to the process that left. Then its accept timeout hands the task to a live worker.
    caller = sdk(authority, "caller")
    tid = uid("t")
    caller.create_task(tid, "after the stop", accept_timeout_seconds=2)
    time.sleep(1)
    fences: list[int] = []

    def complete(job: Job) -> None:
        fences.append(job.fence)
        job.complete("done")

    running(Worker(sdk(authority, "worker", "w-live"), complete, wait_seconds=5))
    caller.wait_for(tid, "completed", timeout=60)
    assert fences in ([1], [2])  # fence 2 when the abandoned long-poll had taken it


def test_sigterm_on_the_echo_worker_keeps_its_parked_lease_for_its_restart(authority: Authority) -> None:
    caller = sdk(authority, "caller")
    env = worker_env(authority, "w-park")
    echo = spawn([sys.executable, ECHO, "--wait", "2"], env)
    tid = uid("t")
    try:
        caller.create_task(tid, "park me")
        asked = caller.wait_for(tid, "input_required", timeout=60)
    except BaseException:
        echo.kill()
        raise
    echo.send_signal(signal.SIGTERM)
    code, output, _ = finish(echo)
    assert code == 0, output
    assert f"keeping 1 accepted lease(s): {tid} (fence 1, input_required)" in output
    caller.reply(tid, asked["revision"], "still here")
    again = spawn([sys.executable, ECHO, "--wait", "2"], env)
    try:
        done = caller.wait_for(tid, "completed", timeout=60)
    finally:
        again.send_signal(signal.SIGTERM)
        finish(again)
    assert done["revision"] == 5  # accept, ask, reply, complete: resumed, not re-run
    assert caller.messages(tid)["items"][-1]["parts"][0]["text"] == "echo: still here"


def test_the_echo_worker_completes_a_task_with_the_artifact_it_inherited(authority: Authority) -> None:
    caller = sdk(authority, "caller")
    first = sdk(authority, "worker", "w-froze")
    tid, workspace, artifact = uid("t"), uid("ws"), uid("a")
    caller.create_task(tid, "patch it", workspace=workspace, lease_timeout_seconds=1)
    assignment = first.acquire(tid, uid("c"))
    fence = assignment["fence"]
    first.worker_command("accept", tid, 1, fence, uid("c"))
    frozen = first.freeze_artifact(tid, 2, fence, artifact, "empty", "the patch", media_type="text/plain")["artifact"]
    # The first worker goes silent: the dispatcher fences its lease after 1 s, the artifact stays.
    deadline = time.monotonic() + 30
    while first.lease(tid) is not None:
        assert time.monotonic() < deadline, "the silent lease was not fenced"
        time.sleep(0.2)
    echo = spawn([sys.executable, ECHO, "--wait", "2", "--events"], worker_env(authority, "w-echo"))
    try:
        done = caller.wait_for(tid, timeout=60)
    finally:
        echo.send_signal(signal.SIGTERM)
        _, output, _ = finish(echo)
    assert done["state"] == "completed", output  # not failed on state_conflict, as it was before
    assert done["submission"] and done["artifact"] == artifact
    assert f"{tid}: completed with the artifact {artifact} it inherited" in output
    last = caller.messages(tid)["items"][-1]
    assert last["parts"][0]["text"] == INHERITED.format(artifact=artifact, digest=frozen["digest"])
    assert caller.get_artifact(workspace, artifact)["artifact"]["state"] == "published"
    types = [e["type"] for e in caller.events(tid)["items"]]
    assert types == ["task_submitted", "task_accepted", "artifact_frozen", "task_completed"]


def test_the_claim_cli_json_names_accepted_at_only_once_accepted(authority: Authority) -> None:
    caller = sdk(authority, "caller")
    tid = uid("t")
    caller.create_task(tid, "x")
    worker = sdk(authority, "worker", "w-json")
    assignment = worker.acquire(tid, uid("c"))
    assert "accepted_at" not in assignment and assignment["task"]["accept_timeout_seconds"] == 30
    worker.worker_command("accept", tid, 1, assignment["fence"], uid("c"))
    answer = httpx.get(
        f"{authority.endpoint}/v1/tasks/{tid}/lease",
        headers={"Authorization": f"Bearer {authority.token('worker', 'w-json')}"},
        timeout=30,
    ).json()["assignment"]
    assert answer["accepted_at"] >= answer["granted_at"]
