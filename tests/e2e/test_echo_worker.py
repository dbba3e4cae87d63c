"""examples/echo_worker.py as a real process against `dovecote dev`: with no DOVECOTE_TOKEN it mints a
worker identity of its own from the dev admin token; it claims by long-poll, accepts, asks for input
once, completes; killed mid-task and restarted, it resumes its lease instead of re-acquiring; with
--once it exits after one task, even one that then waits for input."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from typing import Any

from dovecote.client import DovecoteClient
from tests.conftest import ROOT
from tests.support.authorities import fresh_authority

ECHO = str(ROOT / "examples" / "echo_worker.py")


def dev_env(dev_runtime: dict[str, Any]) -> dict[str, str]:
    """No DOVECOTE_ENDPOINT / DOVECOTE_TOKEN: only the dev tokens file, as after `make dev`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")}
    env["DOVECOTE_TOKENS_FILE"] = str(dev_runtime["tokens_file"])
    return env


def start_worker(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, ECHO, "--wait", "2", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def stop(process: subprocess.Popen[str]) -> str:
    process.kill()
    output, _ = process.communicate(timeout=10)
    return output


def test_echo_worker_mints_its_identity_converses_and_survives_a_restart(dev_runtime: dict[str, Any]) -> None:
    caller = DovecoteClient(dev_runtime["endpoint"], dev_runtime["tokens"]["caller"])
    env = dev_env(dev_runtime)
    identity = f"echo-{uuid.uuid4().hex[:8]}"
    worker = start_worker(env, "--worker-id", identity)
    try:
        first = f"echo-{uuid.uuid4().hex[:8]}"
        caller.create_task(first, "please echo", context="echo")
        asked = caller.wait_for(first, "input_required", timeout=60)
        caller.reply(first, asked["revision"], "hello")
        caller.wait_for(first, "completed", timeout=60)
        last = caller.messages(first)["items"][-1]
        assert last["author"] == "agent" and last["parts"][0]["text"] == "echo: hello"

        second = f"echo-{uuid.uuid4().hex[:8]}"
        caller.create_task(second, "again", context="echo")
        caller.wait_for(second, "input_required", timeout=60)
    finally:
        output = stop(worker)
    assert f"minted a worker token for {identity}" in output
    assert f"{first}: asked for input" in output
    # The worker died holding the lease: the task is not claimable; the restarted worker resumes it.
    caller.reply(second, caller.get_task(second)["revision"], "after restart")
    worker = start_worker(env, "--worker-id", identity)
    try:
        caller.wait_for(second, "completed", timeout=60)
    finally:
        output = stop(worker)
    resumed = next(line for line in output.splitlines() if line.startswith("resuming "))
    assert second in resumed.split(": ", 1)[1].split(", ")
    task = caller.get_task(second)
    assert (task["revision"], task["message_count"]) == (5, 4)  # one accept, one question: nothing ran twice
    events = [e["type"] for e in caller.events(second)["items"]]
    assert events == ["task_submitted", "task_accepted", "input_required", "caller_replied", "task_completed"]


def test_once_exits_after_one_task_even_one_that_waits_for_input(dev_runtime: dict[str, Any]) -> None:
    authority = fresh_authority(dev_runtime, "echo")
    caller = DovecoteClient(authority.endpoint, authority.token("caller"))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")},
        "DOVECOTE_ENDPOINT": authority.endpoint,
        "DOVECOTE_TOKEN": authority.token("worker", "echo-once"),
    }
    tid = f"once-{uuid.uuid4().hex[:8]}"
    caller.create_task(tid, "echo once")

    def once() -> str:
        done = subprocess.run(
            [sys.executable, ECHO, "--once", "--wait", "2"], env=env, capture_output=True, text=True, timeout=90
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    asked = once()
    assert f"{tid}: asked for input" in asked and "handled 1 task(s)" in asked
    assert caller.get_task(tid)["state"] == "input_required"
    caller.reply(tid, 3, "ping")
    finished = once()  # resumes its lease (same identity) and completes
    assert f"resuming 1 lease(s): {tid}" in finished and "handled 1 task(s)" in finished
    assert caller.messages(tid)["items"][-1]["parts"][0]["text"] == "echo: ping"
    assert "handled 0 task(s)" in once()  # nothing to do: one long-poll, then exit


def test_once_keeps_a_task_that_waits_for_its_caller_and_takes_the_next(dev_runtime: dict[str, Any]) -> None:
    """A task whose lease expired while it waited for input is claimable again (the oldest): a `--once`
    worker that claims it has nothing to do on it, so it keeps it and handles the next task instead
    of releasing it and exiting (every later `--once` run would have claimed it again)."""
    import time

    authority = fresh_authority(dev_runtime, "echo")
    caller = DovecoteClient(authority.endpoint, authority.token("caller"))

    def once(identity: str) -> str:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")},
            "DOVECOTE_ENDPOINT": authority.endpoint,
            "DOVECOTE_TOKEN": authority.token("worker", identity),
        }
        done = subprocess.run(
            [sys.executable, ECHO, "--once", "--wait", "2"], env=env, capture_output=True, text=True, timeout=90
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    waiting = f"wait-{uuid.uuid4().hex[:8]}"
    caller.create_task(waiting, "echo", lease_timeout_seconds=2)
    assert f"{waiting}: asked for input" in once("echo-first")
    deadline = time.monotonic() + 60
    while "lease" in caller.read_task(waiting) and time.monotonic() < deadline:
        time.sleep(0.5)  # the dispatcher fences the silent lease
    assert caller.read_task(waiting)["last_lease"]["reason"] == "expired"
    nxt = f"next-{uuid.uuid4().hex[:8]}"
    caller.create_task(nxt, "echo")
    second = once("echo-second")
    assert f"{waiting}: waits for its caller; kept, taking the next task" in second, second
    assert f"{nxt}: asked for input" in second and "handled 1 task(s)" in second, second
    assert caller.get_task(nxt)["state"] == "input_required"
    # The kept task is held by the second worker (accepted), not handed to the next claim.
    held = caller.read_task(waiting)["lease"]
    assert held["state"] != "granted" and held["fence"] == 2, held


def test_the_token_it_mints_is_revoked_when_it_exits(dev_runtime: dict[str, Any]) -> None:
    """Minted from the dev admin for one run, the worker token does not outlive it."""
    import re

    identity = f"echo-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [sys.executable, ECHO, "--once", "--wait", "1", "--worker-id", identity],
        env=dev_env(dev_runtime),
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    minted = re.search(rf"minted a worker token for {identity} \(token id (\w+)\)", done.stdout)
    assert minted, done.stdout
    admin = DovecoteClient(dev_runtime["endpoint"], dev_runtime["tokens"]["admin"])
    rows = [t for t in admin.iter_tokens() if t["token_id"] == minted.group(1)]
    assert len(rows) == 1 and rows[0]["revoked_at"], rows
