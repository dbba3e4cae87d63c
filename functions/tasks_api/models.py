"""HTTP shapes of the task routes (docs/services/tasks.md). Types only: dovecote.tasks holds the rules."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictStr

from dovecote.platform.http import ApiModel
from dovecote.platform.schema import (
    BASE64,
    ID,
    MEDIA_TYPE,
    SAFE_MAX,
    JsonInt,
    RequestModel,
    bounded,
    optional_int,
    utf8_text,
    with_schema,
)
from dovecote.tasks import limits
from dovecote.tasks.model import (
    ARTIFACT_HARD_MAX,
    ARTIFACT_STATES,
    DECISIONS,
    MAX_ACCEPT_TIMEOUT,
    MAX_FAIL_REASON_BYTES,
    MAX_FILENAME_CHARS,
    MAX_LEASE_TIMEOUT,
    MAX_METADATA_BYTES,
    MAX_PARTS,
    MAX_RECEIPT_CODE_BYTES,
    MAX_RECEIPT_MESSAGE_BYTES,
    MAX_REVISION_BYTES,
    MAX_URL_CHARS,
    TOTAL_SIZE_CAP,
)


class _In(RequestModel):
    pass


def _id(description: str = "") -> Any:
    return Field(json_schema_extra=ID, description=description or None)


REVISION = Field(json_schema_extra=bounded(1, SAFE_MAX), description="the revision this command expects (CAS)")
FENCE = Field(json_schema_extra=bounded(1, SAFE_MAX), description="the lease generation this worker holds")


class PartIn(_In):
    """Exactly one of `text`, `data_b64` (non-empty), `data` (any JSON value but null, stored as its
    compact JSON text; media_type application/json unless given) or `url` (a reference: media_type
    is the type of what it points at). `media_type` is required except with `data`."""

    model_config = with_schema(
        {
            "oneOf": [{"required": [form]} for form in limits.PART_FORMS],
            "anyOf": [{"required": ["media_type"]}, {"required": ["data"]}],
        }
    )
    media_type: StrictStr | None = Field(default=None, json_schema_extra=MEDIA_TYPE)
    text: StrictStr | None = Field(default=None, json_schema_extra={"minLength": 1})
    data_b64: StrictStr | None = Field(default=None, json_schema_extra=BASE64)
    data: Any = Field(default=None, json_schema_extra={"not": {"type": "null"}}, description="any JSON value but null")
    url: StrictStr | None = Field(
        default=None,
        json_schema_extra={
            "pattern": f"^{limits.URL_CHARS}$",
            "not": {"pattern": f"^{limits.HOST_MISSING}"},
            "maxLength": MAX_URL_CHARS,
        },
        description="an absolute http(s) URL with a host, no whitespace or control characters",
    )
    filename: StrictStr | None = Field(
        default=None,
        json_schema_extra={
            "pattern": f"^{limits.FILENAME_CHARS}$",
            "not": {"enum": list(limits.NOT_FILENAMES)},
            "minLength": 1,
            "maxLength": MAX_FILENAME_CHARS,
        },
        description="a file name: no control characters, no / or \\, not . or ..",
    )


class MessageIn(_In):
    id: StrictStr = _id("unique in the authority")
    parts: list[PartIn] = Field(
        json_schema_extra={"minItems": 1, "maxItems": MAX_PARTS}, description="1 to 32 parts, at most 2 MiB in total"
    )
    metadata: dict[str, Any] | None = Field(
        default=None,
        description=f"a JSON object stored and returned as given (at most {MAX_METADATA_BYTES} bytes as JSON)",
    )


class CreateTaskIn(_In):
    command_id: StrictStr = _id("reuse to retry safely: an exact retry replays")
    workspace: StrictStr = _id()
    id: StrictStr = _id()
    context: StrictStr = _id()
    message: MessageIn
    expected_revision: JsonInt = Field(default=0, json_schema_extra=bounded(0, 0), description="0 for create")
    lease_timeout_seconds: JsonInt | None = optional_int(
        0, MAX_LEASE_TIMEOUT, "how long a lease may stay silent before the dispatcher fences it; 0 = never"
    )
    accept_timeout_seconds: JsonInt | None = optional_int(
        0, MAX_ACCEPT_TIMEOUT, "how long a grant may stay unaccepted before the dispatcher fences it; 0 = never"
    )


class CallerCommandIn(_In):
    command_id: StrictStr = _id()
    expected_revision: JsonInt = REVISION


class ReplyIn(CallerCommandIn):
    message: MessageIn


class WorkerCommandIn(_In):
    command_id: StrictStr = _id()
    expected_revision: JsonInt = REVISION
    fence: JsonInt = FENCE


class RequestInputIn(WorkerCommandIn):
    message: MessageIn


class FailIn(WorkerCommandIn):
    reason: StrictStr | None = Field(
        default=None,
        json_schema_extra=utf8_text(MAX_FAIL_REASON_BYTES),
        description="why the task failed, in the worker's words: kept on the task_failed event",
    )


class CompleteIn(WorkerCommandIn):
    submission_id: StrictStr = _id("unique in the authority")
    message: MessageIn
    artifact_id: StrictStr | None = Field(default=None, json_schema_extra=ID)


class CommandIn(_In):
    command_id: StrictStr = _id()


class ClaimIn(_In):
    command_id: StrictStr = _id()
    wait_seconds: JsonInt = Field(
        default=0,
        json_schema_extra=bounded(0, limits.MAX_CLAIM_WAIT),
        description="long-poll: wait up to this long for a claimable task (billed as Lambda duration)",
    )


class HeartbeatIn(_In):
    fence: JsonInt = FENCE


class FenceIn(_In):
    command_id: StrictStr = _id()
    fence: JsonInt = FENCE


class SubmissionOut(ApiModel):
    id: str
    final_message: str
    published_at: str


class TaskOut(ApiModel):
    id: str
    workspace: str
    context: str
    state: str
    revision: int
    message_count: int
    event_count: int
    artifact: str | None = None
    submission: SubmissionOut | None = None
    created_at: str
    updated_at: str
    lease_timeout_seconds: int = 0
    accept_timeout_seconds: int = 0


class TaskEnvelope(ApiModel):
    task: TaskOut


class TaskListOut(ApiModel):
    items: list[TaskOut]
    cursor: str | None = None
    total_size: int = Field(description=f"the filtered set's size, counting at most {TOTAL_SIZE_CAP}")
    total_is_lower_bound: bool = Field(
        default=False, description=f"true when the set holds more than {TOTAL_SIZE_CAP}: total_size is then a floor"
    )


class ContextTasksOut(ApiModel):
    items: list[TaskOut]
    cursor: str | None = None


class PartOut(ApiModel):
    """`text` or `data_b64` inline; a part stored out of line (over 8 KiB) has `download_url`,
    `sha256` and `size` instead; a URL part has `url` (no bytes). `filename` when the part has one."""

    media_type: str
    text: str | None = None
    data_b64: str | None = None
    download_url: str | None = None
    sha256: str | None = None
    size: int | None = None
    url: str | None = None
    filename: str | None = None


class TaskMessageOut(ApiModel):
    id: str
    sequence: int
    author: str
    parts: list[PartOut]
    created_at: str
    metadata: dict[str, Any] | None = None  # absent when the message has none


class MessageEnvelope(ApiModel):
    message: TaskMessageOut


class MessagePage(ApiModel):
    items: list[TaskMessageOut]
    next: int
    has_more: bool


class EventOut(ApiModel):
    sequence: int
    type: str
    state: str
    revision: int
    message: str | None = None
    submission: str | None = None
    artifact: str | None = None
    reason: str | None = Field(default=None, description="task_failed: the worker's reason, when it gave one")
    occurred_at: str


class EventPage(ApiModel):
    items: list[EventOut]
    next: int
    has_more: bool


class LeaseOut(ApiModel):
    """The current lease, as a task read shows it."""

    worker: str
    fence: int
    state: Literal["granted", "accepted"]
    granted_at: str
    accepted_at: str | None = None
    heartbeat_at: str = Field(description="the last sign of life: the grant, a heartbeat or a worker command")
    lease_timeout_seconds: int
    accept_timeout_seconds: int
    fenced_after: str | None = Field(
        default=None,
        description="when the dispatcher fences this lease if nothing changes (the accept deadline while "
        "unaccepted, else the last sign of life + the lease timeout); null when no timeout applies",
    )


class LeaseEndOut(ApiModel):
    """How a lease generation ended."""

    fence: int
    worker: str
    granted_at: str
    accepted_at: str = Field(description="empty: the grant was never accepted")
    heartbeat_at: str = Field(description="its last sign of life")
    ended_at: str
    reason: Literal["released", "fenced", "expired", "unaccepted", "task_ended"] = Field(
        description="released by its worker; fenced by an admin; expired (fenced by the dispatcher for silence "
        "past the lease timeout); unaccepted (fenced by the dispatcher past the accept timeout); task_ended "
        "(the task reached a terminal state)"
    )
    by: str = Field(description="a worker id, admin, dispatcher or caller")


class TaskReadOut(ApiModel):
    task: TaskOut
    lease: LeaseOut | None = None
    last_lease: LeaseEndOut | None = Field(default=None, description="how the last lease that ended did end")


class SnapshotOut(TaskReadOut):
    event_cursor: int


class GrantOut(ApiModel):
    """One generation of a task's lease (the grant history, by fence)."""

    sequence: int = Field(description="the fence: the history is a stream by fence")
    fence: int
    worker: str
    state: Literal["granted", "accepted", "ended"]
    granted_at: str
    accepted_at: str | None = None
    heartbeat_at: str | None = None
    lease_timeout_seconds: int | None = None
    accept_timeout_seconds: int | None = None
    fenced_after: str | None = None
    ended_at: str | None = Field(default=None, description="null while current (or when unrecorded)")
    reason: Literal["released", "fenced", "expired", "unaccepted", "task_ended"] | None = None
    by: str | None = None


