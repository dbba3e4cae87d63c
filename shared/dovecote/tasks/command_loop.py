"""The command machinery every task command shares: one read (receipt, then task), replay an exact
retry, decide in pure code on what was read, commit once. A lost race re-reads and decides again, so
the caller gets the precise error for the state that won.

Check order (docs/design/tasks.md#the-check-order), first failure wins:
1. replay an existing receipt (or idempotency_conflict); 2. load the task (not_found);
3. worker commands: the lease grant must be current (stale_lease); 4. revision (revision_conflict);
5. not terminal (terminal_task); 6. transition allowed (invalid_transition); 7. counters in range.
Steps 1 and 2 are here; the rest is each command's `decide`.

Also here: the fail-closed load of a task (an aggregate that breaks an invariant is never served
nor changed) and the alarm a corrupt record raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Generic, NamedTuple, TypeVar

from dovecote.platform.clock import Clock, rfc3339
from dovecote.platform.errors import (
    ArtifactConflict,
    CorruptStore,
    IdempotencyConflict,
    MessageConflict,
    NotFound,
    ReceiptConflict,
    RevisionConflict,
    SubmissionConflict,
    TaskConflict,
    WorkspaceConflict,
)
from dovecote.platform.ids import check_id
from dovecote.platform.principal import Principal
from dovecote.tasks.model import Event, Grant, Message, Receipt, Task, intent_digest, lease_end, task_violations
from dovecote.tasks.ports import (
    ApplyCommit,
    ApplyReceiptTaken,
    ApplySnapshot,
    ArtifactTaken,
    Commit,
    Delivery,
    DeliveryTaken,
    Expect,
    HeadChanged,
    MessageIdTaken,
    ReceiptTaken,
    SubmissionIdTaken,
    TaskChanged,
    TaskExists,
    TaskStore,
)

# A command re-reads and decides again at most this many times when it loses a race.
ATTEMPTS = 3

OnCorrupt = Callable[[str, dict[str, Any]], None]


class Recorded(NamedTuple):
    """A command's answer as its receipt records it (JSON: what an exact retry answers again), its
    status, and whether this is that retry."""

    status: int
    body: dict[str, Any]
    replayed: bool = False


A = TypeVar("A")


class Outcome(NamedTuple, Generic[A]):
    """What the service answers a command: its status, its typed answer, and whether it replays an
    earlier run. The answer is read from the receipt's JSON, a first run's and a retry's alike."""

    status: int
    answer: A
    replayed: bool = False


def answered(recorded: Recorded, read: Callable[[dict[str, Any]], A]) -> Outcome[A]:
    return Outcome(recorded.status, read(recorded.body), recorded.replayed)


class AlreadySettled(Exception):
    """A worker delivery that is already settled: its stored receipt is the answer."""

    def __init__(self, delivery: Delivery) -> None:
        super().__init__("delivery already settled")
        self.delivery = delivery


def replay(receipt: Receipt | None, kind: str, digest: str) -> Recorded | None:
    """The stored answer of an exact retry; another command under the same id is a conflict."""
    if receipt is None:
        return None
    if receipt.kind != kind or receipt.digest != digest:
        raise IdempotencyConflict(
            "this command id was already used for a different command", command_id=receipt.id, kind=receipt.kind
        )
    return Recorded(receipt.status, receipt.result, replayed=True)


def commit_of(
    task: Task,
    expect: Expect | None,
    status: int,
    result: dict[str, Any],
    *,
    messages: tuple[Message, ...] = (),
    events: tuple[Event, ...] = (),
    grant: Grant | None = None,
    submission: str = "",
    ends_lease: str = "",
) -> Commit:
    """A decided commit; its receipt's authority, id, kind and digest are filled in by `run`."""
    receipt = Receipt("", "", "", "", status, result)
    return Commit(receipt, task, expect, messages, events, grant, submission, ends_lease=ends_lease)


def ending_lease(before: Task | None, commit: Commit, principal: Principal, now: Callable[[], str]) -> Commit:
    """A commit that takes the lease from its owner records how that generation ended on the task
    (`last_end`, read by the lease history; the next grant record keeps it). The one place it is
    decided, whichever command ends the lease."""
    if before is None or not before.owner or commit.task.owner:
        return commit
    reason = commit.ends_lease or "task_ended"
    by = "dispatcher" if reason in ("expired", "unaccepted") else principal.worker or principal.role
    return replace(commit, task=commit.task.evolve(last_end=lease_end(before, reason, by, now())))


def report_corrupt(kind: str, facts: dict[str, Any]) -> None:
    """The default alarm: the facts in the log (an operator's to read, never the caller's) and a
    CorruptStore metric that CloudWatch alarms on."""
    from aws_lambda_powertools.metrics import MetricUnit

    from dovecote.platform.observability import logger, metrics

    logger.error("corrupt store record", extra={"record": kind, **facts})
    metrics.add_metric(name="CorruptStore", unit=MetricUnit.Count, value=1)


