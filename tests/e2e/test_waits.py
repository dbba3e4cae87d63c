"""Waits against `dovecote dev` (docs/services/tasks.md, docs/guides/streams.md): `wait_for` and
`dovecote tasks wait` end at their timeout while the stream's keep-alives arrive more often than it;
a task that ended in a state not waited for is `task_ended` at once (the SDK's TaskEnded, the CLI's
exit 5), never a timeout; and `tasks events` / `tasks watch` show a failure's reason literally.
The same logic against a scripted server: tests/unit/test_client_waits.py."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any

import httpx
import pytest

from dovecote.client import DovecoteClient, TaskEnded, WaitTimeout
from dovecote.tasks.streams import KEEPALIVE_SECONDS
from tests.conftest import ROOT
from tests.e2e.conftest import bearer
from tests.e2e.test_cli import base_env, run, uid
from tests.support.authorities import Authority, fresh_authority

# Longer than the keep-alive interval (fixed at 15 s, not a setting), so keep-alives reset the read
# timeout during the wait: what made a wait of 20 s last until the server ended the stream.
TIMEOUT = KEEPALIVE_SECONDS + 1.5
HOSTILE = "[red]disk[/red] full \x1b[2J\nsee [link=http://x]log[/link]"


@pytest.fixture
def authority(dev_runtime: dict[str, Any]) -> Authority:
    return fresh_authority(dev_runtime, "wait")


def sdk(authority: Authority, role: str, worker: str | None = None) -> DovecoteClient:
    return DovecoteClient(authority.endpoint, authority.token(role, worker))


def env(authority: Authority) -> dict[str, str]:
    return base_env() | {"DOVECOTE_ENDPOINT": authority.endpoint, "DOVECOTE_TOKEN": authority.token("caller")}


def cli(authority: Authority, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "dovecote.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(authority),
        cwd=ROOT,
    )


class Comments(threading.Thread):
    """A raw reader of one task's stream: when each comment line (a keep-alive) arrived."""

    def __init__(self, authority: Authority, task_id: str) -> None:
        super().__init__(daemon=True)
        self.url = f"{authority.endpoint}/v1/tasks/{task_id}/stream"
        self.headers = bearer(authority.token("caller"))
        self.at: list[float] = []

    def run(self) -> None:
        with httpx.stream("GET", self.url, headers=self.headers, timeout=30) as response:
            for line in response.iter_lines():
                if line.startswith(":"):
                    self.at.append(time.monotonic())


def test_waits_end_at_their_timeout_while_keep_alives_arrive(authority: Authority) -> None:
    caller = sdk(authority, "caller")
    task_id = uid("quiet")
    caller.create_task(task_id, "nobody works here")
    comments = Comments(authority, task_id)
    comments.start()
    opened = time.monotonic()
    outcome: dict[str, Any] = {}

    def sdk_wait() -> None:
        started = time.monotonic()
        try:
            caller.wait_for(task_id, "completed", timeout=TIMEOUT)
        except WaitTimeout as exc:
            outcome["error"] = exc
        outcome["took"] = time.monotonic() - started

    def cli_wait() -> None:
        started = time.monotonic()
        command = cli(authority, "tasks", "wait", task_id, "--state", "completed", "--timeout", f"{TIMEOUT:g}")
        outcome["cli"] = (*command.communicate(), command.returncode)
        outcome["cli_took"] = time.monotonic() - started

    # Threads, so a wait that overruns fails here rather than hanging until the stream ends (14 min).
    waiters = [threading.Thread(target=sdk_wait, daemon=True), threading.Thread(target=cli_wait, daemon=True)]
    for waiter in waiters:
        waiter.start()
    for waiter in waiters:
        waiter.join(TIMEOUT + 15)
    caller.cancel(task_id, caller.get_task(task_id)["revision"])  # ends the streams still open
    assert not any(waiter.is_alive() for waiter in waiters), f"still waiting after {TIMEOUT + 15} s: {outcome}"
    assert isinstance(outcome.get("error"), WaitTimeout) and TIMEOUT <= outcome["took"] < TIMEOUT + 2.5, outcome
    assert outcome["error"].details["state"] == "submitted"
    out, err, code = outcome["cli"]
    assert code == 3 and out == b"", err.decode()
    assert err.decode().endswith(f"after {TIMEOUT:g} s; waited for completed\n")
    # The CLI's own start (an interpreter and its imports) counts in its time, under a loaded machine.
    assert TIMEOUT <= outcome["cli_took"] < TIMEOUT + 10, outcome
    # The premise: the stream did send a keep-alive during the wait (more often than TIMEOUT).
    assert any(at - opened < TIMEOUT for at in comments.at), comments.at
    comments.join(10)


