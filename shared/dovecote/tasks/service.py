"""Task commands. Every mutating command is: gate the input, one read (receipt, then task), the
seed's check order in pure code, one atomic commit. Pure apart from the TaskStore port.

Check order (SEMANTICS §2), first failure wins:
1. replay an existing receipt (or idempotency_conflict); 2. load the task (not_found);
3. worker commands: the lease grant must be current (stale_lease); 4. revision (revision_conflict);
5. not terminal (terminal_task); 6. transition allowed (invalid_transition); 7. counters in range.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from dovecote.platform.clock import Clock, rfc3339, utc_now
from dovecote.platform.cursors import CursorSigner, LazySigner
from dovecote.platform.errors import (
    ArtifactConflict,
    ArtifactState,
    CorruptStore,
    DomainError,
    Forbidden,
    IdempotencyConflict,
    InvalidArgument,
    InvalidTransition,
    LeaseFenceExhausted,
    LeaseUnavailable,
    MessageConflict,
    NotFound,
    ReceiptConflict,
    RevisionConflict,
    StaleLease,
    SubmissionConflict,
    TaskConflict,
    TerminalTask,
    WorkspaceConflict,
)
from dovecote.platform.media import is_textual
from dovecote.platform.principal import Principal
from dovecote.tasks import machine
from dovecote.tasks.model import (
    ARTIFACT_DEFAULT_MAX,
    ARTIFACT_HARD_MAX,
    DECISIONS,
    MAX_COUNTER,
    MAX_FENCE,
    MAX_LEASE_TIMEOUT,
    MAX_RECEIPT_CODE_BYTES,
    MAX_RECEIPT_MESSAGE_BYTES,
    MESSAGE_PAGE_BYTES,
    ApplyReceipt,
    Artifact,
    Event,
    Grant,
    Message,
    MessageInput,
    Part,
    PayloadInput,
    Receipt,
    Task,
    WorkspaceHead,
    assignment_json,
    check_id,
    gate_digest,
    gate_message,
    gate_payload,
    gate_revision,
    intent_digest,
    message_violations,
    page_limit,
    result_revision,
    task_violations,
)
from dovecote.tasks.ports import (
    ApplyCommit,
    ApplyReceiptTaken,
    ArtifactChange,
    ArtifactTaken,
    Commit,
    Delivery,
    DeliveryTaken,
    Expect,
    HeadChanged,
    MessageIdTaken,
    ReceiptTaken,
    Snapshot,
    SubmissionIdTaken,
    TaskChanged,
    TaskExists,
    TaskFilter,
    TaskStore,
)

# A claim tries this many candidates (oldest first) before answering that nothing is claimable;
# each lost CAS race moves on to the next one.
CLAIM_CANDIDATES = 16
# Long-poll claim: at most this long, re-checking with backoff between these bounds.
MAX_CLAIM_WAIT = 20
CLAIM_BACKOFF = (0.25, 2.0)
DEFAULT_LEASE_TIMEOUT = 300


class AlreadySettled(Exception):
    """A worker delivery that is already settled: its stored receipt is the answer."""

    def __init__(self, delivery: Delivery) -> None:
        super().__init__("delivery already settled")
        self.delivery = delivery


@dataclass(frozen=True, slots=True)
class Freeze:
    """A gated freeze_artifact request: what the artifact will be, before the task is read."""

    artifact_id: str
    base_revision: str
    payload: PayloadInput
    size: int

    def intent(self) -> dict[str, Any]:
        # The payload enters the command digest by its digest and type, never by its bytes.
        return {
            "artifact": self.artifact_id,
            "base": self.base_revision,
            "payload": self.payload.digest,
            "media_type": self.payload.media_type,
            "size": self.size,
        }


@dataclass(frozen=True, slots=True)
class Outcome:
    status: int
    body: dict[str, Any]
    replayed: bool = False


def _expected_revision(body: dict[str, Any], *, create: bool) -> int:
    value = body.get("expected_revision", 0 if create else None)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument("expected_revision must be an integer", field="expected_revision")
    if create and value != 0:
        raise InvalidArgument("expected_revision must be 0 for create", field="expected_revision")
    if not create and not 0 < value <= MAX_COUNTER:
        raise InvalidArgument("expected_revision must be > 0", field="expected_revision")
    return value


def _fence(body: dict[str, Any]) -> int:
    value = body.get("fence")
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_FENCE:
        raise InvalidArgument("fence must be an integer between 1 and 2^63-1", field="fence")
    return value


def _lease_timeout(body: dict[str, Any], default: int) -> int:
    value = body.get("lease_timeout_seconds", default)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_LEASE_TIMEOUT:
        raise InvalidArgument(
            f"lease_timeout_seconds must be an integer between 0 and {MAX_LEASE_TIMEOUT}",
            field="lease_timeout_seconds",
        )
    return value


def _wait_seconds(body: dict[str, Any]) -> int:
    value = body.get("wait_seconds", 0)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_CLAIM_WAIT:
        raise InvalidArgument(f"wait_seconds must be an integer between 0 and {MAX_CLAIM_WAIT}", field="wait_seconds")
    return value


def worker_id(principal: Principal) -> str:
    principal.require("worker")
    if not principal.worker:
        raise Forbidden("worker commands need a token with a worker id")
    return principal.worker


class TaskService:
    def __init__(
        self,
        store: TaskStore,
        signer: CursorSigner | None = None,
        *,
        clock: Clock = utc_now,
        signer_factory: Callable[[], CursorSigner] | None = None,
        default_lease_timeout: int = DEFAULT_LEASE_TIMEOUT,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        presign_seconds: int = 900,
        on_corrupt: Callable[[str, dict[str, Any]], None] | None = None,
        artifact_max_bytes: int = ARTIFACT_DEFAULT_MAX,
    ) -> None:
        self._store = store
        self._signers = LazySigner(signer, signer_factory)
        self._clock = clock
        self._default_lease_timeout = default_lease_timeout
        self._sleep = sleep
        self._monotonic = monotonic
        self._presign_seconds = presign_seconds
        self._on_corrupt = on_corrupt or _report_corrupt
        if not 0 < artifact_max_bytes <= ARTIFACT_HARD_MAX:
            raise ValueError(f"artifact_max_bytes must be between 1 and {ARTIFACT_HARD_MAX}")
        self._artifact_max = artifact_max_bytes

    @property
    def signer(self) -> CursorSigner:
        return self._signers.get()

    # ---- the commit loop --------------------------------------------------------------------

    def _run(
        self,
        principal: Principal,
        kind: str,
        command_id: str,
        task_id: str | None,
        command: dict[str, Any],
        decide: Callable[[Task | None], Commit | Outcome],
        *,
        delivery: Delivery | None = None,
    ) -> Outcome:
        """Replay first, then decide on the loaded task, then commit once. A lost race re-reads and
        decides again, so the caller gets the precise error for the state that won. `delivery`
        reads and, on commit, stores a worker event's settlement with the command."""
        digest = intent_digest(kind, command)
        for _ in range(3):
            snapshot = self._store.read(
                principal.authority,
                command_id,
                task_id,
                delivery=(delivery.worker, delivery.id) if delivery else None,
            )
            if delivery is not None and snapshot.delivery is not None:
                raise AlreadySettled(snapshot.delivery)
            replay = _replay(snapshot, kind, digest)
            if replay is not None:
                return replay
            if snapshot.task is not None:
                self._checked(snapshot.task)  # a corrupt aggregate is neither served nor changed
            decided = decide(snapshot.task)
            if isinstance(decided, Outcome):
                return decided
            commit = replace(
                decided,
                receipt=Receipt(
                    principal.authority, command_id, kind, digest, decided.receipt.status, decided.receipt.result
                ),
                delivery=delivery,
            )
            try:
                self._store.commit(commit)
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
            return Outcome(commit.receipt.status, commit.receipt.result)
        raise RevisionConflict("the task kept changing; retry with the current revision", task=task_id)

    def _now(self) -> str:
        return rfc3339(self._clock())

    # ---- caller commands --------------------------------------------------------------------

    def create(self, principal: Principal, body: dict[str, Any]) -> Outcome:
        principal.require("caller")
        command_id = check_id(body.get("command_id"), "command_id")
        task_id = check_id(body.get("id"), "id")
        workspace = check_id(body.get("workspace"), "workspace")
        context = check_id(body.get("context"), "context")
        _expected_revision(body, create=True)
        message = gate_message(body.get("message"))
        timeout = _lease_timeout(body, self._default_lease_timeout)
        command = {
            "id": task_id,
            "workspace": workspace,
            "context": context,
            "message": message.to_json(),
            "lease_timeout_seconds": timeout,
        }

        def decide(existing: Task | None) -> Commit | Outcome:
            if existing is not None:
                raise TaskConflict("a task with this id already exists", task=task_id)
            now = self._now()
            task = Task(
                principal.authority, task_id, workspace, context, "submitted", 1, 1, 1, now, now, lease_timeout=timeout
            )
            record = Message(task_id, message.id, 1, "caller", message.parts, now)
            event = Event(task_id, 1, "task_submitted", "submitted", 1, now, message=message.id)
            return _commit(task, None, 201, task.to_json(), messages=(record,), events=(event,))

        outcome = self._run(principal, "create_task", command_id, task_id, command, decide)
        # An exact retry answers 200 with the original task.
        return Outcome(200, outcome.body, True) if outcome.replayed else outcome

    def reply(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Outcome:
        principal.require("caller")
        message = gate_message(body.get("message"))
        return self._transition(principal, "reply_task", task_id, body, message=message)

    def cancel(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Outcome:
        principal.require("caller")
        return self._transition(principal, "cancel_task", task_id, body)

    # ---- worker commands --------------------------------------------------------------------

    def accept(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Outcome:
        return self._transition(principal, "accept_task", task_id, body)

    def reject(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Outcome:
        return self._transition(principal, "reject_task", task_id, body)

    def fail(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Outcome:
        return self._transition(principal, "fail_task", task_id, body)

    def request_input(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Outcome:
        return self._transition(principal, "request_input", task_id, body, message=gate_message(body.get("message")))

    def freeze(self, principal: Principal, task_id: str, body: dict[str, Any], **kw: Any) -> Outcome:
        """freeze_artifact (worker, working, at most once per task): the artifact with its payload
        (inline, or a presigned upload committed by SHA-256), its result revision, and the workspace
        head claim, in the task's one transaction. Answers {task, artifact}."""
        worker_id(principal)
        check_id(task_id, "task")
        artifact_id = check_id(body.get("artifact_id"), "artifact_id")
        base = gate_revision(body.get("expected_base_revision"), "expected_base_revision")
        payload = gate_payload(body.get("payload"), self._artifact_max)
        if payload.data is not None:
            size = len(payload.data)
        else:
            # The upload is hashed (read no further than the maximum + 1 byte) and moved into place
            # before the command: its size is part of the artifact the command commits.
            size = self._store.stage_artifact_upload(principal.authority, payload.upload_sha256, self._artifact_max)
        freeze = Freeze(artifact_id, base, payload, size)
        return self._transition(principal, "freeze_artifact", task_id, body, freeze=freeze, **kw)

    def complete(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Outcome:
        submission = check_id(body.get("submission_id"), "submission_id")
        message = gate_message(body.get("message"))
        artifact = body.get("artifact_id")
        if artifact is not None:
            check_id(artifact, "artifact_id")
        return self._transition(
            principal, "complete_task", task_id, body, message=message, submission=submission, artifact=artifact
        )

    def _transition(
        self,
        principal: Principal,
        kind: str,
        task_id: str,
        body: dict[str, Any],
        *,
        message: MessageInput | None = None,
        submission: str = "",
        artifact: str | None = None,
        freeze: Freeze | None = None,
        delivery: Delivery | None = None,
    ) -> Outcome:
        transition = machine.TRANSITIONS[kind]
        worker = worker_id(principal) if transition.by == "worker" else ""
        check_id(task_id, "task")
        command_id = check_id(body.get("command_id"), "command_id")
        expected = _expected_revision(body, create=False)
        fence = _fence(body) if transition.by == "worker" else 0
        command: dict[str, Any] = {"task": task_id, "expected_revision": expected}
        if transition.by == "worker":
            command.update(fence=fence, worker=worker)
        if message is not None:
            command["message"] = message.to_json()
        if submission:
            command["submission"] = submission
        if artifact is not None:
            command["artifact"] = artifact
        if freeze is not None:
            command["freeze"] = freeze.intent()

        def decide(task: Task | None) -> Commit | Outcome:
            if task is None:
                raise NotFound("task not found", task=task_id)
            if transition.by == "worker" and (task.owner != worker or task.fence != fence):
                raise StaleLease(
                    "the lease this command carries is not current",
                    fence=fence,
                    current_fence=task.fence if task.owner else None,
                )
            if task.revision != expected:
                raise RevisionConflict(
                    f"expected revision {expected}, the task is at {task.revision}",
                    expected=expected,
                    actual=task.revision,
                )
            if machine.is_terminal(task.state):
                raise TerminalTask(f"the task is {task.state}", state=task.state)
            to = machine.next_state(kind, task.state)
            if to is None:
                raise InvalidTransition(f"{kind} is not allowed from {task.state}", state=task.state, command=kind)
            if task.revision >= MAX_COUNTER or task.event_count >= MAX_COUNTER:
                # The reference reports exhausted counters as a revision conflict (step 7 of the
                # check order comes after the transition check but speaks of the revision).
                raise RevisionConflict(
                    "the task's revision cannot grow any further", expected=expected, actual=task.revision
                )
            now = self._now()
            extra: dict[str, Any] = {}
            changes: dict[str, Any] = {}
            if kind == "complete_task" and (artifact or "") != task.artifact:
                # complete names exactly the frozen artifact, or none when none was frozen.
                raise ArtifactState(
                    "complete must name exactly the task's frozen artifact, or none when none was frozen",
                    artifact=artifact,
                    frozen=task.artifact or None,
                )
            if task.artifact and kind in ("complete_task", "cancel_task", "fail_task"):
                to_state = "published" if kind == "complete_task" else "discarded"
                extra["artifact_change"] = ArtifactChange(task.workspace, task.artifact, "frozen", to_state, now)
            if freeze is not None:
                if task.artifact:
                    raise ArtifactConflict("the task has already frozen an artifact", artifact=task.artifact)
                frozen = Artifact(
                    authority=task.authority,
                    workspace=task.workspace,
                    id=freeze.artifact_id,
                    task=task.id,
                    state="frozen",
                    base_revision=freeze.base_revision,
                    result_revision=result_revision(freeze.base_revision, freeze.artifact_id, freeze.payload.digest),
                    payload_digest=freeze.payload.digest,
                    payload_size=freeze.size,
                    media_type=freeze.payload.media_type,
                    frozen_at=now,
                )
                # The first freeze in a workspace creates its head (first writer wins); later ones
                # must find it at their base: one conditional write in the commit, no read.
                head = WorkspaceHead(task.authority, task.workspace, freeze.base_revision, now)
                extra.update(artifact=frozen, payload=freeze.payload, head_claim=head)
                changes["artifact"] = freeze.artifact_id
            revision = task.revision + 1
            messages: tuple[Message, ...] = ()
            message_id = ""
            if message is not None:
                author = transition.message or "caller"
                messages = (Message(task_id, message.id, task.message_count + 1, author, message.parts, now),)
                message_id = message.id
            changes.update(
                state=to,
                revision=revision,
                event_count=task.event_count + 1,
                message_count=task.message_count + len(messages),
                updated_at=now,
            )
            if transition.by == "worker":
                changes["heartbeat_at"] = now  # every worker command is a sign of life
            if machine.is_terminal(to):
                changes.update(owner="", granted_at="", heartbeat_at="")  # the fence is kept
            if submission:
                changes["submission"] = {"id": submission, "final_message": message_id, "published_at": now}
            after = task.evolve(**changes)
            event = Event(
                task_id,
                task.event_count + 1,
                transition.event,
                to,
                revision,
                now,
                message=message_id,
                submission=submission,
                artifact=freeze.artifact_id
                if freeze is not None
                else (task.artifact if kind == "complete_task" else ""),
            )
            result: dict[str, Any] = after.to_json()
            if freeze is not None:
                result = {"task": after.to_json(), "artifact": extra["artifact"].to_json()}
            return replace(
                _commit(
                    after,
                    Expect(task.revision, task.owner, task.fence),
                    200,
                    result,
                    messages=messages,
                    events=(event,),
                    submission=submission,
                ),
                **extra,
            )

        return self._run(principal, kind, command_id, task_id, command, decide, delivery=delivery)

    # ---- leases -----------------------------------------------------------------------------

    def acquire(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Outcome:
        worker = worker_id(principal)
        check_id(task_id, "task")
        command_id = check_id(body.get("command_id"), "command_id")
        command = {"task": task_id, "worker": worker}
        return self._run(
            principal, "acquire_lease", command_id, task_id, command, lambda task: self._grant(task, worker, task_id)
        )

    def claim(self, principal: Principal, body: dict[str, Any]) -> Outcome:
        """The oldest claimable task. With `wait_seconds`, a claim that finds nothing waits,
        re-checking with backoff, and answers as soon as a task becomes claimable (or 404 at the
        deadline). The wait is not part of the command: a retry with another wait replays."""
        worker = worker_id(principal)
        command_id = check_id(body.get("command_id"), "command_id")
        wait = _wait_seconds(body)
        command = {"worker": worker}
        digest = intent_digest("claim_lease", command)
        snapshot = self._store.read(principal.authority, command_id, None)
        replay = _replay(snapshot, "claim_lease", digest)
        if replay is not None:
            return replay
        deadline = self._monotonic() + wait
        pause = CLAIM_BACKOFF[0]
        while True:
            try:
                return self._claim_once(principal, worker, command_id, digest)
            except NotFound:
                left = deadline - self._monotonic()
                if left <= 0:
                    raise
                self._sleep(min(pause, left))
                pause = min(pause * 2, CLAIM_BACKOFF[1])

    def _claim_once(self, principal: Principal, worker: str, command_id: str, digest: str) -> Outcome:
        for candidate in self._store.claimable(principal.authority, CLAIM_CANDIDATES):
            try:
                decided = self._grant(candidate, worker, candidate.id)
            except (LeaseUnavailable, TerminalTask):
                # A stale index entry (the task was leased or ended since): try the next oldest.
                # An exhausted fence is not skipped: the oldest candidate answers it (SEMANTICS §2).
                continue
            commit = Commit(
                receipt=Receipt(principal.authority, command_id, "claim_lease", digest, 200, decided.receipt.result),
                task=decided.task,
                expect=decided.expect,
                grant=decided.grant,
            )
            try:
                self._store.commit(commit)
            except TaskChanged:
                continue  # another worker won this one; try the next oldest
            except ReceiptTaken:
                snapshot = self._store.read(principal.authority, command_id, None)
                replay = _replay(snapshot, "claim_lease", digest)
                if replay is not None:
                    return replay
                raise
            return Outcome(200, commit.receipt.result)
        raise NotFound("no claimable task")

    def _grant(self, task: Task | None, worker: str, task_id: str) -> Commit:
        if task is None:
            raise NotFound("task not found", task=task_id)
        if machine.is_terminal(task.state):
            raise TerminalTask(f"the task is {task.state}; it cannot be leased", state=task.state)
        if task.owner:
            raise LeaseUnavailable("the task is already leased", fence=task.fence)
        if task.fence >= MAX_FENCE:
            raise LeaseFenceExhausted("the task's lease fence is exhausted", fence=task.fence)
        now = self._now()
        fence = task.fence + 1
        after = task.evolve(owner=worker, fence=fence, granted_at=now, heartbeat_at=now)
        return _commit(
            after,
            Expect(task.revision, "", task.fence),
            200,
            {"assignment": assignment_json(after, worker, fence, now)},
            grant=Grant(task.id, worker, fence, now),
        )

    def fence(
        self, principal: Principal, task_id: str, body: dict[str, Any], *, if_silent_since: str | None = None
    ) -> Outcome:
        """Retire the current lease generation (the owner releasing it, or an admin). The
        dispatcher passes `if_silent_since`, the heartbeat it judged stale: the fence then commits
        only if no sign of life arrived since, so a late heartbeat or worker command wins cleanly."""
        principal.require("worker")
        check_id(task_id, "task")
        command_id = check_id(body.get("command_id"), "command_id")
        fence = _fence(body)
        # The acting worker is part of the intent: the same command id from another worker is an
        # idempotency conflict, never a replay of someone else's fence (SEMANTICS §2, leases).
        command = {"task": task_id, "fence": fence, "worker": principal.worker, "role": principal.role}

        def decide(task: Task | None) -> Commit | Outcome:
            if task is None:
                raise NotFound("task not found", task=task_id)
            if not task.owner or task.fence != fence:
                raise StaleLease(
                    "that lease generation is not current",
                    fence=fence,
                    current_fence=task.fence if task.owner else None,
                )
            if principal.role != "admin" and task.owner != principal.worker:
                raise Forbidden("only the owning worker or an admin may fence this lease")
            if if_silent_since is not None and task.heartbeat_at != if_silent_since:
                raise StaleLease("the lease showed a sign of life; it is not silent", fence=fence)
            after = task.evolve(owner="", granted_at="", heartbeat_at="")
            expect = Expect(task.revision, task.owner, task.fence, heartbeat_at=if_silent_since)
            return _commit(after, expect, 204, {})

        return self._run(principal, "fence_lease", command_id, task_id, command, decide)

    def heartbeat(self, principal: Principal, task_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """A sign of life of the lease: one conditional write, no receipt (a repeat is harmless),
        never a revision change. A fence that is not current is `stale_lease`."""
        worker = worker_id(principal)
        check_id(task_id, "task")
        fence = _fence(body)
        try:
            task = self._store.heartbeat(principal.authority, task_id, worker, fence, self._now())
        except TaskChanged as exc:
            if exc.actual is None:
                raise NotFound("task not found", task=task_id) from None
            current = exc.actual
            raise StaleLease(
                "the lease this heartbeat carries is not current",
                fence=fence,
                current_fence=current.fence if current.owner else None,
            ) from None
        return {"assignment": assignment_json(task, task.owner, task.fence, task.granted_at)}

    def expire_silent_leases(self, shard: int, *, limit: int, command_id: Callable[[Task], str]) -> dict[str, int]:
        """The dispatcher's pass over one expiry shard: fence every lease silent past its timeout
        with the ordinary fence command (receipt, CAS, fence kept), conditioned on the heartbeat it
        saw. Each outcome is data: fenced, or lost to a sign of life / another fence."""
        fenced = lost = 0
        for task in self._store.expired(shard, self._now(), limit):
            admin = Principal(task.authority, "admin")
            try:
                self.fence(
                    admin,
                    task.id,
                    {"command_id": command_id(task), "fence": task.fence},
                    if_silent_since=task.heartbeat_at,
                )
                fenced += 1
            except (StaleLease, NotFound, RevisionConflict):
                lost += 1
        return {"fenced": fenced, "lost": lost}

    def get_lease(self, principal: Principal, task_id: str) -> dict[str, Any]:
        principal.require("worker")
        task = self._load(principal, task_id)
        if not task.owner:
            raise NotFound("the task has no current lease", task=task_id)
        # The current lease must be the grant history's record for this fence.
        grant = self._store.grant(principal.authority, task_id, task.fence)
        if grant is None or grant.worker != task.owner:
            raise self._corrupt(
                "lease",
                authority=task.authority,
                task=task.id,
                fence=task.fence,
                owner=task.owner,
                granted_to=grant.worker if grant else None,
            )
        return {"assignment": assignment_json(task, task.owner, task.fence, task.granted_at)}

    def list_leases(self, principal: Principal, limit: int | None, cursor: str | None) -> dict[str, Any]:
        worker = worker_id(principal)
        size = page_limit(limit)
        scope = "leases:" + worker
        after = self._open(principal, cursor, scope)
        page = self._store.leases(principal.authority, worker, after, size)
        return {
            "items": [assignment_json(t, t.owner, t.fence, t.granted_at) for t in page.items],
            "cursor": self._seal(principal, scope, page.after),
        }

    # ---- worker events: the transport-neutral commit boundary ---------------------------------

    def worker_event(self, principal: Principal, body: dict[str, Any]) -> dict[str, Any]:
        """Settle one worker event delivery (SEMANTICS §2, worker events): ACK when its command
        committed (or is an exact replay), NACK with a stable code for a deterministic rejection. The
        settlement is stored under (authority, worker, delivery id), with the command for an ACK, so
        an exact retry answers the same receipt and a reused delivery id is refused. An
        infrastructure failure settles nothing (it raises: 503, retry the exact delivery)."""
        worker = worker_id(principal)
        delivery_id = check_id(body.get("delivery_id"), "delivery_id")
        event = body.get("event")
        if not isinstance(event, dict):
            raise InvalidArgument("event must be an object", field="event")
        event_id = event.get("event_id") if isinstance(event.get("event_id"), str) else ""
        digest = intent_digest("worker_event", {"worker": worker, "event": event})

        def receipt(decision: str, code: str = "", message: str = "") -> dict[str, Any]:
            out = {"delivery_id": delivery_id, "event_id": event_id, "decision": decision}
            if code:
                out.update(code=code, message=message)
            return out

        ack = receipt("ack")
        delivery = Delivery(principal.authority, worker, delivery_id, digest, ack)
        try:
            if principal.role != "worker":
                # An admin token carrying a worker id may drive the task routes, but a worker's
                # outbox settles only under a worker token: deterministic, so a NACK.
                raise Forbidden("worker events settle only for worker tokens", role=principal.role)
            kind, task_id, command_body, extra = _gate_worker_event(event)
            outcome = self._dispatch_event(principal, kind, task_id, command_body, extra, delivery)
        except AlreadySettled as settled:
            if settled.delivery.digest == digest:
                return settled.delivery.receipt  # an exact retry: the same receipt
            return receipt("nack", "command_conflict", "this delivery id was settled for a different event")
        except DomainError as exc:
            code = _NACK_CODES.get(exc.code)
            if code is None:
                raise  # not a deterministic rejection (an AWS failure): nothing settles
            nack = receipt("nack", code, exc.message)
            return self._settle_alone(replace(delivery, receipt=nack), digest)
        if outcome.replayed:
            # The command committed earlier outside this delivery (or its settlement was lost):
            # the replay is an ACK, stored now.
            return self._settle_alone(delivery, digest)
        return ack

    def _dispatch_event(
        self,
        principal: Principal,
        kind: str,
        task_id: str,
        body: dict[str, Any],
        extra: dict[str, Any],
        delivery: Delivery,
    ) -> Outcome:
        if kind == "freeze_artifact":
            return self.freeze(principal, task_id, body, delivery=delivery)
        message = gate_message(body["message"]) if "message" in body else None
        if kind == "complete_task":
            return self._transition(
                principal,
                kind,
                task_id,
                body,
                message=message,
                submission=check_id(body.get("submission_id"), "submission"),
                artifact=extra.get("artifact"),
                delivery=delivery,
            )
        return self._transition(principal, kind, task_id, body, message=message, delivery=delivery)

    def _settle_alone(self, delivery: Delivery, digest: str) -> dict[str, Any]:
        try:
            self._store.settle(delivery)
        except DeliveryTaken:
            stored = self._store.read(delivery.authority, None, None, delivery=(delivery.worker, delivery.id)).delivery
            if stored is not None and stored.digest == digest:
                return stored.receipt
            return {
                **delivery.receipt,
                "decision": "nack",
                "code": "command_conflict",
                "message": "this delivery id was settled for a different event",
            }
        return delivery.receipt

    # ---- workspaces: artifacts, heads, apply receipts -----------------------------------------

    def record_apply_receipt(
        self, principal: Principal, workspace: str, artifact_id: str, body: dict[str, Any]
    ) -> Outcome:
        """The caller's durable decision about a published artifact (SEMANTICS §2). One read of the
        command receipt, the artifact, its apply receipt and the head; one commit. `success` moves
        the head from the artifact's base to its result by compare-and-swap in the same commit."""
        principal.require("caller")
        check_id(workspace, "workspace")
        check_id(artifact_id, "artifact")
        command_id = check_id(body.get("command_id"), "command_id")
        receipt_id = check_id(body.get("receipt_id"), "receipt_id")
        digest_in = gate_digest(body.get("artifact_digest"), "artifact_digest")
        base = gate_revision(body.get("base_revision"), "base_revision")
        result = gate_revision(body.get("result_revision"), "result_revision")
        decision = body.get("decision")
        if decision not in DECISIONS:
            raise InvalidArgument(f"decision must be one of {', '.join(DECISIONS)}", field="decision")
        observed = gate_revision(body.get("observed_revision"), "observed_revision", required=False)
        if decision == "success" and observed != result:
            raise InvalidArgument("a success must observe the result revision", field="observed_revision")
        if decision == "conflict" and not observed:
            raise InvalidArgument("a conflict must name the observed revision", field="observed_revision")
        code = _bounded_text(body.get("code"), "code", MAX_RECEIPT_CODE_BYTES)
        message = _bounded_text(body.get("message"), "message", MAX_RECEIPT_MESSAGE_BYTES)
        proposed = ApplyReceipt(
            principal.authority,
            workspace,
            artifact_id,
            receipt_id,
            digest_in,
            base,
            result,
            decision,
            observed,
            code,
            message,
        )
        command = {"workspace": workspace, "artifact": artifact_id, **proposed.to_json()}
        command.pop("recorded_at", None)
        digest = intent_digest("record_apply_receipt", command)
        for _ in range(3):
            snap = self._store.read_apply(principal.authority, command_id, workspace, artifact_id)
            replay = _replay(Snapshot(snap.receipt, None), "record_apply_receipt", digest)
            if replay is not None:
                return replay
            art = snap.artifact
            if art is None:
                raise NotFound("artifact not found", workspace=workspace, artifact=artifact_id)
            if art.state != "published":
                raise ArtifactState("only a published artifact takes an apply receipt", state=art.state)
            existing = snap.apply_receipt
            if existing is not None:
                if existing.same_decision(proposed):
                    return Outcome(200, {"receipt": existing.to_json()}, replayed=True)
                raise ReceiptConflict("the artifact already has a different apply receipt", receipt=existing.to_json())
            if (digest_in, base, result) != (art.digest, art.base_revision, art.result_revision):
                raise ReceiptConflict(
                    "the receipt does not name this artifact's digest, base and result",
                    expected={
                        "artifact_digest": art.digest,
                        "base_revision": art.base_revision,
                        "result_revision": art.result_revision,
                    },
                )
            now = self._now()
            recorded = replace(proposed, recorded_at=now)
            head_to = None
            if decision == "success":
                head = snap.head
                if head is None or head.confirmed_revision != base:
                    raise WorkspaceConflict(
                        "the workspace head is not at the artifact's base revision",
                        expected=base,
                        actual=head.confirmed_revision if head else None,
                    )
                head_to = WorkspaceHead(principal.authority, workspace, result, now)
            answer = {"receipt": recorded.to_json()}
            commit = ApplyCommit(
                Receipt(principal.authority, command_id, "record_apply_receipt", digest, 200, answer),
                recorded,
                head_from=base if head_to else None,
                head_to=head_to,
            )
            try:
                self._store.commit_apply(commit)
            except (ReceiptTaken, ApplyReceiptTaken):
                continue  # a concurrent receipt won: answer from what it left
            except HeadChanged as exc:
                raise WorkspaceConflict(
                    "the workspace head moved before this receipt",
                    expected=base,
                    actual=exc.actual.confirmed_revision if exc.actual else None,
                ) from None
            return Outcome(200, answer)
        raise ReceiptConflict("the artifact's receipt kept changing; read it and retry", artifact=artifact_id)

    def get_apply_receipt(self, principal: Principal, workspace: str, artifact_id: str) -> dict[str, Any]:
        principal.require("caller", "worker")
        check_id(workspace, "workspace")
        check_id(artifact_id, "artifact")
        found = self._store.apply_receipt(principal.authority, workspace, artifact_id)
        if found is None:
            raise NotFound("the artifact has no apply receipt", workspace=workspace, artifact=artifact_id)
        return {"receipt": found.to_json()}

    def get_artifact(self, principal: Principal, workspace: str, artifact_id: str) -> dict[str, Any]:
        """The artifact and its payload: `text` or `data_b64` up to 4 MiB, else a `download_url`."""
        principal.require("caller", "worker")
        check_id(workspace, "workspace")
        check_id(artifact_id, "artifact")
        with self._reporting("artifact", authority=principal.authority, workspace=workspace, artifact=artifact_id):
            content = self._store.artifact_content(principal.authority, workspace, artifact_id)
        if content is None:
            raise NotFound("artifact not found", workspace=workspace, artifact=artifact_id)
        art, data = content
        payload: dict[str, Any] = {"media_type": art.media_type}
        if data is None:
            payload["download_url"] = self._store.artifact_url(art, self._presign_seconds)
        elif is_textual(art.media_type) and _utf8(data):
            payload["text"] = data.decode("utf-8")
        else:
            payload.update(Part(art.media_type, data).to_json())
        return {"artifact": art.to_json(), "payload": payload}

    def get_head(self, principal: Principal, workspace: str) -> dict[str, Any]:
        principal.require("caller", "worker")
        check_id(workspace, "workspace")
        head = self._store.head(principal.authority, workspace)
        if head is None:
            raise NotFound("the workspace has no head yet", workspace=workspace)
        return head.to_json()

    def create_artifact_upload(self, principal: Principal, task_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """A presigned PUT for a large artifact payload, bound to its size and SHA-256; freeze it
        then with `payload.upload_sha256`. The caller must hold the task's current lease (`fence`)."""
        worker = worker_id(principal)
        check_id(task_id, "task")
        size = body.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or not 0 < size <= self._artifact_max:
            raise InvalidArgument(f"size must be between 1 and {self._artifact_max}", field="size")
        sha = body.get("sha256")
        if not isinstance(sha, str) or not re.fullmatch(r"(sha256:)?[0-9a-f]{64}", sha):
            raise InvalidArgument("sha256 must be 64 lowercase hex digits", field="sha256")
        fence = _fence(body)
        # Only the holder of the task's current lease may stage a payload for it (one GetItem): a
        # URL is never handed out for a task that does not exist in the authority, or that the
        # worker does not hold.
        task = self._load(principal, task_id)
        if task.owner != worker or task.fence != fence:
            raise StaleLease(
                "the lease this command carries is not current",
                fence=fence,
                current_fence=task.fence if task.owner else None,
            )
        presigned = self._store.presign_artifact_upload(
            principal.authority, size, sha.removeprefix("sha256:"), self._presign_seconds
        )
        expires = rfc3339(self._clock() + timedelta(seconds=self._presign_seconds))
        return {"upload_url": presigned.url, "upload_headers": presigned.headers, "expires_at": expires}

    # ---- reads ------------------------------------------------------------------------------

    def _load(self, principal: Principal, task_id: str) -> Task:
        check_id(task_id, "task")
        task = self._store.read(principal.authority, None, task_id).task
        if task is None:
            raise NotFound("task not found", task=task_id)
        return self._checked(task)

    def _checked(self, task: Task) -> Task:
        """Fail closed: an aggregate that breaks an invariant is never served (SEMANTICS §2)."""
        violations = task_violations(task)
        if violations:
            raise self._corrupt("task", authority=task.authority, task=task.id, violations=violations)
        return task

    @contextmanager
    def _reporting(self, kind: str, **facts: Any) -> Iterator[None]:
        """A record the store itself refused (a seal that does not open, a digest that does not
        match) raises the alarm like an invariant violation does."""
        try:
            yield
        except CorruptStore as exc:
            self._on_corrupt(kind, {**facts, **exc.details})
            raise

    def _corrupt(self, kind: str, **facts: Any) -> CorruptStore:
        self._on_corrupt(kind, facts)
        # The caller learns that a stored record is unusable, not what it holds.
        return CorruptStore("a stored record of this task breaks an invariant; it is not served", record=kind)

    def get(self, principal: Principal, task_id: str) -> dict[str, Any]:
        principal.require("caller", "worker")
        return {"task": self._load(principal, task_id).to_json()}

    def snapshot(self, principal: Principal, task_id: str) -> dict[str, Any]:
        principal.require("caller", "worker")
        task = self._load(principal, task_id)
        return {"task": task.to_json(), "event_cursor": task.event_count}

    def messages(self, principal: Principal, task_id: str, after: int | None, limit: int | None) -> dict[str, Any]:
        """A page of messages after `after`: at most `limit`, and it also stops before its inline parts
        pass MESSAGE_PAGE_BYTES (always at least one message). Parts stored in S3 come as a
        presigned `download_url`."""
        principal.require("caller", "worker")
        task = self._load(principal, task_id)
        start, size = _stream_args(after, limit, task.message_count)
        page: list[dict[str, Any]] = []
        used = 0
        with self._reporting("message", authority=principal.authority, task=task_id):
            found_messages = list(self._store.messages(principal.authority, task_id, start, size))
        for message in found_messages:
            weight = sum(len(p.data) for p in message.parts)
            if page and used + weight > MESSAGE_PAGE_BYTES:
                break
            used += weight
            page.append(self._message_json(principal, message))
        return _stream_page(page, start, task.message_count)

    def message(self, principal: Principal, task_id: str, message_id: str) -> dict[str, Any]:
        """One message by its id (unique in the authority)."""
        principal.require("caller", "worker")
        check_id(task_id, "task")
        check_id(message_id, "message")
        with self._reporting("message", authority=principal.authority, task=task_id, message_id=message_id):
            found = self._store.message(principal.authority, task_id, message_id)
        if found is None:
            raise NotFound("message not found", task=task_id, message_id=message_id)
        return {"message": self._message_json(principal, found)}

    def _message_json(self, principal: Principal, message: Message) -> dict[str, Any]:
        violations = message_violations(message)
        if violations:
            raise self._corrupt(
                "message",
                authority=principal.authority,
                task=message.task,
                sequence=message.sequence,
                violations=violations,
            )
        out = message.to_json()
        for rendered, part in zip(out["parts"], message.parts, strict=True):
            if part.remote:
                rendered["download_url"] = self._store.part_url(principal.authority, part.sha256, self._presign_seconds)
        return out

    def events(self, principal: Principal, task_id: str, after: int | None, limit: int | None) -> dict[str, Any]:
        principal.require("caller", "worker")
        task = self._load(principal, task_id)
        start, size = _stream_args(after, limit, task.event_count)
        items = self._store.events(principal.authority, task_id, start, size)
        return _stream_page([e.to_json() for e in items], start, task.event_count)

    def list_context(self, principal: Principal, context: str, limit: int | None, cursor: str | None) -> dict[str, Any]:
        principal.require("caller", "worker")
        check_id(context, "context")
        size = page_limit(limit)
        scope = "context:" + context
        page = self._store.context_tasks(principal.authority, context, self._open(principal, cursor, scope), size)
        return {"items": [t.to_json() for t in page.items], "cursor": self._seal(principal, scope, page.after)}

    def list_tasks(
        self, principal: Principal, task_filter: TaskFilter, limit: int | None, cursor: str | None
    ) -> dict[str, Any]:
        principal.require("caller", "worker")
        if task_filter.context:
            check_id(task_filter.context, "context")
        if task_filter.state and task_filter.state not in machine.STATES:
            raise InvalidArgument(f"state must be one of {', '.join(machine.STATES)}", field="state")
        if task_filter.updated_since:
            task_filter = TaskFilter(task_filter.context, task_filter.state, _rfc3339_arg(task_filter.updated_since))
        size = page_limit(limit)
        scope = "tasks:" + hashlib.sha256(repr(task_filter).encode()).hexdigest()[:24]
        page = self._store.authority_tasks(principal.authority, task_filter, self._open(principal, cursor, scope), size)
        return {
            "items": [t.to_json() for t in page.items],
            "cursor": self._seal(principal, scope, page.after),
            "total_size": page.total_size or 0,
            "total_is_lower_bound": page.total_is_lower_bound,
        }

    def _open(self, principal: Principal, cursor: str | None, scope: str) -> tuple[str, ...] | None:
        if not cursor:
            return None
        position = self.signer.open(cursor, authority=principal.authority, scope=scope).get("after")
        if not isinstance(position, list) or not all(isinstance(p, str) for p in position):
            raise InvalidArgument("cursor is malformed", field="cursor")
        return tuple(position)

    def _seal(self, principal: Principal, scope: str, after: tuple[str, ...] | None) -> str | None:
        if after is None:
            return None
        return self.signer.seal(authority=principal.authority, scope=scope, position={"after": list(after)})


def _report_corrupt(kind: str, facts: dict[str, Any]) -> None:
    """The default alarm: the facts in the log (an operator's to read, never the caller's) and a
    CorruptStore metric that CloudWatch alarms on."""
    from aws_lambda_powertools.metrics import MetricUnit

    from dovecote.platform.observability import logger, metrics

    logger.error("corrupt store record", extra={"record": kind, **facts})
    metrics.add_metric(name="CorruptStore", unit=MetricUnit.Count, value=1)


def _commit(
    task: Task,
    expect: Expect | None,
    status: int,
    result: dict[str, Any],
    *,
    messages: tuple[Message, ...] = (),
    events: tuple[Event, ...] = (),
    grant: Grant | None = None,
    submission: str = "",
) -> Commit:
    # The receipt's authority, id, kind and digest are filled in by TaskService._run.
    return Commit(Receipt("", "", "", "", status, result), task, expect, messages, events, grant, submission)


# Domain error code → the worker event NACK code (SEMANTICS §2: fence exhausted is state_conflict).
_NACK_CODES = {
    "invalid_argument": "invalid",
    "payload_too_large": "invalid",
    "forbidden": "forbidden",
    "not_found": "not_found",
    "stale_lease": "stale_lease",
    "revision_conflict": "revision_conflict",
    "terminal_task": "state_conflict",
    "invalid_transition": "state_conflict",
    "lease_fence_exhausted": "state_conflict",
    "artifact_conflict": "state_conflict",
    "artifact_state": "state_conflict",
    "workspace_conflict": "state_conflict",
    "message_conflict": "command_conflict",
    "submission_conflict": "command_conflict",
    "idempotency_conflict": "command_conflict",
}
WORKER_EVENT_KINDS = ("accept_task", "reject_task", "request_input", "fail_task", "freeze_artifact", "complete_task")
_EVENT_FIELDS = {
    "accept_task": set(),
    "reject_task": set(),
    "fail_task": set(),
    "request_input": {"message"},
    "complete_task": {"message", "submission", "artifact"},
    "freeze_artifact": {"freeze"},
}


def _gate_worker_event(event: dict[str, Any]) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """The one gate for a WorkerEvent: the kind, and every field the kind does not use empty (so no
    adapter can smuggle an ignored interpretation through). Returns the command's body."""
    kind = event.get("kind")
    if kind not in WORKER_EVENT_KINDS:
        raise InvalidArgument(f"event.kind must be one of {', '.join(WORKER_EVENT_KINDS)}", field="event.kind")
    known = {"event_id", "kind", "task", "fence", "expected_revision", "message", "submission", "artifact", "freeze"}
    unknown = set(event) - known
    if unknown:
        raise InvalidArgument(f"event.{sorted(unknown)[0]} is not an event field", field="event")
    for name in ("message", "submission", "artifact", "freeze"):
        if name not in _EVENT_FIELDS[kind] and event.get(name) not in (None, "", {}):
            raise InvalidArgument(f"event.{name} must be empty for {kind}", field=f"event.{name}")
    for name in _EVENT_FIELDS[kind] - {"artifact"}:
        if event.get(name) in (None, "", {}):
            raise InvalidArgument(f"event.{name} is required for {kind}", field=f"event.{name}")
    task_id = check_id(event.get("task"), "event.task")
    body: dict[str, Any] = {
        "command_id": event.get("event_id"),
        "expected_revision": event.get("expected_revision"),
        "fence": event.get("fence"),
    }
    extra: dict[str, Any] = {}
    if kind in ("request_input", "complete_task"):
        body["message"] = event["message"]
    if kind == "complete_task":
        body["submission_id"] = event["submission"]
        if event.get("artifact"):
            extra["artifact"] = check_id(event["artifact"], "event.artifact")
            body["artifact_id"] = extra["artifact"]
    if kind == "freeze_artifact":
        freeze = event["freeze"]
        if not isinstance(freeze, dict):
            raise InvalidArgument("event.freeze must be an object", field="event.freeze")
        body.update(
            artifact_id=freeze.get("artifact"),
            expected_base_revision=freeze.get("expected_base_revision"),
            payload=freeze.get("payload"),
        )
    return kind, task_id, body, extra


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _bounded_text(value: Any, field_name: str, limit: int) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidArgument(f"{field_name} must be a string", field=field_name)
    if len(value.encode("utf-8")) > limit:
        raise InvalidArgument(f"{field_name} is longer than {limit} bytes", field=field_name, limit=limit)
    return value


def _replay(snapshot: Snapshot, kind: str, digest: str) -> Outcome | None:
    receipt = snapshot.receipt
    if receipt is None:
        return None
    if receipt.kind != kind or receipt.digest != digest:
        raise IdempotencyConflict(
            "this command id was already used for a different command", command_id=receipt.id, kind=receipt.kind
        )
    return Outcome(receipt.status, receipt.result, replayed=True)


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
    from datetime import datetime

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