class CommandLoop:
    """A read-decide-commit loop over one TaskStore: read the task (or answer the stored receipt of
    an exact retry), decide the change, commit it with its receipt in one conditional transaction,
    and read again on a lost race. Every capability of the service runs its commands through it.
    (Named for what it does: it is not a unit of work in the repository-pattern sense; it holds no
    session, tracks no objects, and commits exactly one transaction per decision.)"""

    def __init__(self, store: TaskStore, *, clock: Clock, on_corrupt: OnCorrupt | None = None) -> None:
        self.store = store
        self.clock = clock
        self.on_corrupt = on_corrupt or report_corrupt

    def now(self) -> str:
        return rfc3339(self.clock())

    def run(
        self,
        principal: Principal,
        kind: str,
        command_id: str,
        task_id: str | None,
        command: dict[str, Any],
        decide: Callable[[Task | None], Commit | Recorded],
        *,
        delivery: Delivery | None = None,
    ) -> Recorded:
        """Replay first, then decide on the loaded task, then commit once. `command` is the intent
        the receipt's digest binds the command id to. `delivery` reads and, on commit, stores a
        worker event's settlement with the command."""
        digest = intent_digest(kind, command)
        for _ in range(ATTEMPTS):
            snapshot = self.store.read(
                principal.authority,
                command_id,
                task_id,
                delivery=(delivery.worker, delivery.id) if delivery else None,
            )
            if delivery is not None and snapshot.delivery is not None:
                raise AlreadySettled(snapshot.delivery)
            replayed = replay(snapshot.receipt, kind, digest)
            if replayed is not None:
                return replayed
            if snapshot.task is not None:
                self.checked(snapshot.task)  # a corrupt aggregate is neither served nor changed
            decided = decide(snapshot.task)
            if isinstance(decided, Recorded):
                return decided
            receipt = Receipt(
                principal.authority, command_id, kind, digest, decided.receipt.status, decided.receipt.result
            )
            commit = ending_lease(
                snapshot.task, replace(decided, receipt=receipt, delivery=delivery), principal, self.now
            )
            try:
                self.store.commit(commit)
            except ReceiptTaken:
                continue  # a concurrent exact retry committed first: replay it
            except (TaskChanged, DeliveryTaken):
                continue  # re-read and report what the winning command left
            except HeadChanged as exc:
                head = commit.head_claim
                raise WorkspaceConflict(
                    "the workspace head is not at the expected base revision",
                    workspace=head.workspace if head else "",
                    expected=head.confirmed_revision if head else "",
                    actual=exc.actual.confirmed_revision if exc.actual else None,
                ) from None
            except TaskExists:
                raise TaskConflict("a task with this id already exists", task=task_id) from None
            except ArtifactTaken:
                art = commit.artifact.id if commit.artifact else ""
                raise ArtifactConflict(
                    "an artifact with this id already exists in the workspace", artifact=art
                ) from None
            except MessageIdTaken:
                ids = [m.id for m in commit.messages]
                raise MessageConflict("message id is already in use", message_id=ids[0] if ids else "") from None
            except SubmissionIdTaken:
                raise SubmissionConflict("submission id is already in use", submission=commit.submission) from None
            return Recorded(commit.receipt.status, commit.receipt.result)
        raise RevisionConflict("the task kept changing; retry with the current revision", task=task_id)

    def run_apply(
        self,
        principal: Principal,
        command_id: str,
        workspace: str,
        artifact: str,
        digest: str,
        decide: Callable[[ApplySnapshot], ApplyCommit | Recorded],
    ) -> Recorded:
        """The same loop for an apply receipt: one read of the command receipt, the artifact, its
        apply receipt and the workspace head; one commit."""
        for _ in range(ATTEMPTS):
            snapshot = self.store.read_apply(principal.authority, command_id, workspace, artifact)
            replayed = replay(snapshot.receipt, "record_apply_receipt", digest)
            if replayed is not None:
                return replayed
            decided = decide(snapshot)
            if isinstance(decided, Recorded):
                return decided
            try:
                self.store.commit_apply(decided)
            except (ReceiptTaken, ApplyReceiptTaken):
                continue  # a concurrent receipt won: answer from what it left
            except HeadChanged as exc:
                raise WorkspaceConflict(
                    "the workspace head moved before this receipt",
                    expected=decided.head_from,
                    actual=exc.actual.confirmed_revision if exc.actual else None,
                ) from None
            return Recorded(decided.receipt.status, decided.receipt.result)
        raise ReceiptConflict("the artifact's receipt kept changing; read it and retry", artifact=artifact)

    # ---- fail-closed reads ----------------------------------------------------------------------

    def load(self, principal: Principal, task_id: str) -> Task:
        check_id(task_id, "task")
        task = self.store.read(principal.authority, None, task_id).task
        if task is None:
            raise NotFound("task not found", task=task_id)
        return self.checked(task)

    def checked(self, task: Task) -> Task:
        """Fail closed: an aggregate that breaks an invariant is never served
        (docs/design/tasks.md#counters-and-invariants)."""
        violations = task_violations(task)
        if violations:
            raise self.corrupt("task", authority=task.authority, task=task.id, violations=violations)
        return task

    @contextmanager
    def reporting(self, kind: str, **facts: Any) -> Iterator[None]:
        """A record the store itself refused (a seal that does not open, a digest that does not
        match) raises the alarm like an invariant violation does."""
        try:
            yield
        except CorruptStore as exc:
            self.on_corrupt(kind, {**facts, **exc.details})
            raise

    def corrupt(self, kind: str, **facts: Any) -> CorruptStore:
        self.on_corrupt(kind, facts)
        # The caller learns that a stored record is unusable, not what it holds.
        return CorruptStore("a stored record of this task breaks an invariant; it is not served", record=kind)
