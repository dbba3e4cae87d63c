"""Task commands as data: one frozen dataclass per command, who may run it, and the one gate that
builds it from a request body. The HTTP handler (functions/tasks_api) and the worker-event path go
through these gates; service methods take the dataclasses, never a body.

The body comes validated (dovecote/tasks/bodies.py): every field has its type and has been checked by
its rule, and a field that broke its rule raises its refusal when read. So a gate is what a field
validator cannot say: the check order (docs/design/tasks.md#the-check-order), which is the order the
gate reads the fields in, with the caller's role (`authorize`, once per command) at its place among
them; the rules between fields; and what needs the service's own settings (an artifact's maximum,
staging an upload). A request that is both unauthorized and malformed keeps the answer it always had.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from dovecote.platform.errors import DomainError, Forbidden, InvalidArgument
from dovecote.platform.ids import check_id
from dovecote.platform.principal import Principal
from dovecote.tasks import inputs, machine
from dovecote.tasks.model import ApplyReceipt, MessageInput, PayloadInput, intent_digest

if TYPE_CHECKING:
    from typing import Protocol

    class CallerHead(Protocol):
        """What every transition's body carries: a command body, or a worker event under its names."""

        @property
        def command_id(self) -> str: ...
        @property
        def expected_revision(self) -> int: ...

    class WorkerHead(CallerHead, Protocol):
        @property
        def fence(self) -> int: ...

    from dovecote.tasks import bodies

