"""A schedule emulator for the local runtime: EventBridge's `rate(...)` rules as a thread that
invokes a function with the scheduled-event shape every `interval_s` seconds (the dispatcher runs
every second locally, every minute in the cloud). A failed invocation is logged and the next tick
runs again, as EventBridge's next scheduled event would.

A `gate` lets a tick skip an invocation that can only find nothing to do, so an idle runtime does no
work every second: the lease dispatcher's gate (`ExpiryGate`) says whether any lease in the tasks
table's expiry index is past its deadline. The gate fails open (an error runs the function), and the
function still runs at least every `at_least_every_s` whatever it says (a minute by default, the
cloud's rate; `dovecote dev` passes 10 minutes, infra/local/runtime.py says why).
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from infra.local.gateway import _context, load_handler
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
    def __init__(
        self,
        *,
        function: Function,
        interval_s: float,
        gate: Callable[[], bool] | None = None,
        at_least_every_s: float = 60.0,
    ) -> None:
        self.function = function
        self.interval_s = interval_s
        self.runs = 0
        self.skipped = 0
        self._gate = gate
        self._at_least_every_s = at_least_every_s
        self._last_run = -math.inf
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> Any:
        handler = load_handler(self.function)
        self._last_run = time.monotonic()
        result = handler(scheduled_event(self.function.name), _context(self.function))
        self.runs += 1
        return result

    def due(self) -> bool:
        """Whether this tick invokes the function (see the module docstring)."""
        if self._gate is None or time.monotonic() - self._last_run >= self._at_least_every_s:
            return True
        try:
            return self._gate()
        except Exception:  # noqa: BLE001 - a gate that cannot tell must not stop the schedule
            log.exception("the gate of %s failed: running it", self.function.name)
            return True

    def start(self) -> Schedule:
        load_handler(self.function)  # in this thread (see sources.start)
        self._thread = threading.Thread(target=self._run, name=f"schedule-{self.function.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if not self.due():
                self.skipped += 1
                continue
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - like EventBridge: the next tick runs regardless
                log.exception("scheduled %s failed", self.function.name)


class ExpiryGate:
    """Is any lease past its deadline? The lease dispatcher reads only the tasks table's expiry
    index (`exp_pk = X#<shard> AND exp_sk < now`, exp_sk = `deadline#authority#task`), so a run finds
    nothing to fence unless some item of that index has `exp_sk < now`.

    The earliest `exp_sk` is read from moto's table in this process (no request, the key attributes
    from the index's own schema) and kept until the table is written again (`changed`, set by the
    runtime's wake-ups, infra/local/wakeups.py): no O(state) work per tick. An index that is not there
    (renamed, another layout) makes the gate answer True: the dispatcher then runs every tick."""

    def __init__(self, *, table: str, changed: threading.Event, index: str = "expiring") -> None:
        self.table = table
        self.index = index
        self._changed = changed
        self._changed.set()
        self._earliest: str | None = None
        self._unknown = False
        self.scans = 0

    def __call__(self) -> bool:
        from dovecote.platform.clock import rfc3339, utc_now

        if self._changed.is_set():
            self._changed.clear()  # before the scan: a write during it sets it again
            self._earliest = self._scan()
        if self._unknown:
            return True
        return self._earliest is not None and self._earliest < rfc3339(utc_now())

    def _scan(self) -> str | None:
        from moto.backends import get_backend

        from infra.local.moto_patches import DYNAMODB_LOCK

        self.scans += 1
        with DYNAMODB_LOCK:  # moto's items are not safe to iterate while a request writes them
            for account in get_backend("dynamodb").values():  # type: ignore[call-overload]
                for backend in account.values():
                    table = backend.tables.get(self.table)
                    if table is None:
                        continue
                    index = next((i for i in table.global_indexes if i.name == self.index), None)
                    if index is None:
                        break
                    keys = {k["KeyType"]: k["AttributeName"] for k in index.schema}
                    hash_key, range_key = keys.get("HASH"), keys.get("RANGE")
                    if hash_key is None or range_key is None:
                        break
                    self._unknown = False
                    return min(
                        (
                            str(item.attrs[range_key].value)
                            for item in table.all_items()
                            if hash_key in item.attrs and range_key in item.attrs
                        ),
                        default=None,
                    )
        if not self._unknown:
            log.warning("no index %s on table %s: the dispatcher runs on every tick", self.index, self.table)
        self._unknown = True
        return None
