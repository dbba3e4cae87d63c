"""The TaskStore port: what every task backend promises (tests/integration/test_task_store_conformance.py
holds the in-memory fake and the DynamoDB adapter to it; tasks/storage.py holds the decisions they
share, so they differ only in persistence).

- `read` is one strongly consistent read of the receipt and the task together (and the workspace
  head, when a workspace is named).
- `commit` is atomic: the receipt, the task (inserted, or replaced only if its expected revision,
  owner and fence still hold), every inserted record (messages, events, grant, submission,
  artifact), the artifact's state change, and the workspace head's insert or check become visible
  together or not at all. A failure names its cause with a typed exception below. A failure that may
  have committed raises CommitUnknown; the receipt makes the exact retry safe.
- An artifact's payload is written before the transaction that references it (bytes sealed by the
  store's protector); payloads and message parts are always sealed at rest by the AWS store.
- `read_apply` / `commit_apply` are the same pair for an apply receipt: one read of the command
  receipt, the artifact, its apply receipt and the workspace head; one atomic commit of the command
  receipt, the apply receipt and (for `success`) the head's compare-and-swap.
- Lists are keyset-paged and ordered as docs/design/paging.md#orders says; everything is scoped by authority.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from dovecote.platform.uploads import PresignedUpload
from dovecote.tasks.model import (
    ApplyReceipt,
    Artifact,
    Event,
    Grant,
    Message,
    PayloadInput,
    Receipt,
    Task,
    WorkspaceHead,
)


@dataclass(frozen=True, slots=True)
class Expect:
    """The CAS precondition on the stored task."""

    revision: int
    owner: str
    fence: int
    # When set, the stored lease's last heartbeat must still be this one: the dispatcher's fence of
    # a silent lease loses to a heartbeat that arrived after it judged the lease silent.
    heartbeat_at: str | None = None
    # When set, the stored grant must still be unaccepted: the dispatcher's fence of a grant past its
    # accept deadline loses to an accept (or a first sign of life) that landed after it looked.
    unaccepted: bool = False


@dataclass(frozen=True, slots=True)
class ArtifactChange:
    """An artifact's state move inside a task command (publish on complete, discard on cancel/fail)."""

    workspace: str
    artifact: str
    from_state: str
    to_state: str
    at: str

    @property
    def stamp(self) -> str:
        """The artifact field the move stamps with `at`."""
        return "published_at" if self.to_state == "published" else "discarded_at"


@dataclass(frozen=True, slots=True)
class Commit:
    """One command's writes, committed in one transaction: its receipt, the task and what it appends."""

    receipt: Receipt
    task: Task
    expect: Expect | None  # None: insert a new task
    messages: tuple[Message, ...] = ()
    events: tuple[Event, ...] = ()
    grant: Grant | None = None
    submission: str = ""
    # freeze_artifact: the new artifact, its payload (inline bytes, or the digest of an upload the
    # store hashes and moves), and the workspace head claim: inserted by the first freeze in the
    # workspace, else its confirmed revision must equal the claim's (HeadChanged carries the actual).
    artifact: Artifact | None = None
    payload: PayloadInput | None = None
    head_claim: WorkspaceHead | None = None
    artifact_change: ArtifactChange | None = None
    # A worker event's settlement, stored with the command it settles (see worker events).
    delivery: Delivery | None = None
    # Why this commit ends the current lease, when it is a fence (model.LEASE_END_REASONS); a commit
    # that ends one without saying (a terminal transition) ends it as "task_ended".
    ends_lease: str = ""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a command reads before it decides: its receipt (a replay), the task and a delivery."""

    receipt: Receipt | None
    task: Task | None
    delivery: Delivery | None = None


# A worker delivery's key within the authority: (worker, delivery id).
DeliveryKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Delivery:
    """A worker event's settlement, keyed by (authority, worker, delivery id): the exact event's
    digest and the receipt it got, so an exact retry answers the same and a reuse is refused."""

    authority: str
    worker: str
    id: str
    digest: str
    receipt: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ApplySnapshot:
    """What an apply receipt command reads: its command receipt, the artifact, the artifact's apply
    receipt and the workspace head."""

    receipt: Receipt | None
    artifact: Artifact | None
    apply_receipt: ApplyReceipt | None
    head: WorkspaceHead | None


@dataclass(frozen=True, slots=True)
class ApplyCommit:
    """An apply receipt's writes: the receipts, and the head's compare-and-swap on success."""

    receipt: Receipt
    apply_receipt: ApplyReceipt
    # success: the head moves from `head_from` to `head_to` by compare-and-swap.
    head_from: str | None = None
    head_to: WorkspaceHead | None = None


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


class ArtifactTaken(Exception):
    """An artifact with this id already exists in the workspace."""


class HeadChanged(Exception):
    """The workspace head was inserted or moved by another commit first."""

    def __init__(self, actual: WorkspaceHead | None) -> None:
        super().__init__("workspace head changed")
        self.actual = actual


class ApplyReceiptTaken(Exception):
    """The artifact got its (one) apply receipt from another commit first."""


class DeliveryTaken(Exception):
    """Another commit settled this worker delivery first."""


@dataclass(frozen=True, slots=True)
class TaskFilter:
    """A task list's filters: context, state and updated since (empty: any)."""

    context: str = ""
    state: str = ""
    updated_since: str = ""


