"""SDK workers in the e2e tests."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dovecote.client import DovecoteClient
from dovecote.client.worker import Job, Worker
from tests.conftest import ROOT
from tests.support.authorities import Authority, fresh_authority


def take_over(
    running: Callable[[Worker], threading.Thread],
    worker: DovecoteClient,
    caller: DovecoteClient,
    task_id: str,
    final: str,
    *,
    wait_seconds: int,
    timeout: float,
) -> tuple[list[int], dict[str, Any]]:
    """A second worker (`worker`'s token) takes the task over once its lease is fenced and completes
    it with `final`: the fences its jobs held, and the task as the caller sees it completed."""
    fences: list[int] = []

    def complete(job: Job) -> None:
        fences.append(job.fence)
        job.complete(final)

    running(Worker(worker, complete, wait_seconds=wait_seconds))
    return fences, caller.wait_for(task_id, "completed", timeout=timeout)


A2A_WORKER = ROOT / "examples" / "a2a_worker.py"


def a2a_world(name: str, agent: str) -> tuple[Any, Any]:
    """The module fixtures `authority` (a fresh one, `name`) and `worker` (the example A2A worker
    serving it, its token's agent `agent`) of an A2A e2e module: `authority, worker = a2a_world(...)`."""

    @pytest.fixture(scope="module", name="authority")
    def authority(dev_runtime: dict[str, Any]) -> Authority:
        return fresh_authority(dev_runtime, name)

    @pytest.fixture(scope="module", name="worker")
    def worker(dev_runtime: dict[str, Any], authority: Authority) -> Iterator[subprocess.Popen[str]]:
        with a2a_worker(authority, agent) as process:
            yield process

    return authority, worker


@contextlib.contextmanager
def a2a_worker(authority: Authority, agent: str) -> Iterator[subprocess.Popen[str]]:
    """The example A2A worker (examples/a2a_worker.py) serving `authority` under a worker token for
    `agent`, for as long as the block runs (its output on its stdout)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")}
    env.update(DOVECOTE_ENDPOINT=authority.endpoint, DOVECOTE_TOKEN=authority.token("worker", agent))
    process = subprocess.Popen(
        [sys.executable, str(A2A_WORKER), "--wait", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield process
    finally:
        process.kill()
        process.communicate(timeout=10)