class GrantPage(ApiModel):
    items: list[GrantOut]
    next: int
    has_more: bool


class AssignmentOut(ApiModel):
    task: TaskOut
    fence: int
    worker: str
    granted_at: str
    heartbeat_at: str
    accepted_at: str | None = Field(
        default=None, description="when the grant was accepted; absent until then (see accept_timeout_seconds)"
    )


class AssignmentEnvelope(ApiModel):
    assignment: AssignmentOut


class LeaseListOut(ApiModel):
    items: list[AssignmentOut]
    cursor: str | None = None


# ---- artifacts, workspaces, apply receipts, worker events --------------------------------------------

# Byte limits declared as such (platform/schema.py utf8_text); patterns are the gates' own
# (dovecote.tasks.commands), anchored.
REVISION_TEXT: dict[str, Any] = utf8_text(MAX_REVISION_BYTES, minLength=1, pattern=f"^{limits.REVISION_CHARS}$")
SHA256_TEXT: dict[str, Any] = {"pattern": f"^{limits.SHA256_HEX}$"}
DIGEST_TEXT: dict[str, Any] = {"pattern": f"^{limits.DIGEST}$"}


class PayloadIn(_In):
    """Exactly one of `text`, `data_b64` (inline, up to the request limit) or `upload_sha256` (a
    presigned upload from POST /v1/tasks/{id}/artifacts/uploads)."""

    model_config = with_schema(
        {"oneOf": [{"required": ["text"]}, {"required": ["data_b64"]}, {"required": ["upload_sha256"]}]}
    )
    media_type: StrictStr = Field(json_schema_extra=MEDIA_TYPE)
    text: StrictStr | None = None
    data_b64: StrictStr | None = Field(default=None, json_schema_extra=BASE64)
    upload_sha256: StrictStr | None = Field(default=None, json_schema_extra=SHA256_TEXT)


