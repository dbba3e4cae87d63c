"""A schedule emulator for the local runtime: EventBridge's `rate(...)` rules as a thread that
invokes a function with the scheduled-event shape every `interval_s` seconds (the dispatcher runs
every second locally, every minute in the cloud). A failed invocation is logged and the next tick
runs again, as EventBridge's next scheduled event would."""

from __future__ import annotations

import importlib
import logging
import threading
import time
import uuid
from typing import Any

from infra.local.gateway import _context
from infra.routes import Function

log = logging.getLogger("dovecote-dev")


def scheduled_event(rule: str) -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "000000000000",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "region": "us-east-1",
        "resources": [f"arn:aws:events:us-east-1:000000000000:rule/{rule}"],
        "detail": {},
    }


class Schedule:
    def __init__(self, *, function: Function, interval_s: float) -> None:
        self.function = function
        self.interval_s = interval_s
        self.runs = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> Any:
        module, attr = self.function.handler.rsplit(".", 1)
        handler = getattr(importlib.import_module(module), attr)
        result = handler(scheduled_event(self.function.name), _context(self.function))
        self.runs += 1
        return result

    def start(self) -> Schedule:
        importlib.import_module(self.function.handler.rsplit(".", 1)[0])  # in this thread (see sources.start)
        self._thread = threading.Thread(target=self._run, name=f"schedule-{self.function.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - like EventBridge: the next tick runs regardless
                log.exception("scheduled %s failed", self.function.name)
