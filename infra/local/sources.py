"""What every local event source shares (the DynamoDB stream poller in streams.py, the SQS poller
in queues.py): loading a function's handler from the route table's Function, a Lambda context,
and the background threads that poll and invoke until stopped.

A source polls again at once while it delivers. When it finds nothing, it waits: `interval_s` if
nothing can wake it (tests driving moto in-process); otherwise until its wake event is set (the
runtime sets it when moto answers a write to the source, infra/local/wakeups.py), a due time it set
itself (a failed message coming back from its visibility timeout), or `idle_s` at the latest. An
idle runtime then sends moto almost nothing."""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any, Callable, Self

from infra.local.gateway import LambdaContext, _context, load_handler
from infra.routes import Function

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
log = logging.getLogger("dovecote-dev")


def lambda_context(function: Function) -> LambdaContext:
    return _context(function)


class EventSource:
    """Poll a source and invoke `function`, on `concurrency` threads (like Lambda's concurrent
    invocations of one event source mapping). Subclasses implement `poll_once`."""

    def __init__(self, *, function: Function, name: str, interval_s: float, concurrency: int = 1) -> None:
        self.function = function
        self._name = name
        self._interval = interval_s
        self._concurrency = concurrency
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._wake: threading.Event | None = None
        self._idle_s = interval_s
        self._due = math.inf  # monotonic time of a poll the source asked for (`poll_at`)
        self.polls = 0

    def wake_on(self, event: threading.Event, *, idle_s: float = 5.0) -> Self:
        """Poll when `event` is set, else every `idle_s` (see the module docstring)."""
        self._wake = event
        self._idle_s = idle_s
        return self

    def poll_at(self, when: float) -> None:
        """Ask for a poll at monotonic time `when` (e.g. when failed records become visible again)."""
        self._due = min(self._due, when)

    def _idle_wait(self) -> None:
        if self._wake is None:
            self._stop.wait(self._interval)
            return
        now = time.monotonic()
        if self._due <= now:
            self._due = math.inf
            return
        self._wake.wait(min(self._idle_s, self._due - now))

    def bind(self) -> EventSource:
        """Resolve the source (its ARN, ...) so `poll_once` can be driven by hand (tests)."""
        return self

    def poll_once(self, handler: Handler) -> int:
        """One poll: returns how many records it delivered (0 when the source was empty)."""
        raise NotImplementedError

    def start(self) -> Self:
        self.bind()
        # Imported here, in the starting thread, one module at a time (gateway.HANDLER_IMPORTS).
        handler = load_handler(self.function)
        for i in range(self._concurrency):
            thread = threading.Thread(target=self._run, args=(handler,), name=f"{self._name}-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._wake is not None:
            self._wake.set()
        for thread in self._threads:
            thread.join(timeout=5)

    def _run(self, handler: Handler) -> None:
        while not self._stop.is_set():
            if self._wake is not None:
                # Cleared before the poll: a write that lands during the poll sets it again, and the
                # wait below returns at once (no wake-up is lost).
                self._wake.clear()
            try:
                self.polls += 1
                delivered = self.poll_once(handler)
            except Exception:  # noqa: BLE001 - the emulator must outlive a bad poll, and say so
                log.exception("%s: poll failed", self._name)
                delivered = 0
                self._stop.wait(self._interval)  # a failing source is retried, not spun on
            if not delivered and not self._stop.is_set():
                self._idle_wait()