class FreezeIn(WorkerCommandIn):
    artifact_id: StrictStr = _id("unique in the workspace")
    expected_base_revision: StrictStr = Field(
        json_schema_extra=REVISION_TEXT,
        description="the workspace revision this artifact applies to; the first freeze in a workspace sets its head",
    )
    payload: PayloadIn


def _deployment_artifact_max(schema: dict[str, Any]) -> None:
    """The maximum this deployment enforces (DOVECOTE_ARTIFACT_MAX_BYTES, 16 MiB by default, at most
    ARTIFACT_HARD_MAX), read when the document is built: the deployment serves its own document."""
    from dovecote.platform.settings import get_settings

    schema.update(bounded(1, get_settings().artifact_max_bytes))


class ArtifactUploadIn(_In):
    size: JsonInt = Field(
        json_schema_extra=_deployment_artifact_max,
        description=f"exact byte size, at most this deployment's maximum (the hard maximum is {ARTIFACT_HARD_MAX})",
    )
    sha256: StrictStr = Field(json_schema_extra=SHA256_TEXT, description="hex SHA-256 of the payload")
    fence: JsonInt = FENCE


class ArtifactOut(ApiModel):
    id: str
    task: str
    workspace: str
    state: str = Field(json_schema_extra={"enum": list(ARTIFACT_STATES)})
    base_revision: str
    result_revision: str
    digest: str = Field(description="what an apply receipt names as artifact_digest")
    payload_digest: str
    payload_size: int
    media_type: str
    frozen_at: str
    published_at: str | None = None
    discarded_at: str | None = None


