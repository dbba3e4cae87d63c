"""The TaskStore port: what every task backend promises (tests/integration/test_task_store_conformance.py
holds the in-memory fake and the DynamoDB adapter to it).

- `read` is one strongly consistent read of the receipt and the task together.
- `commit` is atomic: the receipt, the task (inserted, or replaced only if its expected revision,
  owner and fence still hold), and every inserted record (messages, events, grant, submission) become
  visible together or not at all. A failure names its cause with a typed exception below. A failure
  that may have committed raises CommitUnknown; the receipt makes the exact retry safe.
- Lists are keyset-paged and ordered as SEMANTICS §2 says; everything is scoped by authority.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from dovecote.tasks.model import Event, Grant, Message, Receipt, Task


@dataclass(frozen=True, slots=True)
class Expect:
    """The CAS precondition on the stored task."""

    revision: int
    owner: str
    fence: int
    # When set, the stored lease's last heartbeat must still be this one: the dispatcher's fence of
    # a silent lease loses to a heartbeat that arrived after it judged the lease silent.
    heartbeat_at: str | None = None


@dataclass(frozen=True, slots=True)
class Commit:
    receipt: Receipt
    task: Task
    expect: Expect | None  # None: insert a new task
    messages: tuple[Message, ...] = ()
    events: tuple[Event, ...] = ()
    grant: Grant | None = None
    submission: str = ""


@dataclass(frozen=True, slots=True)
class Snapshot:
    receipt: Receipt | None
    task: Task | None


class ReceiptTaken(Exception):
    """Another commit stored a receipt under this command id first."""


class TaskExists(Exception):
    pass


class TaskChanged(Exception):
    """The CAS precondition failed; `actual` is the stored task when the store knows it."""

    def __init__(self, actual: Task | None) -> None:
        super().__init__("task changed")
        self.actual = actual


class MessageIdTaken(Exception):
    pass


class SubmissionIdTaken(Exception):
    pass


@dataclass(frozen=True, slots=True)
class TaskFilter:
    context: str = ""
    state: str = ""
    updated_since: str = ""


@dataclass(frozen=True, slots=True)
class TaskPage:
    items: list[Task]
    after: tuple[str, ...] | None  # keyset position to continue after; None when done
    total_size: int | None = None
    total_is_lower_bound: bool = False


@dataclass(frozen=True, slots=True)
class LeasePage:
    items: list[Task] = field(default_factory=list)
    after: tuple[str, ...] | None = None


class TaskStore(Protocol):
    def read(self, authority: str, command_id: str | None, task_id: str | None) -> Snapshot: ...

    def commit(self, commit: Commit) -> None: ...

    def claimable(self, authority: str, limit: int) -> list[Task]:
        """Oldest first by (created_at, workspace, id): non-terminal, unowned. May be slightly
        stale (a sparse index); the commit's CAS is what makes a claim safe."""
        ...

    def messages(self, authority: str, task_id: str, after: int, limit: int) -> list[Message]:
        """Oldest first. Parts stored out of line (over INLINE_PART_BYTES) come back remote: their
        digest and size, no bytes (see part_url)."""
        ...

    def events(self, authority: str, task_id: str, after: int, limit: int) -> list[Event]: ...

    def context_tasks(self, authority: str, context: str, after: tuple[str, ...] | None, limit: int) -> TaskPage: ...

    def authority_tasks(
        self, authority: str, task_filter: TaskFilter, after: tuple[str, ...] | None, limit: int
    ) -> TaskPage: ...

    def leases(self, authority: str, worker: str, after: tuple[str, ...] | None, limit: int) -> LeasePage: ...

    def message(self, authority: str, task_id: str, message_id: str) -> Message | None:
        """One message of the task by its id (ids are unique in the authority), or None."""
        ...

    def grant(self, authority: str, task_id: str, fence: int) -> Grant | None:
        """The grant history's record for one lease generation, or None."""
        ...

    def part_url(self, authority: str, sha256: str, expires_in: int) -> str:
        """A download URL for a message part stored by digest (read back as a remote Part)."""
        ...

    def heartbeat(self, authority: str, task_id: str, worker: str, fence: int, at: str) -> Task:
        """Record a sign of life of the lease (worker, fence): one conditional write that never
        changes the revision. Raises TaskChanged(actual) when that lease is not current (actual is
        None when the task does not exist)."""
        ...

    def expired(self, shard: int, now: str, limit: int) -> list[Task]:
        """Leased tasks of every authority in expiry shard `shard` whose deadline (last heartbeat +
        timeout) is before `now`, oldest deadline first, through an index: never a scan. May be
        slightly stale; the fence's CAS is what makes acting on it safe."""
        ...
