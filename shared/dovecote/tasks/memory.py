"""In-memory TaskStore: the fake held to the same conformance suite as the DynamoDB adapter.
A commit checks every precondition first, then applies everything, under one lock: atomic."""

from __future__ import annotations

import threading
from collections import defaultdict

from dovecote.tasks import machine
from dovecote.tasks.model import (
    TOTAL_SIZE_CAP,
    Event,
    Grant,
    Message,
    Part,
    Receipt,
    Task,
    expiry_shard,
    lease_deadline,
)
from dovecote.tasks.ports import (
    Commit,
    LeasePage,
    MessageIdTaken,
    ReceiptTaken,
    Snapshot,
    SubmissionIdTaken,
    TaskChanged,
    TaskExists,
    TaskFilter,
    TaskPage,
)


def context_key(task: Task) -> tuple[str, ...]:
    return (task.created_at, task.workspace, task.id)


def authority_key(task: Task) -> tuple[str, ...]:
    # updated_at descending, then workspace and id ascending: invert the timestamp's order by
    # sorting on its negated digits (RFC 3339 UTC strings sort like the instants they name).
    return ("".join(chr(0x7F - ord(c)) for c in task.updated_at), task.workspace, task.id)


def lease_key(task: Task) -> tuple[str, ...]:
    return (task.granted_at, task.workspace, task.id, f"{task.fence:020d}")


