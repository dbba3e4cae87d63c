"""examples/echo_worker.py as a real process against `dovecote dev`: it claims, accepts, asks for
input once, completes; killed mid-task and restarted, it resumes its lease instead of re-acquiring."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from dovecote.client import DovecoteClient
from tests.conftest import ROOT


def start_worker(dev_runtime: dict[str, Any]) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "DOVECOTE_ENDPOINT": dev_runtime["endpoint"],
        "DOVECOTE_TOKEN": dev_runtime["tokens"]["worker"],
    }
    return subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "echo_worker.py"), "--poll", "0.1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for(predicate: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def stop(process: subprocess.Popen[str]) -> str:
    process.kill()
    output, _ = process.communicate(timeout=10)
    return output


def test_echo_worker_converses_and_survives_a_restart(dev_runtime: dict[str, Any]) -> None:
    caller = DovecoteClient(dev_runtime["endpoint"], dev_runtime["tokens"]["caller"])
    worker = start_worker(dev_runtime)
    try:
        first = f"echo-{uuid.uuid4().hex[:8]}"
        caller.create_task(first, "please echo", context="echo")
        wait_for(lambda: caller.get_task(first)["state"] == "input_required")
        caller.reply(first, caller.get_task(first)["revision"], "hello")
        wait_for(lambda: caller.get_task(first)["state"] == "completed")
        last = caller.messages(first)["items"][-1]
        assert last["author"] == "agent" and last["parts"][0]["text"] == "echo: hello"

        second = f"echo-{uuid.uuid4().hex[:8]}"
        caller.create_task(second, "again", context="echo")
        wait_for(lambda: caller.get_task(second)["state"] == "input_required")
    finally:
        output = stop(worker)
    assert "asked for input" in output
    # The worker died holding the lease: the task is not claimable; the restarted worker resumes it.
    caller.reply(second, caller.get_task(second)["revision"], "after restart")
    worker = start_worker(dev_runtime)
    try:
        wait_for(lambda: caller.get_task(second)["state"] == "completed")
    finally:
        output = stop(worker)
    # Other tests of this session may hold leases under the same dev worker id: ours must be resumed.
    resumed = next(line for line in output.splitlines() if line.startswith("resuming "))
    assert second in resumed.split(": ", 1)[1].split(", ")
    task = caller.get_task(second)
    assert (task["revision"], task["message_count"]) == (5, 4)  # one accept, one question: nothing ran twice
    events = [e["type"] for e in caller.events(second)["items"]]
    assert events == ["task_submitted", "task_accepted", "input_required", "caller_replied", "task_completed"]
