"""Races with real threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


def together(count: int, target: Callable[[int], Any]) -> list[Any]:
    """target(0), ..., target(count - 1), each in its own thread, released at once by a barrier:
    what each returned, or the exception it raised, in that order."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = target(i)
        except BaseException as exc:  # noqa: BLE001 - the caller decides
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def eventually(predicate: Callable[[], Any], seconds: float, poll: float = 0.05) -> bool:
    """Whether `predicate()` turns true within `seconds` (asked every `poll` seconds, and once more
    at the deadline: a condition met just in time counts)."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)
    return True