# The fields each worker event kind carries beside the command's own (every other one must be empty).
_EVENT_FIELDS: dict[str, set[str]] = {
    "accept_task": set(),
    "reject_task": set(),
    "fail_task": {"reason"},
    "request_input": {"message"},
    "complete_task": {"message", "submission", "artifact"},
    "freeze_artifact": {"freeze"},
}
# The fields a kind may leave empty (every other field of its _EVENT_FIELDS is required).
_EVENT_OPTIONAL = {"artifact", "reason"}
# Domain error code → the worker event NACK code (docs/design/tasks.md#worker-events: fence exhausted is
# state_conflict).
# Any other error is not a deterministic rejection (an AWS failure): it settles nothing.
NACK_CODES = {
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


# ---- the commands -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateTask:
    BY: ClassVar[str] = "caller"
    command_id: str
    id: str
    workspace: str
    context: str
    message: MessageInput
    lease_timeout: int | None = None  # None: the deployment's default
    accept_timeout: int | None = None  # None: the deployment's default


@dataclass(frozen=True, slots=True)
class TaskCommand:
    """A command that moves a task through its state machine (machine.TRANSITIONS[KIND], which also
    says who runs it)."""

    KIND: ClassVar[str] = ""
    task: str
    command_id: str
    expected_revision: int


@dataclass(frozen=True, slots=True)
class Cancel(TaskCommand):
    KIND: ClassVar[str] = "cancel_task"


@dataclass(frozen=True, slots=True)
class Reply(TaskCommand):
    KIND: ClassVar[str] = "reply_task"
    message: MessageInput


@dataclass(frozen=True, slots=True)
class WorkerCommand(TaskCommand):
    """A worker's transition: it carries the lease generation it holds."""

    fence: int


@dataclass(frozen=True, slots=True)
class Accept(WorkerCommand):
    KIND: ClassVar[str] = "accept_task"


@dataclass(frozen=True, slots=True)
class Reject(WorkerCommand):
    KIND: ClassVar[str] = "reject_task"


@dataclass(frozen=True, slots=True)
class Fail(WorkerCommand):
    KIND: ClassVar[str] = "fail_task"
    reason: str = ""  # why, in the worker's words (optional): kept on the task_failed event


@dataclass(frozen=True, slots=True)
class RequestInput(WorkerCommand):
    KIND: ClassVar[str] = "request_input"
    message: MessageInput


@dataclass(frozen=True, slots=True)
class Complete(WorkerCommand):
    KIND: ClassVar[str] = "complete_task"
    message: MessageInput
    submission: str
    artifact: str | None = None  # exactly the frozen artifact, or None when none was frozen


@dataclass(frozen=True, slots=True)
class Freeze(WorkerCommand):
    """freeze_artifact: what the artifact will be, known before the task is read (an uploaded
    payload's size comes from staging it)."""

    KIND: ClassVar[str] = "freeze_artifact"
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
class Acquire:
    BY: ClassVar[str] = "worker"
    task: str
    command_id: str


@dataclass(frozen=True, slots=True)
class Claim:
    BY: ClassVar[str] = "worker"
    command_id: str
    wait_seconds: int = 0


@dataclass(frozen=True, slots=True)
class Fence:
    """Retire a lease generation: its owner releasing it, an admin, or the dispatcher."""

    BY: ClassVar[str] = "lease"
    task: str
    command_id: str
    fence: int


@dataclass(frozen=True, slots=True)
class Heartbeat:
    BY: ClassVar[str] = "worker"
    task: str
    fence: int


@dataclass(frozen=True, slots=True)
class CreateArtifactUpload:
    BY: ClassVar[str] = "worker"
    task: str
    size: int
    sha256: str  # hex, without its prefix
    fence: int


@dataclass(frozen=True, slots=True)
class RecordReceipt:
    """The caller's apply receipt as proposed: in its authority, not yet recorded (no time)."""

    BY: ClassVar[str] = "caller"
    command_id: str
    receipt: ApplyReceipt


@dataclass(frozen=True, slots=True)
class WorkerEvent:
    """One worker event delivery: the command it carries, or the deterministic refusal its gate found
    (a NACK, as data). `digest` is the event's as delivered: an exact retry is the same delivery."""

    BY: ClassVar[str] = "worker"
    delivery_id: str
    event_id: str
    digest: str
    command: WorkerCommand | None = None
    refusal: DomainError | None = None


# ---- who runs what ---------------------------------------------------------------------------------------

W = TypeVar("W", bound=WorkerCommand)
Command = CreateTask | TaskCommand | Acquire | Claim | Fence | Heartbeat | CreateArtifactUpload | RecordReceipt


def authorize(principal: Principal, command: type[Command] | type[WorkerEvent]) -> str:
    """The one check of who may run `command`, made once per command: by its gate, at its place in
    the check order, or by a binding that builds the command itself (A2A). Callers run the caller's
    commands, workers the worker's (with a token naming its worker id); an admin runs every one, and
    fences any lease of its authority without a worker id. Answers the worker id the command acts as
    ("" for a caller's)."""
    by = machine.TRANSITIONS[command.KIND].by if issubclass(command, TaskCommand) else command.BY
    if by == "caller":
        principal.require("caller")
        return ""
    if by == "lease":
        return principal.require("worker").worker
    return worker_id(principal)


def worker_id(principal: Principal) -> str:
    """A worker token's worker id (an admin's, when it names one): what a worker command, or a read
    of a worker's own leases, acts as."""
    principal.require("worker")
    if not principal.worker:
        raise Forbidden("worker commands need a token with a worker id")
    return principal.worker


# ---- the gate -------------------------------------------------------------------------------------------


# Stages an uploaded payload (authority, sha256, max bytes) and answers its size: see
# TaskStore.stage_artifact_upload.
StageUpload = Callable[[str, str, int], int]


class CommandGate:
    """One gate per command: a validated body (and its path ids) in, a command out, or the first
    refusal in the order of docs/design/tasks.md#the-check-order. A body's field is read where it is
    checked: reading a field that broke its rule raises its refusal, so the order of the reads below
    is the check order. `artifact_max` bounds payloads and uploads; `stage_upload` gives a freeze by
    upload its size (the upload is hashed and moved into place before the command, as its size is
    part of the artifact it commits)."""

    def __init__(self, *, artifact_max: int, stage_upload: StageUpload) -> None:
        self.artifact_max = artifact_max
        self._stage_upload = stage_upload

    # ---- caller ----------------------------------------------------------------------------------

    def create(self, principal: Principal, body: bodies.CreateTaskIn) -> CreateTask:
        authorize(principal, CreateTask)
        command_id, task_id, workspace, context = body.command_id, body.id, body.workspace, body.context
        _ = body.expected_revision  # 0 for a create: checked here, in its turn
        message = body.message
        lease_timeout, accept_timeout = body.lease_timeout_seconds, body.accept_timeout_seconds
        return CreateTask(command_id, task_id, workspace, context, message, lease_timeout, accept_timeout)

    def reply(self, principal: Principal, task_id: str, body: bodies.ReplyIn) -> Reply:
        authorize(principal, Reply)
        message = body.message
        return Reply(*self._task_command(task_id, body), message=message)

    def cancel(self, principal: Principal, task_id: str, body: bodies.CallerCommandIn) -> Cancel:
        authorize(principal, Cancel)
        return Cancel(*self._task_command(task_id, body))

    # ---- worker transitions ----------------------------------------------------------------------

    def accept(self, principal: Principal, task_id: str, body: bodies.WorkerCommandIn) -> Accept:
        return self._bare(Accept, principal, task_id, body)

    def reject(self, principal: Principal, task_id: str, body: bodies.WorkerCommandIn) -> Reject:
        return self._bare(Reject, principal, task_id, body)

    def fail(self, principal: Principal, task_id: str, body: bodies.FailIn) -> Fail:
        # The reason is read last: the role and the head come first, as for accept and reject.
        authorize(principal, Fail)
        head = self._worker_command(task_id, body)
        return Fail(*head, reason=body.reason or "")

    def _bare(self, command: type[W], principal: Principal, task_id: str, head: WorkerHead) -> W:
        """A worker transition that carries nothing but its head (accept, reject, fail): the role,
        then the head's fields."""
        authorize(principal, command)
        return command(*self._worker_command(task_id, head))

    def request_input(self, principal: Principal, task_id: str, body: bodies.RequestInputIn) -> RequestInput:
        message = body.message  # the message comes before the role here, as it always has
        authorize(principal, RequestInput)
        return RequestInput(*self._worker_command(task_id, body), message=message)

    def complete(self, principal: Principal, task_id: str, body: bodies.CompleteIn) -> Complete:
        # The submission and the message come before the role here, as they always have.
        submission, message, artifact = body.submission_id, body.message, body.artifact_id
        authorize(principal, Complete)
        head = self._worker_command(task_id, body)
        return Complete(*head, message=message, submission=submission, artifact=artifact)

    def freeze(self, principal: Principal, task_id: str, body: bodies.FreezeIn) -> Freeze:
        """freeze_artifact (worker, working, at most once per task): the artifact with its payload
        (inline, or a presigned upload committed by SHA-256)."""
        authorize(principal, Freeze)
        check_id(task_id, "task")
        what = (body.artifact_id, body.expected_base_revision, *self._payload(principal, body.payload))
        return Freeze(*self._worker_command(task_id, body), *what)

    def _payload(self, principal: Principal, given: Any) -> tuple[PayloadInput, int]:
        """A freeze's payload and its size. An upload is read no further than the maximum + 1 byte,
        hashed, and moved into place: before the command's own fields are looked at, as always."""
        payload = inputs.payload(given, self.artifact_max)
        if payload.data is not None:
            return payload, len(payload.data)
        return payload, self._stage_upload(principal.authority, payload.upload_sha256, self.artifact_max)

    @staticmethod
    def _task_command(task_id: str, body: CallerHead) -> tuple[str, str, int]:
        """What every transition checks last, in this order: task, command id, revision."""
        check_id(task_id, "task")
        return task_id, body.command_id, body.expected_revision

    @classmethod
    def _worker_command(cls, task_id: str, body: WorkerHead) -> tuple[str, str, int, int]:
        return (*cls._task_command(task_id, body), body.fence)

    # ---- leases ------------------------------------------------------------------------------------

    def acquire(self, principal: Principal, task_id: str, body: bodies.CommandIn) -> Acquire:
        authorize(principal, Acquire)
        check_id(task_id, "task")
        return Acquire(task_id, body.command_id)

    def claim(self, principal: Principal, body: bodies.ClaimIn) -> Claim:
        authorize(principal, Claim)
        command_id = body.command_id
        return Claim(command_id, body.wait_seconds)

    def fence(self, principal: Principal, task_id: str, body: bodies.FenceIn) -> Fence:
        authorize(principal, Fence)  # an admin may fence any lease of its authority
        check_id(task_id, "task")
        command_id = body.command_id
        return Fence(task_id, command_id, body.fence)

    def heartbeat(self, principal: Principal, task_id: str, body: bodies.HeartbeatIn) -> Heartbeat:
        authorize(principal, Heartbeat)
        check_id(task_id, "task")
        return Heartbeat(task_id, body.fence)

    # ---- artifacts and receipts ----------------------------------------------------------------------

    def create_artifact_upload(
        self, principal: Principal, task_id: str, body: bodies.ArtifactUploadIn
    ) -> CreateArtifactUpload:
        authorize(principal, CreateArtifactUpload)
        check_id(task_id, "task")
        size = inputs.upload_size(body.size, self.artifact_max)
        sha256 = body.sha256
        return CreateArtifactUpload(task_id, size, sha256, body.fence)

    def record_apply_receipt(
        self, principal: Principal, workspace: str, artifact_id: str, body: bodies.ReceiptIn
    ) -> RecordReceipt:
        authorize(principal, RecordReceipt)
        check_id(workspace, "workspace")
        check_id(artifact_id, "artifact")
        command_id, receipt_id, digest = body.command_id, body.receipt_id, body.artifact_digest
        base, result, decision = body.base_revision, body.result_revision, body.decision
        observed = body.observed_revision or ""
        if decision == "success" and observed != result:
            raise InvalidArgument("a success must observe the result revision", field="observed_revision")
        if decision == "conflict" and not observed:
            raise InvalidArgument("a conflict must name the observed revision", field="observed_revision")
        code, message = body.code or "", body.message or ""
        proposed = ApplyReceipt(
            principal.authority,
            workspace,
            artifact_id,
            receipt_id,
            digest,
            base,
            result,
            decision,
            observed,
            code,
            message,
        )
        return RecordReceipt(command_id, proposed)

    # ---- worker events ---------------------------------------------------------------------------------

    def worker_event(self, principal: Principal, delivery: bodies.WorkerDeliveryIn) -> WorkerEvent:
        """A delivery that is itself malformed raises (400); a refused event is a WorkerEvent with
        its refusal, which the service settles as a NACK; an AWS failure while staging raises."""
        worker = authorize(principal, WorkerEvent)
        delivery_id, event = delivery.delivery_id, delivery.event
        given = event.as_delivered()
        digest = intent_digest("worker_event", {"worker": worker, "event": given})
        try:
            if principal.role != "worker":
                # An admin token carrying a worker id may drive the task routes, but a worker's
                # outbox settles only under a worker token: deterministic, so a NACK.
                raise Forbidden("worker events settle only for worker tokens", role=principal.role)
            command = self._event_command(principal, event)
        except DomainError as exc:
            if exc.code not in NACK_CODES:
                raise
            return WorkerEvent(delivery_id, str(given["event_id"]), digest, refusal=exc)
        return WorkerEvent(delivery_id, str(given["event_id"]), digest, command=command)

    def _event_command(self, principal: Principal, event: bodies.WorkerEventIn) -> WorkerCommand:
        """The event's kind, every field the kind does not use empty (so no adapter can smuggle an
        ignored interpretation through), then the kind's command, its fields in the order of the
        route that runs it."""
        kind = event.kind
        for name in ("message", "submission", "artifact", "freeze", "reason"):
            if name not in _EVENT_FIELDS[kind] and event.given(name):
                raise InvalidArgument(f"event.{name} must be empty for {kind}", field=f"event.{name}")
        for name in sorted(_EVENT_FIELDS[kind] - _EVENT_OPTIONAL):
            if not event.given(name):
                raise InvalidArgument(f"event.{name} is required for {kind}", field=f"event.{name}")
        task_id = event.task
        if kind == "freeze_artifact":
            assert event.freeze is not None
            freeze = event.freeze
            what = (freeze.artifact, freeze.expected_base_revision, *self._payload(principal, freeze.payload))
            return Freeze(*self._worker_command(task_id, event), *what)
        if kind == "complete_task":
            artifact = event.artifact or None
            message, submission = event.message, event.submission
            assert message is not None and submission is not None
            head = self._worker_command(task_id, event)
            return Complete(*head, message=message, submission=submission, artifact=artifact)
        if kind == "request_input":
            assert event.message is not None
            message = event.message
            return RequestInput(*self._worker_command(task_id, event), message=message)
        if kind == "fail_task":
            return Fail(*self._worker_command(task_id, event), reason=event.reason or "")
        command = {"accept_task": Accept, "reject_task": Reject}[kind]
        return command(*self._worker_command(task_id, event))
