"""Task streams (docs/guides/streams.md): a task's event log followed live, as the items a stream
sends. Every event comes from the durable log (the events the task's commits wrote, numbered), read
after the last sequence sent, never from a queue in this process: a stream resumed after sequence n,
on any instance, after any restart, sends every later event once, in order, with no gap.

A stream sends, in order: the current lease state (`LeaseState`, no sequence: `Last-Event-ID` always
names an event of the task's own log); each event after `after` as it commits (`Logged`), and a
`LeaseState` again whenever the lease is granted, accepted or ends; a `KeepAlive` when nothing was
sent for KEEPALIVE_SECONDS; and it ends after the event that makes the task terminal, or with a
`Reconnect` (resume after its `after`) once it has lasted `max_seconds`.

Idle cost: a followed task is read (one strongly consistent GetItem) once per POLL_SECONDS by
whichever of this process's streams of it asks first (`Tail`): one reader fans out to every stream
of the task in the process. Its events are queried only once its count moved. Pure apart from the
TaskStore port and the clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from dovecote.platform.errors import InvalidArgument
from dovecote.platform.principal import Principal
from dovecote.tasks import machine
from dovecote.tasks.command_loop import CommandLoop
from dovecote.tasks.model import Event, Lease, LeaseEnd, Task

KEEPALIVE_SECONDS = 15.0  # the bound; proxies and the cloud front's idle timeout are longer
POLL_SECONDS = 0.25
# The cloud front ends a stream at 15 minutes; a stream ends itself before that, with a margin.
DEFAULT_MAX_SECONDS = 14 * 60.0
PAGE = 100
RECONNECT = "reconnect"
LEASE = "lease"


@dataclass(frozen=True, slots=True)
class Logged:
    """An event of the task's log; its JSON is the event object as GET /v1/tasks/{id}/events pages it."""

    event: Event

    @property
    def sequence(self) -> int:
        return self.event.sequence

    @property
    def type(self) -> str:
        return self.event.type

    def to_json(self) -> dict[str, Any]:
        return self.event.to_json()


@dataclass(frozen=True, slots=True)
class LeaseState:
    """The lease as a task read shows it: `lease` (None when unleased) and `last_lease` (how the
    last generation ended, None before any ended)."""

    lease: Lease | None
    last_lease: LeaseEnd | None

    @classmethod
    def of(cls, task: Task) -> LeaseState:
        return cls(Lease.of(task), task.last_end)

    def to_json(self) -> dict[str, Any]:
        return {
            "lease": self.lease.to_json() if self.lease else None,
            "last_lease": self.last_lease.to_json() if self.last_lease else None,
        }


@dataclass(frozen=True, slots=True)
class KeepAlive:
    pass


@dataclass(frozen=True, slots=True)
class Reconnect:
    """The stream reached its time bound: resume after `after` (also the last id sent)."""

    after: int

    def to_json(self) -> dict[str, Any]:
        return {"after": self.after, "reason": "the stream reached its time limit; resume with Last-Event-ID"}


StreamItem = Logged | LeaseState | KeepAlive | Reconnect


def _lease_key(task: Task) -> tuple[str, int, str]:
    """What a lease event reports a change of: holder, generation, acceptance (not heartbeats)."""
    return task.owner, task.fence, task.accepted_at


@dataclass
class _Entry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    task: Task | None = None
    read_at: float | None = None


class Tail:
    """The latest read of each followed task, shared by this process's streams: at most one read of
    a task per `max_age` seconds, however many streams follow it."""

    FORGET_AFTER = 60.0  # an entry no stream asked for in this long is dropped

    def __init__(
        self,
        read: Callable[[str, str], Task | None],
        *,
        max_age: float = POLL_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read, self._max_age, self._monotonic = read, max_age, monotonic
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], _Entry] = {}
        self.reads = 0  # store reads made (the bench's idle cost)

    def latest(self, authority: str, task_id: str) -> Task | None:
        now = self._monotonic()
        with self._lock:
            entry = self._entries.setdefault((authority, task_id), _Entry())
            if len(self._entries) > 1024:
                self._forget(now)
        with entry.lock:
            if entry.read_at is None or now - entry.read_at >= self._max_age:
                entry.task = self._read(authority, task_id)
                entry.read_at = self._monotonic()
                self.reads += 1
            return entry.task

    def _forget(self, now: float) -> None:
        for key, entry in list(self._entries.items()):
            if entry.read_at is not None and now - entry.read_at > self.FORGET_AFTER:
                del self._entries[key]


class Streams:
    def __init__(
        self,
        work: CommandLoop,
        *,
        poll_seconds: float = POLL_SECONDS,
        keepalive_seconds: float = KEEPALIVE_SECONDS,
        max_seconds: float = DEFAULT_MAX_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.work = work
        self.poll_seconds, self.keepalive_seconds, self.max_seconds = poll_seconds, keepalive_seconds, max_seconds
        self._sleep, self._monotonic = sleep, monotonic
        self.tail = Tail(self._read, max_age=poll_seconds, monotonic=monotonic)

    def _read(self, authority: str, task_id: str) -> Task | None:
        task = self.work.store.read(authority, None, task_id).task
        return None if task is None else self.work.checked(task)

    def open(self, principal: Principal, task_id: str, after: int | None) -> tuple[Task, int]:
        """The checks a stream passes before its first byte (any role of the authority follows its
        tasks): the task in the caller's authority (404 otherwise), `after` within its log. The task
        as read, and where to start."""
        task = self.work.load(principal, task_id)
        start = after or 0
        if start < 0:
            raise InvalidArgument("after must be >= 0", field="after")
        if start > task.event_count:
            raise InvalidArgument(
                f"after {start} is beyond the end of the stream ({task.event_count})",
                field="after",
                end=task.event_count,
            )
        return task, start

    def follow(self, principal: Principal, task_id: str, after: int | None) -> Iterator[StreamItem]:
        """`open`'s checks now (they raise before any item), then the items as they come."""
        task, start = self.open(principal, task_id, after)
        return self.items(principal.authority, task, start)

    def items(self, authority: str, task: Task, after: int) -> Iterator[StreamItem]:
        started = last_sent = self._monotonic()
        yield LeaseState.of(task)
        seen = _lease_key(task)
        while True:
            for event in self._events(authority, task, after):
                after = event.sequence
                last_sent = self._monotonic()
                yield event
                if machine.is_terminal(event.event.state):
                    return
            if machine.is_terminal(task.state) and after >= task.event_count:
                return  # resumed after the terminal event: nothing more will come
            if _lease_key(task) != seen:
                seen = _lease_key(task)
                last_sent = self._monotonic()
                yield LeaseState.of(task)
            now = self._monotonic()
            if now - started >= self.max_seconds:
                yield Reconnect(after)
                return
            if now - last_sent >= self.keepalive_seconds:
                last_sent = now
                yield KeepAlive()
            self._sleep(self.poll_seconds)
            found = self.tail.latest(authority, task.id)
            if found is None:
                return
            task = found

    def _events(self, authority: str, task: Task, after: int) -> Iterator[Logged]:
        """The log after `after` up to the count `task` was read at, contiguous: a page that skips
        a sequence (a read replica behind) stops there, and the next poll reads on from it."""
        while after < task.event_count:
            with self.work.reporting("event", authority=authority, task=task.id):
                page = self.work.store.events(authority, task.id, after, PAGE, seen=task)
            for event in page:
                if event.sequence != after + 1:
                    return
                after = event.sequence
                yield Logged(event)
            if not page:
                return