class InMemoryTaskStore:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.tasks: dict[tuple[str, str], Task] = {}
        self.receipts: dict[tuple[str, str], Receipt] = {}
        self.messages_by_task: dict[tuple[str, str], list[Message]] = defaultdict(list)
        self.message_ids: set[tuple[str, str]] = set()
        self.events_by_task: dict[tuple[str, str], list[Event]] = defaultdict(list)
        self.grants: dict[tuple[str, str, int], Grant] = {}
        self.submissions: set[tuple[str, str]] = set()

    def read(self, authority: str, command_id: str | None, task_id: str | None) -> Snapshot:
        with self._lock:
            receipt = self.receipts.get((authority, command_id)) if command_id else None
            task = self.tasks.get((authority, task_id)) if task_id else None
            return Snapshot(receipt, task)

    def commit(self, commit: Commit) -> None:
        authority = commit.receipt.authority
        key = (authority, commit.task.id)
        with self._lock:
            if (authority, commit.receipt.id) in self.receipts:
                raise ReceiptTaken()
            current = self.tasks.get(key)
            if commit.expect is None:
                if current is not None:
                    raise TaskExists()
            else:
                e = commit.expect
                if current is None or (current.revision, current.owner, current.fence) != (
                    e.revision,
                    e.owner,
                    e.fence,
                ):
                    raise TaskChanged(current)
                if e.heartbeat_at is not None and current.heartbeat_at != e.heartbeat_at:
                    raise TaskChanged(current)
            if any((authority, m.id) in self.message_ids for m in commit.messages):
                raise MessageIdTaken()
            if commit.submission and (authority, commit.submission) in self.submissions:
                raise SubmissionIdTaken()
            if commit.grant and (authority, commit.task.id, commit.grant.fence) in self.grants:
                raise TaskChanged(current)
            # every precondition holds: apply all of it
            self.receipts[(authority, commit.receipt.id)] = commit.receipt
            self.tasks[key] = commit.task
            for message in commit.messages:
                self.message_ids.add((authority, message.id))
                self.messages_by_task[key].append(message)
            self.events_by_task[key].extend(commit.events)
            if commit.grant:
                self.grants[(authority, commit.task.id, commit.grant.fence)] = commit.grant
            if commit.submission:
                self.submissions.add((authority, commit.submission))

    def heartbeat(self, authority: str, task_id: str, worker: str, fence: int, at: str) -> Task:
        with self._lock:
            task = self.tasks.get((authority, task_id))
            if task is None or task.owner != worker or task.fence != fence:
                raise TaskChanged(task)
            task = task.evolve(heartbeat_at=at)
            self.tasks[(authority, task_id)] = task
            return task

    def expired(self, shard: int, now: str, limit: int) -> list[Task]:
        with self._lock:
            due = [
                (deadline, t)
                for t in self.tasks.values()
                if (deadline := lease_deadline(t)) is not None
                and deadline < now
                and expiry_shard(t.authority, t.id) == shard
            ]
        return [t for _, t in sorted(due, key=lambda pair: (pair[0], pair[1].authority, pair[1].id))][:limit]

    def claimable(self, authority: str, limit: int) -> list[Task]:
        with self._lock:
            tasks = [
                t
                for (a, _), t in self.tasks.items()
                if a == authority and not t.owner and not machine.is_terminal(t.state)
            ]
        return sorted(tasks, key=context_key)[:limit]

    def messages(self, authority: str, task_id: str, after: int, limit: int) -> list[Message]:
        with self._lock:
            found = [m for m in self.messages_by_task[(authority, task_id)] if m.sequence > after][:limit]
        return [_as_stored(m) for m in found]

    def message(self, authority: str, task_id: str, message_id: str) -> Message | None:
        with self._lock:
            for m in self.messages_by_task[(authority, task_id)]:
                if m.id == message_id:
                    return _as_stored(m)
        return None

    def grant(self, authority: str, task_id: str, fence: int) -> Grant | None:
        return self.grants.get((authority, task_id, fence))

    def part_url(self, authority: str, sha256: str, expires_in: int) -> str:
        return f"memory://parts/{authority}/{sha256}"

    def events(self, authority: str, task_id: str, after: int, limit: int) -> list[Event]:
        with self._lock:
            return [e for e in self.events_by_task[(authority, task_id)] if e.sequence > after][:limit]

    def _page(self, tasks: list[Task], order: object, after: tuple[str, ...] | None, limit: int) -> TaskPage:
        ordered = sorted(tasks, key=order)  # type: ignore[call-overload]
        if after is not None:
            ordered = [t for t in ordered if order(t) > after]  # type: ignore[operator]
        page = ordered[:limit]
        more = len(ordered) > limit
        return TaskPage(page, order(page[-1]) if more and page else None)  # type: ignore[operator]

    def context_tasks(self, authority: str, context: str, after: tuple[str, ...] | None, limit: int) -> TaskPage:
        with self._lock:
            tasks = [t for (a, _), t in self.tasks.items() if a == authority and t.context == context]
        return self._page(tasks, context_key, after, limit)

    def authority_tasks(
        self, authority: str, task_filter: TaskFilter, after: tuple[str, ...] | None, limit: int
    ) -> TaskPage:
        with self._lock:
            tasks = [
                t
                for (a, _), t in self.tasks.items()
                if a == authority
                and (not task_filter.context or t.context == task_filter.context)
                and (not task_filter.state or t.state == task_filter.state)
                and (not task_filter.updated_since or t.updated_at >= task_filter.updated_since)
            ]
        page = self._page(tasks, authority_key, after, limit)
        capped = min(len(tasks), TOTAL_SIZE_CAP)
        return TaskPage(page.items, page.after, total_size=capped, total_is_lower_bound=len(tasks) > TOTAL_SIZE_CAP)

    def leases(self, authority: str, worker: str, after: tuple[str, ...] | None, limit: int) -> LeasePage:
        with self._lock:
            tasks = [t for (a, _), t in self.tasks.items() if a == authority and t.owner == worker]
        page = self._page(tasks, lease_key, after, limit)
        return LeasePage(page.items, page.after)


def _as_stored(message: Message) -> Message:
    """As the DynamoDB store reads it back: parts over the inline size are remote (digest, size)."""
    import hashlib
    from dataclasses import replace

    from dovecote.tasks.dynamo import INLINE_PART_BYTES

    parts = tuple(
        p
        if len(p.data) <= INLINE_PART_BYTES
        else Part(p.media_type, b"", hashlib.sha256(p.data).hexdigest(), len(p.data))
        for p in message.parts
    )
    return replace(message, parts=parts)
