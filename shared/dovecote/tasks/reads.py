"""Task reads: a task, its snapshot, its message and event streams, one message, the context and
authority lists. Every role of an authority reads its tasks (callers, workers, admins), so a read
checks no role: it is scoped by the token's authority, and fails closed (a record that breaks an
invariant is never served); list cursors are sealed and bound to their list. (The reads of a
worker's own leases are the workers': tasks/leases.py.)"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, Generic, NamedTuple, TypeVar

from dovecote.platform.clock import rfc3339
from dovecote.platform.cursors import CursorSigner, LazySigner
from dovecote.platform.errors import InvalidArgument, NotFound
from dovecote.platform.ids import check_id
from dovecote.platform.principal import Principal
from dovecote.tasks import machine
from dovecote.tasks.command_loop import CommandLoop
from dovecote.tasks.limits import MESSAGE_PAGE_BYTES
from dovecote.tasks.model import (
    LEASE_FIELDS,
    Event,
    Grant,
    Lease,
    LeaseEnd,
    Message,
    Receipt,
    Task,
    TaskView,
    message_violations,
    page_limit,
)
from dovecote.tasks.ports import TaskFilter


class Pages:
    """Keyset positions sealed into opaque cursors, bound to the authority and the list (scope)."""

    def __init__(self, signers: LazySigner) -> None:
        self._signers = signers

    @property
    def signer(self) -> CursorSigner:
        return self._signers.get()

    def open(self, principal: Principal, cursor: str | None, scope: str) -> tuple[str, ...] | None:
        if not cursor:
            return None
        position = self.signer.open(cursor, authority=principal.authority, scope=scope).get("after")
        if not isinstance(position, list) or not all(isinstance(p, str) for p in position):
            raise InvalidArgument("cursor is malformed", field="cursor")
        return tuple(position)

    def seal(self, principal: Principal, scope: str, after: tuple[str, ...] | None) -> str | None:
        if after is None:
            return None
        return self.signer.seal(authority=principal.authority, scope=scope, position={"after": list(after)})


T = TypeVar("T")


class TaskRead(NamedTuple):
    """A task read: the task, its current lease (who holds it, its last sign of life, when the
    dispatcher will fence it) and how the last lease that ended did end; `event_cursor`, its event
    count at that read (read the events after it, gap-free)."""

    task: TaskView
    lease: Lease | None
    last_lease: LeaseEnd | None
    event_cursor: int

    @classmethod
    def of(cls, task: Task) -> TaskRead:
        return cls(TaskView.of(task), Lease.of(task), task.last_end, task.event_count)


class StreamPage(NamedTuple, Generic[T]):
    """A page of one of a task's streams (messages, events, grants) after a sequence: `next` is the
    last sequence it holds (or where it started, when empty), `has_more` whether the stream goes on."""

    items: tuple[T, ...]
    next: int
    has_more: bool


class ListPage(NamedTuple, Generic[T]):
    """A page of a list, and the sealed cursor that continues it (None: the list ends here);
    `total_size` counts the filtered set, at most TOTAL_SIZE_CAP (then `total_is_lower_bound`)."""

    items: tuple[T, ...]
    cursor: str | None
    total_size: int = 0
    total_is_lower_bound: bool = False


class MessageRead(NamedTuple):
    """A message as read: the record, and for each of its parts kept in S3 (past the inline size) a
    presigned download URL ("" for a part held inline)."""

    message: Message
    download_urls: tuple[str, ...]


class Generation(NamedTuple):
    """One generation of a task's lease, by fence (`sequence`): its grant, and how it ended (the
    current one: as the task holds it; one whose end was never recorded: its grant alone)."""

    sequence: int
    fence: int
    worker: str
    state: str  # granted | accepted | ended
    granted_at: str
    accepted_at: str | None = None
    heartbeat_at: str | None = None
    lease_timeout_seconds: int | None = None
    accept_timeout_seconds: int | None = None
    fenced_after: str | None = None
    ended_at: str | None = None
    reason: str | None = None
    by: str | None = None

    @classmethod
    def of(cls, grant: Grant, task: Task, ended: LeaseEnd | None) -> Generation:
        current = Lease.of(task) if ended is None and task.fence == grant.fence else None
        if current is not None:
            return cls(grant.fence, **{name: getattr(current, name) for name in LEASE_FIELDS})
        if ended is None:
            return cls(grant.fence, grant.fence, grant.worker, "ended", grant.granted_at)
        return cls(
            grant.fence,
            grant.fence,
            grant.worker,
            "ended",
            grant.granted_at,
            accepted_at=ended.accepted_at or None,
            heartbeat_at=ended.heartbeat_at or None,
            ended_at=ended.ended_at,
            reason=ended.reason,
            by=ended.by,
        )


class Reads:
    def __init__(self, work: CommandLoop, pages: Pages, *, presign_seconds: int) -> None:
        self.work = work
        self.pages = pages
        self.presign_seconds = presign_seconds

    def get(self, principal: Principal, task_id: str) -> TaskRead:
        """The task and its leases, from one strongly consistent read: a caller sees a stranded task
        at once."""
        return TaskRead.of(self.work.load(principal, task_id))

    def grants(
        self, principal: Principal, task_id: str, after: int | None, limit: int | None
    ) -> StreamPage[Generation]:
        """The task's grant history after fence `after`, oldest first: each lease generation, who
        held it, when it was granted and accepted, its last sign of life, and when, why and by whom
        it ended (the current one: as the task holds it). A stream by fence, paged like events; kept
        beside the event log, never in it. One read of the task, one Query of its grants."""
        task = self.work.load(principal, task_id)
        start, size = _stream_args(after, limit, task.fence)
        # One grant more than the page: a generation's end is carried by the grant after it.
        found = self.work.store.grant_history(principal.authority, task_id, start, size + 1, seen=task)
        items = []
        for grant, following in zip(found[:size], [*found[1:], None], strict=False):
            ended = following.previous if following is not None else task.last_end
            items.append(
                Generation.of(grant, task, ended if ended is not None and ended.fence == grant.fence else None)
            )
        return _stream_page(items, start, task.fence)

    def messages(
        self, principal: Principal, task_id: str, after: int | None, limit: int | None
    ) -> StreamPage[MessageRead]:
        """A page of messages after `after`: at most `limit`, and it also stops before its inline parts
        pass MESSAGE_PAGE_BYTES (always at least one message). Parts stored in S3 come with a
        presigned download URL."""
        task = self.work.load(principal, task_id)
        start, size = _stream_args(after, limit, task.message_count)
        page: list[MessageRead] = []
        used = 0
        with self.work.reporting("message", authority=principal.authority, task=task_id):
            found_messages = list(self.work.store.messages(principal.authority, task_id, start, size, seen=task))
        for message in found_messages:
            weight = sum(len(p.data) + len(p.url) for p in message.parts)
            if page and used + weight > MESSAGE_PAGE_BYTES:
                break
            used += weight
            page.append(self._message_read(principal, message))
        return _stream_page(page, start, task.message_count)

    def message(self, principal: Principal, task_id: str, message_id: str) -> MessageRead:
        """One message by its id (unique in the authority). A miss reads the task too, so an unknown
        task (the ids swapped, say) is said as such: one more read, on that path only."""
        check_id(task_id, "task")
        check_id(message_id, "message_id")
        with self.work.reporting("message", authority=principal.authority, task=task_id, message_id=message_id):
            found = self.work.store.message(principal.authority, task_id, message_id)
        if found is None:
            self.work.load(principal, task_id)  # NotFound "task not found" when there is no such task
            raise NotFound("message not found", task=task_id, message_id=message_id)
        return self._message_read(principal, found)

    def command_receipt(self, principal: Principal, command_id: str) -> Receipt | None:
        """A committed command of the authority by its id: its kind, status and answer (what an exact
        retry of it replays), or None when no command used the id. One read. For a binding that
        rebuilds a retried command as it was first sent (an A2A reply under an Idempotency-Key)."""
        check_id(command_id, "command_id")
        return self.work.store.read(principal.authority, command_id, None).receipt

    def _message_read(self, principal: Principal, message: Message) -> MessageRead:
        violations = message_violations(message)
        if violations:
            raise self.work.corrupt(
                "message",
                authority=principal.authority,
                task=message.task,
                sequence=message.sequence,
                violations=violations,
            )
        urls = tuple(
            self.work.store.part_url(principal.authority, part.sha256, self.presign_seconds) if part.remote else ""
            for part in message.parts
        )
        return MessageRead(message, urls)

    def events(self, principal: Principal, task_id: str, after: int | None, limit: int | None) -> StreamPage[Event]:
        task = self.work.load(principal, task_id)
        start, size = _stream_args(after, limit, task.event_count)
        items = self.work.store.events(principal.authority, task_id, start, size, seen=task)
        return _stream_page(list(items), start, task.event_count)

    def list_context(
        self, principal: Principal, context: str, limit: int | None, cursor: str | None
    ) -> ListPage[TaskView]:
        check_id(context, "context")
        size = page_limit(limit)
        scope = "context:" + context
        after = self.pages.open(principal, cursor, scope)
        page = self.work.store.context_tasks(principal.authority, context, after, size)
        items = tuple(TaskView.of(t) for t in page.items)
        return ListPage(items, self.pages.seal(principal, scope, page.after))

    def list_tasks(
        self, principal: Principal, task_filter: TaskFilter, limit: int | None, cursor: str | None
    ) -> ListPage[TaskView]:
        task_filter, scope = _tasks_scope(task_filter)
        size = page_limit(limit)
        page = self.work.store.authority_tasks(
            principal.authority, task_filter, self.pages.open(principal, cursor, scope), size
        )
        return ListPage(
            tuple(TaskView.of(t) for t in page.items),
            self.pages.seal(principal, scope, page.after),
            page.total_size or 0,
            page.total_is_lower_bound,
        )

    def list_tasks_after(self, principal: Principal, task_filter: TaskFilter, task: TaskView) -> str:
        """The cursor of `list_tasks` (same filter) that continues after `task`, one of its items:
        for a page cut short (an A2A answer bounded in size). No read."""
        task_filter, scope = _tasks_scope(task_filter)
        position = self.work.store.authority_position(task.updated_at, task.workspace, task.id)
        sealed = self.pages.seal(principal, scope, position)
        assert sealed is not None
        return sealed


def _tasks_scope(task_filter: TaskFilter) -> tuple[TaskFilter, str]:
    """The filter checked and normalized, and the scope its cursors are bound to."""
    if task_filter.context:
        check_id(task_filter.context, "context")
    if task_filter.state and task_filter.state not in machine.STATES:
        raise InvalidArgument(f"state must be one of {', '.join(machine.STATES)}", field="state")
    if task_filter.updated_since:
        task_filter = TaskFilter(task_filter.context, task_filter.state, _rfc3339_arg(task_filter.updated_since))
    return task_filter, "tasks:" + hashlib.sha256(repr(task_filter).encode()).hexdigest()[:24]


def _stream_args(after: int | None, limit: int | None, count: int) -> tuple[int, int]:
    start = after or 0
    if start < 0:
        raise InvalidArgument("after must be >= 0", field="after")
    if start > count:
        raise InvalidArgument(f"after {start} is beyond the end of the stream ({count})", field="after", end=count)
    return start, page_limit(limit)


def _stream_page(items: list[Any], after: int, count: int) -> StreamPage[Any]:
    """`next` is the last sequence returned, or `after` when the page is empty."""
    last = _sequence(items[-1]) if items else after
    return StreamPage(tuple(items), last, last < count)


def _sequence(item: Any) -> int:
    return int(item.message.sequence if isinstance(item, MessageRead) else item.sequence)


def _rfc3339_arg(value: str) -> str:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument("updated_since must be an RFC 3339 timestamp", field="updated_since") from None
    if moment.tzinfo is None:
        raise InvalidArgument("updated_since needs a time zone (Z or an offset)", field="updated_since")
    try:
        return rfc3339(moment)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+14:00 is before year 1 in UTC
        raise InvalidArgument("updated_since is out of range", field="updated_since") from None
