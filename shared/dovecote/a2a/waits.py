"""Blocking SendMessage waits, bounded per authority across every instance of the A2A function.

A blocking send holds its Lambda instance (and one of the function's reserved concurrent
executions) while it follows the task; in the cloud each instance serves one request at a time, so a
counter in an instance's memory bounds nothing, and one authority's sends could hold every execution
the function has. The bound is an item per authority in the tasks table, `AW#<authority>`, `-`,
holding the waits in progress as a string set of `<until>#<holder>` entries:

- take: one UpdateItem, `ADD holders :entry SET expires_ttl = :ttl`, on the condition
  `attribute_not_exists(holders) OR size(holders) < :limit` (atomic on the one item: no two takes
  pass one free slot);
- when it is full: one consistent GetItem; entries past their `until` (a holder whose Lambda timed
  out or crashed before giving back) are deleted with one UpdateItem, and the take is tried once more;
- give back: one UpdateItem, `DELETE holders :entry` (unconditional: giving back twice is harmless).

Round trips: a blocking send adds two (take, give back); a send past the bound two (the refused take,
the read), then answers at once; four when it reclaims an expired entry. An entry's `until` is its
take plus HOLD_SECONDS (the function's timeout and a margin), so a slot never outlives the request
that took it by more than that. The item's TTL (a day after its last take) lets DynamoDB delete an idle
authority's item; nothing relies on when it does. A take that fails (DynamoDB unavailable, throttled)
is refused: the send, which has committed, answers at once rather than fail.

The port (`Waits`) and the rule in one process (`MemoryWaits`, for tests) are here; the DynamoDB
adapter is dovecote/a2a/waits_dynamo.py, which `dovecote dev` runs over moto as the cloud does.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Protocol

# A slot is held at most this long: the A2A function's timeout (29 s, infra/routes.py) and a margin.
HOLD_SECONDS = 31
# An idle authority's item is deleted by DynamoDB's TTL this long after its last take.
IDLE_SECONDS = 86_400


class Waits(Protocol):
    def take(self, authority: str) -> str | None:
        """A slot of the authority's bound: its entry (to give back), or None when all are held."""
        ...

    def give_back(self, authority: str, entry: str) -> None: ...


def entry_for(now: float) -> str:
    return f"{int(now) + HOLD_SECONDS:012d}#{uuid.uuid4().hex}"


def expired(entry: str, now: float) -> bool:
    until, _, _ = entry.partition("#")
    return not until.isdigit() or int(until) < now


class MemoryWaits:
    """The same bound in one process (tests, and a service built without a table)."""

    def __init__(self, limit: int, *, clock: Callable[[], float] = time.time) -> None:
        self.limit = limit
        self._clock = clock
        self._lock = threading.Lock()
        self.held: dict[str, set[str]] = {}

    def take(self, authority: str) -> str | None:
        now = self._clock()
        with self._lock:
            held = {e for e in self.held.get(authority, set()) if not expired(e, now)}
            if len(held) >= self.limit:
                self.held[authority] = held
                return None
            entry = entry_for(now)
            self.held[authority] = held | {entry}
            return entry

    def give_back(self, authority: str, entry: str) -> None:
        with self._lock:
            self.held.get(authority, set()).discard(entry)