class FreezeOut(ApiModel):
    task: TaskOut
    artifact: ArtifactOut


class PayloadOut(ApiModel):
    """`text` (a UTF-8 textual type) or `data_b64` up to 4 MiB; a larger payload as `download_url`."""

    media_type: str
    text: str | None = None
    data_b64: str | None = None
    download_url: str | None = None


class ArtifactEnvelope(ApiModel):
    artifact: ArtifactOut
    payload: PayloadOut


class ArtifactUploadOut(ApiModel):
    upload_url: str
    upload_headers: dict[str, str] = Field(description="send every one of these headers with the PUT")
    expires_at: str


class HeadOut(ApiModel):
    workspace: str
    confirmed_revision: str
    updated_at: str


class ReceiptIn(_In):
    """`success` and `conflict` name the observed revision (a success observes exactly the result
    revision: a rule between two fields, which JSON Schema cannot state)."""

    model_config = with_schema(
        {
            "anyOf": [
                {"properties": {"decision": {"not": {"enum": ["success", "conflict"]}}}},
                {"required": ["observed_revision"]},
            ]
        }
    )
    command_id: StrictStr = _id()
    receipt_id: StrictStr = _id()
    artifact_digest: StrictStr = Field(json_schema_extra=DIGEST_TEXT, description="the artifact's `digest`")
    base_revision: StrictStr = Field(json_schema_extra=REVISION_TEXT)
    result_revision: StrictStr = Field(json_schema_extra=REVISION_TEXT)
    decision: StrictStr = Field(json_schema_extra={"enum": list(DECISIONS)})
    observed_revision: StrictStr | None = Field(
        default=None,
        json_schema_extra=REVISION_TEXT,
        description="required for conflict; equal to result_revision for success",
    )
    code: StrictStr | None = Field(default=None, json_schema_extra=utf8_text(MAX_RECEIPT_CODE_BYTES))
    message: StrictStr | None = Field(default=None, json_schema_extra=utf8_text(MAX_RECEIPT_MESSAGE_BYTES))


class ReceiptOut(ApiModel):
    id: str
    artifact: str
    artifact_digest: str
    base_revision: str
    result_revision: str
    decision: str
    observed_revision: str | None = None
    code: str | None = None
    message: str | None = None
    recorded_at: str


class ReceiptEnvelope(ApiModel):
    receipt: ReceiptOut


class WorkerFreezeIn(_In):
    artifact: StrictStr = _id()
    expected_base_revision: StrictStr = Field(json_schema_extra=REVISION_TEXT)
    payload: PayloadIn


class WorkerEventIn(_In):
    """One worker command. `message` only for request_input and complete_task; `submission` (and an
    optional `artifact`) only for complete_task; `freeze` only for freeze_artifact. Every field a kind
    does not use must be absent."""

    event_id: StrictStr = _id("the command id: the same event retried is the same command")
    kind: StrictStr = Field(json_schema_extra={"enum": list(limits.WORKER_EVENT_KINDS)})
    task: StrictStr = _id("the task id")
    fence: JsonInt = FENCE
    expected_revision: JsonInt = REVISION
    message: MessageIn | None = None
    submission: StrictStr | None = Field(default=None, json_schema_extra=ID)
    artifact: StrictStr | None = Field(default=None, json_schema_extra=ID)
    freeze: WorkerFreezeIn | None = None


class WorkerDeliveryIn(_In):
    delivery_id: StrictStr = _id("the outbox entry: retry it with the same id and the same event")
    event: WorkerEventIn


class SettlementOut(ApiModel):
    """A NACK is still a 200: the settlement is the answer; drop the event from the outbox either way."""

    delivery_id: str
    event_id: str
    decision: str = Field(json_schema_extra={"enum": ["ack", "nack"]})
    code: str | None = Field(
        default=None,
        json_schema_extra={
            "enum": [
                "invalid",
                "forbidden",
                "not_found",
                "stale_lease",
                "revision_conflict",
                "state_conflict",
                "command_conflict",
            ]
        },
    )
    message: str | None = None