def working(authority: Authority) -> tuple[DovecoteClient, DovecoteClient, str, int, int]:
    """A task a worker accepted: the caller, the worker, its id, revision and fence."""
    caller, worker = sdk(authority, "caller"), sdk(authority, "worker", "w-fail")
    task_id = uid("f")
    caller.create_task(task_id, "fail me")
    assignment = worker.acquire(task_id)
    task = worker.accept(task_id, assignment["task"]["revision"], assignment["fence"])
    return caller, worker, task_id, task["revision"], assignment["fence"]


def test_a_task_that_ended_otherwise_is_task_ended_at_once(authority: Authority) -> None:
    caller, worker, task_id, revision, fence = working(authority)
    # Waiting while it fails: the wait ends with the failure, not at its timeout.
    waiting = cli(authority, "tasks", "wait", task_id, "--state", "completed", "--timeout", "60", "--json")
    time.sleep(1.0)
    worker.fail(task_id, revision, fence, reason="no")
    out, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 5, (out, err)
    error = json.loads(out)["error"]
    assert error["code"] == "task_ended"
    assert error["message"] == f"task {task_id} ended failed (revision 3); it can no longer become completed"
    assert error["details"] == {"task": task_id, "states": ["completed"], "state": "failed", "revision": 3}

    # Already ended: at once, in the SDK and the CLI, a true sentence and its own code.
    started = time.monotonic()
    with pytest.raises(TaskEnded) as caught:
        caller.wait_for(task_id, ("completed", "canceled"), timeout=60)
    assert time.monotonic() - started < 5 and not isinstance(caught.value, WaitTimeout)
    assert caught.value.code == "task_ended" and caught.value.details["state"] == "failed"
    started = time.monotonic()
    ended = run(env(authority), "tasks", "wait", task_id, "--state", "completed")
    assert ended.returncode == 5 and time.monotonic() - started < 30
    line = ended.stderr.decode()
    assert line == f"error: task {task_id} ended failed (revision 3); it can no longer become completed\n"
    assert "timeout" not in line and "after" not in line
    # A wanted terminal state is the answer.
    assert caller.wait_for(task_id, timeout=60)["state"] == "failed"


def test_events_and_watch_show_a_failure_reason_literally(authority: Authority) -> None:
    _, worker, task_id, revision, fence = working(authority)
    worker.fail(task_id, revision, fence, reason=HOSTILE)
    shown = "[red]disk[/red] full \\x1b[2J see [link=http://x]log[/link]"  # one line, ESC shown, no markup

    watched = run(env(authority), "tasks", "watch", task_id)
    assert watched.returncode == 0, watched.stderr.decode()
    last = watched.stdout.decode().splitlines()[-1]
    assert last.endswith(f"task_failed  → failed (revision 3): {shown}"), last
    assert b"\x1b" not in watched.stdout

    events = run(env(authority), "tasks", "events", task_id)
    assert events.returncode == 0, events.stderr.decode()
    text = events.stdout.decode()
    assert "reason" in text.splitlines()[0]
    assert shown in " ".join(text.split()), text
    assert "\x1b" not in text
    # --json keeps the reason as the worker wrote it.
    document = json.loads(run(env(authority), "tasks", "events", task_id, "--json").stdout)
    assert document["items"][-1]["reason"] == HOSTILE


def test_watch_with_a_timeout_exits_3_on_a_task_that_does_not_end(authority: Authority) -> None:
    """`tasks watch --timeout N` prints what commits and exits 3 (wait_timeout) when N runs out
    first, as `tasks wait` does; without it, it watches until the task ends."""
    _, _, task_id, _, _ = working(authority)
    started = time.monotonic()
    watched = run(env(authority), "tasks", "watch", task_id, "--timeout", "2")
    assert watched.returncode == 3, watched.stderr.decode()
    assert time.monotonic() - started < 30
    assert "task_accepted" in watched.stdout.decode() and watched.stderr.decode().startswith("error: ")
    refused = run(env(authority), "tasks", "watch", task_id, "--timeout", "-1")
    assert refused.returncode == 2 and b"--timeout must be 0" in refused.stderr