@dataclass(frozen=True, slots=True)
class TaskPage:
    """A page of tasks, where to continue after it, and the total when counted."""

    items: list[Task]
    after: tuple[str, ...] | None  # keyset position to continue after; None when done
    total_size: int | None = None
    total_is_lower_bound: bool = False


@dataclass(frozen=True, slots=True)
class LeasePage:
    """A page of a worker's leased tasks and where to continue after it."""

    items: list[Task] = field(default_factory=list)
    after: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class ClaimableLayout:
    """The claimable index's layout as the last reshard pass left it: the shard count every entry is
    known to be under (0: unknown, a table no pass has run on), and, while passes toward `target`
    are under way, where the scan of the current one stopped (`resume`, opaque; None: at the start)
    and how many entries it has moved so far."""

    shards: int = 0
    target: int = 0
    resume: str | None = None
    moved: int = 0


class TaskStore(Protocol):
    def read(
        self, authority: str, command_id: str | None, task_id: str | None, *, delivery: DeliveryKey | None = None
    ) -> Snapshot:
        """`delivery` is (worker, delivery id): its settlement is read in the same snapshot."""
        ...

    def commit(self, commit: Commit) -> None: ...

    # The claimable index's partitions per authority (storage.claim_shard places each task).
    claim_shards: int

    def claimable(self, authority: str, shard: int, limit: int) -> list[Task]:
        """One claimable shard, oldest first by (created_at, workspace, id): non-terminal, unowned.
        May be slightly stale (a sparse index); the commit's CAS is what makes a claim safe."""
        ...

    def reshard_claimable(self, resume: str | None, limit: int) -> tuple[int, str | None]:
        """One page of a scan of the whole claimable index (every authority, from `resume`): each
        entry under another shard count than `claim_shards` is moved to its shard, by one write
        conditioned on the entry it saw (a task written since keeps what its writer gave it).
        Returns how many moved and where the next page starts (None: the scan is done)."""
        ...

    def claimable_layout(self) -> ClaimableLayout: ...

    def record_claimable_layout(self, layout: ClaimableLayout) -> None: ...

    # A stream read (messages, events, grant_history) may be given `seen`: the task as this caller
    # just read it (strongly, through `read`). A store that kept that version's records may page
    # from them instead of reading the task again; either way the page is the same.

    def messages(
        self, authority: str, task_id: str, after: int, limit: int, *, seen: Task | None = None
    ) -> list[Message]:
        """Oldest first. Parts stored out of line (over INLINE_PART_BYTES) come back remote: their
        digest and size, no bytes (see part_url)."""
        ...

    def events(
        self, authority: str, task_id: str, after: int, limit: int, *, seen: Task | None = None
    ) -> list[Event]: ...

    def context_tasks(self, authority: str, context: str, after: tuple[str, ...] | None, limit: int) -> TaskPage: ...

    def authority_tasks(
        self, authority: str, task_filter: TaskFilter, after: tuple[str, ...] | None, limit: int
    ) -> TaskPage: ...

    def authority_position(self, updated_at: str, workspace: str, task_id: str) -> tuple[str, ...]:
        """The keyset position of that task in `authority_tasks`: a page continued after it starts
        with the task that follows it (a list cut short, e.g. to bound an answer's size)."""
        ...

    def leases(self, authority: str, worker: str, after: tuple[str, ...] | None, limit: int) -> LeasePage: ...

    def message(self, authority: str, task_id: str, message_id: str) -> Message | None:
        """One message of the task by its id (ids are unique in the authority), or None."""
        ...

    def grant(self, authority: str, task_id: str, fence: int) -> Grant | None:
        """The grant history's record for one lease generation, or None."""
        ...

    def grant_history(
        self, authority: str, task_id: str, after: int, limit: int, *, seen: Task | None = None
    ) -> list[Grant]:
        """The grant history after fence `after`, oldest first."""
        ...

    def part_url(self, authority: str, sha256: str, expires_in: int) -> str:
        """A download URL for a message part stored by digest (read back as a remote Part)."""
        ...

    # ---- artifacts, heads, apply receipts, deliveries ----------------------------------------

    def read_apply(self, authority: str, command_id: str, workspace: str, artifact: str) -> ApplySnapshot: ...

    def commit_apply(self, commit: ApplyCommit) -> None: ...

    def artifact_content(self, authority: str, workspace: str, artifact: str) -> tuple[Artifact, bytes | None] | None:
        """The artifact and its plaintext payload when small enough to answer inline (else None:
        see artifact_url); None when there is no such artifact. One read of the artifact item."""
        ...

    def artifact_url(self, artifact: Artifact, expires_in: int) -> str: ...

    def head(self, authority: str, workspace: str) -> WorkspaceHead | None: ...

    def apply_receipt(self, authority: str, workspace: str, artifact: str) -> ApplyReceipt | None: ...

    def stage_artifact_upload(self, authority: str, sha256: str, max_bytes: int) -> int:
        """Hash a presigned artifact upload (reading no more than `max_bytes` + 1), check it is the
        declared SHA-256, and move it where artifact payloads live. Returns its size. NotFound when
        nothing was uploaded, PayloadTooLarge / InvalidArgument when it is not what was declared."""
        ...

    def presign_artifact_upload(self, authority: str, size: int, sha256: str, expires_in: int) -> PresignedUpload:
        """A PUT URL bound to that size and SHA-256."""
        ...

    def settle(self, delivery: Delivery) -> None:
        """Store a NACK settlement alone (an ACK is stored with its command). DeliveryTaken when one
        exists already."""
        ...

    def heartbeat(self, authority: str, task_id: str, worker: str, fence: int, at: str) -> Task:
        """Record a sign of life of the lease (worker, fence): one conditional write that never
        changes the revision, and that accepts a grant of a task past `submitted` (storage.heartbeat).
        Raises TaskChanged(actual) when that lease is not current (actual is None when the task does
        not exist)."""
        ...

    def expired(self, shard: int, now: str, limit: int) -> list[Task]:
        """Leased tasks of every authority in expiry shard `shard` whose deadline (model.lease_deadline:
        last heartbeat + lease timeout, or grant + accept timeout while unaccepted) is before `now`,
        oldest deadline first, through an index: never a scan. May be slightly stale; the fence's CAS
        is what makes acting on it safe."""
        ...
