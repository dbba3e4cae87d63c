"""Task reads: a task, its snapshot, its message and event streams, one message, the context and
authority lists. Every role of an authority reads its tasks (callers, workers, admins), so a read
checks no role: it is scoped by the token's authority, and fails closed (a record that breaks an
invariant is never served); list cursors are sealed and bound to their list. (The reads of a
worker's own leases are the workers': tasks/leases.py.)"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from dovecote.platform.clock import rfc3339
from dovecote.platform.cursors import CursorSigner, LazySigner
from dovecote.platform.errors import InvalidArgument, NotFound
from dovecote.platform.ids import check_id
from dovecote.platform.principal import Principal
from dovecote.tasks import machine
from dovecote.tasks.command_loop import CommandLoop
from dovecote.tasks.limits import MESSAGE_PAGE_BYTES
from dovecote.tasks.model import Message, Task, grant_json, lease_json, message_violations, page_limit
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


class Reads:
    def __init__(self, work: CommandLoop, pages: Pages, *, presign_seconds: int) -> None:
        self.work = work
        self.pages = pages
        self.presign_seconds = presign_seconds

    def get(self, principal: Principal, task_id: str) -> dict[str, Any]:
        """The task, its current lease (who holds it, its last sign of life, when the dispatcher will
        fence it) and how the last lease that ended did end: a caller sees a stranded task at once."""
        task = self.work.load(principal, task_id)
        return {"task": task.to_json(), **leases_json(task)}

    def snapshot(self, principal: Principal, task_id: str) -> dict[str, Any]:
        task = self.work.load(principal, task_id)
        return {"task": task.to_json(), "event_cursor": task.event_count, **leases_json(task)}

    def grants(self, principal: Principal, task_id: str, after: int | None, limit: int | None) -> dict[str, Any]:
        """The task's grant history after fence `after`, oldest first: each lease generation, who
        held it, when it was granted and accepted, its last sign of life, and when, why and by whom
        it ended (the current one: as the task holds it). A stream by fence, paged like events; kept
        beside the event log, never in it. One read of the task, one Query of its grants."""
        task = self.work.load(principal, task_id)
        start, size = _stream_args(after, limit, task.fence)
        # One grant more than the page: a generation's end is carried by the grant after it.
        found = self.work.store.grant_history(principal.authority, task_id, start, size + 1)
        items = []
        for grant, following in zip(found[:size], [*found[1:], None], strict=False):
            ended = following.previous if following is not None else task.last_end
            items.append(grant_json(grant, task, ended if ended is not None and ended.fence == grant.fence else None))
        return _stream_page(items, start, task.fence)

    def messages(self, principal: Principal, task_id: str, after: int | None, limit: int | None) -> dict[str, Any]:
        """A page of messages after `after`: at most `limit`, and it also stops before its inline parts
        pass MESSAGE_PAGE_BYTES (always at least one message). Parts stored in S3 come as a
        presigned `download_url`."""
        task = self.work.load(principal, task_id)
        start, size = _stream_args(after, limit, task.message_count)
        page: list[dict[str, Any]] = []
        used = 0
        with self.work.reporting("message", authority=principal.authority, task=task_id):
            found_messages = list(self.work.store.messages(principal.authority, task_id, start, size))
        for message in found_messages:
            weight = sum(len(p.data) + len(p.url) for p in message.parts)
            if page and used + weight > MESSAGE_PAGE_BYTES:
                break
            used += weight
            page.append(self._message_json(principal, message))
        return _stream_page(page, start, task.message_count)

    def message(self, principal: Principal, task_id: str, message_id: str) -> dict[str, Any]:
        """One message by its id (unique in the authority)."""
        check_id(task_id, "task")
        check_id(message_id, "message")
        with self.work.reporting("message", authority=principal.authority, task=task_id, message_id=message_id):
            found = self.work.store.message(principal.authority, task_id, message_id)
        if found is None:
            raise NotFound("message not found", task=task_id, message_id=message_id)
        return {"message": self._message_json(principal, found)}

    def command_receipt(self, principal: Principal, command_id: str) -> dict[str, Any] | None:
        """A committed command of the authority by its id: its kind, status and answer (what an exact
        retry of it replays), or None when no command used the id. One read. For a binding that
        rebuilds a retried command as it was first sent (an A2A reply under an Idempotency-Key)."""
        check_id(command_id, "command_id")
        found = self.work.store.read(principal.authority, command_id, None).receipt
        if found is None:
            return None
        return {"kind": found.kind, "status": found.status, "result": found.result}

    def _message_json(self, principal: Principal, message: Message) -> dict[str, Any]:
        violations = message_violations(message)
        if violations:
            raise self.work.corrupt(
                "message",
                authority=principal.authority,
                task=message.task,
                sequence=message.sequence,
                violations=violations,
            )
        out = message.to_json()
        for rendered, part in zip(out["parts"], message.parts, strict=True):
            if part.remote:
                rendered["download_url"] = self.work.store.part_url(
                    principal.authority, part.sha256, self.presign_seconds
                )
        return out

    def events(self, principal: Principal, task_id: str, after: int | None, limit: int | None) -> dict[str, Any]:
        task = self.work.load(principal, task_id)
        start, size = _stream_args(after, limit, task.event_count)
        items = self.work.store.events(principal.authority, task_id, start, size)
        return _stream_page([e.to_json() for e in items], start, task.event_count)

    def list_context(self, principal: Principal, context: str, limit: int | None, cursor: str | None) -> dict[str, Any]:
        check_id(context, "context")
        size = page_limit(limit)
        scope = "context:" + context
        after = self.pages.open(principal, cursor, scope)
        page = self.work.store.context_tasks(principal.authority, context, after, size)
        return {"items": [t.to_json() for t in page.items], "cursor": self.pages.seal(principal, scope, page.after)}

    def list_tasks(
        self, principal: Principal, task_filter: TaskFilter, limit: int | None, cursor: str | None
    ) -> dict[str, Any]:
        task_filter, scope = _tasks_scope(task_filter)
        size = page_limit(limit)
        page = self.work.store.authority_tasks(
            principal.authority, task_filter, self.pages.open(principal, cursor, scope), size
        )
        return {
            "items": [t.to_json() for t in page.items],
            "cursor": self.pages.seal(principal, scope, page.after),
            "total_size": page.total_size or 0,
            "total_is_lower_bound": page.total_is_lower_bound,
        }

    def list_tasks_after(self, principal: Principal, task_filter: TaskFilter, task: dict[str, Any]) -> str:
        """The cursor of `list_tasks` (same filter) that continues after `task`, one of its items:
        for a page cut short (an A2A answer bounded in size). No read."""
        task_filter, scope = _tasks_scope(task_filter)
        position = self.work.store.authority_position(str(task["updated_at"]), str(task["workspace"]), str(task["id"]))
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


def leases_json(task: Task) -> dict[str, Any]:
    """`lease` and `last_lease` of a task read, each absent when there is none (as the API omits a
    field with no value)."""
    out = {"lease": lease_json(task), "last_lease": task.last_end.to_json() if task.last_end else None}
    return {k: v for k, v in out.items() if v is not None}


def _stream_args(after: int | None, limit: int | None, count: int) -> tuple[int, int]:
    start = after or 0
    if start < 0:
        raise InvalidArgument("after must be >= 0", field="after")
    if start > count:
        raise InvalidArgument(f"after {start} is beyond the end of the stream ({count})", field="after", end=count)
    return start, page_limit(limit)


def _stream_page(items: list[dict[str, Any]], after: int, count: int) -> dict[str, Any]:
    """`next` is the last sequence returned, or `after` when the page is empty."""
    last = items[-1]["sequence"] if items else after
    return {"items": items, "next": last, "has_more": last < count}


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
