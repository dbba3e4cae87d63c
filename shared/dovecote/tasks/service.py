"""Task commands. Every mutating command is: gate the input, one read (receipt, then task), the
seed's check order in pure code, one atomic commit. Pure apart from the TaskStore port.

Check order (SEMANTICS §2), first failure wins:
1. replay an existing receipt (or idempotency_conflict); 2. load the task (not_found);
3. worker commands: the lease grant must be current (stale_lease); 4. revision (revision_conflict);
5. not terminal (terminal_task); 6. transition allowed (invalid_transition); 7. counters in range.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dovecote.platform.clock import Clock, rfc3339, utc_now
from dovecote.platform.cursors import CursorSigner, LazySigner
from dovecote.platform.errors import (
    ArtifactState,
    CorruptStore,
    Forbidden,
    IdempotencyConflict,
    InvalidArgument,
    InvalidTransition,
    LeaseFenceExhausted,
    LeaseUnavailable,
    MessageConflict,
    NotFound,
    RevisionConflict,
    StaleLease,
    SubmissionConflict,
    TaskConflict,
    TerminalTask,
)
from dovecote.platform.principal import Principal
from dovecote.tasks import machine
from dovecote.tasks.model import (
    MAX_COUNTER,
    MAX_FENCE,
    MAX_LEASE_TIMEOUT,
    MESSAGE_PAGE_BYTES,
    Event,
    Grant,
    Message,
    MessageInput,
    Receipt,
    Task,
    assignment_json,
    check_id,
    gate_message,
    intent_digest,
    message_violations,
    page_limit,
    task_violations,
)
from dovecote.tasks.ports import (
    Commit,
    Expect,
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
    ) -> None:
        self._store = store
        self._signers = LazySigner(signer, signer_factory)
        self._clock = clock
        self._default_lease_timeout = default_lease_timeout
        self._sleep = sleep
        self._monotonic = monotonic
        self._presign_seconds = presign_seconds
        self._on_corrupt = on_corrupt or _report_corrupt

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
    ) -> Outcome:
        """Replay first, then decide on the loaded task, then commit once. A lost race re-reads and
        decides again, so the caller gets the precise error for the state that won."""
        digest = intent_digest(kind, command)
        for _ in range(3):
            snapshot = self._store.read(principal.authority, command_id, task_id)
            replay = _replay(snapshot, kind, digest)
            if replay is not None:
                return replay
            if snapshot.task is not None:
                self._checked(snapshot.task)  # a corrupt aggregate is neither served nor changed
            decided = decide(snapshot.task)
            if isinstance(decided, Outcome):
                return decided
            commit = Commit(
                receipt=Receipt(
                    principal.authority, command_id, kind, digest, decided.receipt.status, decided.receipt.result
                ),
                task=decided.task,
                expect=decided.expect,
                messages=decided.messages,
                events=decided.events,
                grant=decided.grant,
                submission=decided.submission,
            )
            try:
                self._store.commit(commit)
            except ReceiptTaken:
                continue  # a concurrent exact retry committed first: replay it
            except TaskChanged:
                continue  # re-read and report what the winning command left
            except TaskExists:
                raise TaskConflict("a task with this id already exists", task=task_id) from None
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
            if kind == "complete_task" and artifact is not None:
                # No artifact can be frozen yet (artifacts arrive with issue 3/5): naming one is an
                # artifact-state error, as the seed says for any artifact but the frozen one.
                raise ArtifactState("the task has no frozen artifact", artifact=artifact)
            now = self._now()
            revision = task.revision + 1
            messages: tuple[Message, ...] = ()
            message_id = ""
            if message is not None:
                author = transition.message or "caller"
                messages = (Message(task_id, message.id, task.message_count + 1, author, message.parts, now),)
                message_id = message.id
            changes: dict[str, Any] = {
                "state": to,
                "revision": revision,
                "event_count": task.event_count + 1,
                "message_count": task.message_count + len(messages),
                "updated_at": now,
            }
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
            )
            return _commit(
                after,
                Expect(task.revision, task.owner, task.fence),
                200,
                after.to_json(),
                messages=messages,
                events=(event,),
                submission=submission,
            )

        return self._run(principal, kind, command_id, task_id, command, decide)

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
        for message in self._store.messages(principal.authority, task_id, start, size):
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
