"""SDK workers in the e2e tests."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from dovecote.client import DovecoteClient
from dovecote.client.worker import Job, Worker


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
