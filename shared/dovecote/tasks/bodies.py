"""The task commands' request bodies (docs/services/tasks.md): each field's type, and its rule as its
validator (tasks/inputs.py, attached by platform/schema.py `checked`), so these models are the one
validator of every field. What the document says about a field (`json_schema_extra`, built from
tasks/limits.py) is what its rule enforces; tests/unit/test_task_commands.py holds the two together.

A field that breaks its rule does not fail validation: it holds its refusal until the command gate
(tasks/commands.py) reads it, in the gate's check order (platform/schema.py). A worker event
(`WorkerEventIn`) is read the same way, its refusals settling as a NACK.

Two rules live in the gate, not here: an artifact payload's and an upload's size against the
deployment's maximum (the service's setting, which a field validator does not know).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StrictStr

from dovecote.platform.ids import check_id
from dovecote.platform.schema import (
    BASE64,
    ID,
    MEDIA_TYPE,
    SAFE_MAX,
    JsonInt,
    RequestModel,
    bounded,
    checked,
    checked_as,
    optional_int,
    utf8_text,
    with_schema,
)
from dovecote.tasks import inputs, limits
from dovecote.tasks.limits import (
    ARTIFACT_HARD_MAX,
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
)
from dovecote.tasks.model import MessageInput


class _In(RequestModel):
    pass


def _id(description: str = "") -> Any:
    return Field(json_schema_extra=ID, description=description or None)


REVISION = Field(json_schema_extra=bounded(1, SAFE_MAX), description="the revision this command expects (CAS)")
FENCE = Field(json_schema_extra=bounded(1, SAFE_MAX), description="the lease generation this worker holds")
# Byte limits declared as such (platform/schema.py utf8_text); patterns are the rules' own, anchored.
REVISION_TEXT: dict[str, Any] = utf8_text(MAX_REVISION_BYTES, minLength=1, pattern=f"^{limits.REVISION_CHARS}$")
SHA256_TEXT: dict[str, Any] = {"pattern": f"^{limits.SHA256_HEX}$"}
DIGEST_TEXT: dict[str, Any] = {"pattern": f"^{limits.DIGEST}$"}

# The fields most commands share, each with its rule.
CommandId = Annotated[StrictStr, checked(check_id, "command_id")]
ExpectedRevision = Annotated[JsonInt, checked(inputs.expected_revision, "expected_revision")]
Fence = Annotated[JsonInt, checked(inputs.fence, "fence")]


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


# The types of a message; its rule (tasks/inputs.py `message`: ids, counts, forms, sizes, in that
# order) makes it a MessageInput (`Message` below). (A docstring would be the document's description.)
class MessageIn(_In):
    id: StrictStr = _id("unique in the authority")
    parts: list[PartIn] = Field(
        json_schema_extra={"minItems": 1, "maxItems": MAX_PARTS}, description="1 to 32 parts, at most 2 MiB in total"
    )
    metadata: dict[str, Any] | None = Field(
        default=None,
        description=f"a JSON object stored and returned as given (at most {MAX_METADATA_BYTES} bytes as JSON)",
    )


# A message field: MessageIn's types, then the message's rule, read as what it means.
Message = Annotated[MessageInput, checked_as(MessageIn, inputs.message)]


class CreateTaskIn(_In):
    command_id: CommandId = _id("reuse to retry safely: an exact retry replays")
    workspace: Annotated[StrictStr, checked(check_id, "workspace")] = _id()
    id: Annotated[StrictStr, checked(check_id, "id")] = _id()
    context: Annotated[StrictStr, checked(check_id, "context")] = _id()
    message: Message
    expected_revision: Annotated[JsonInt, checked(inputs.created_revision, "expected_revision")] = Field(
        default=0, json_schema_extra=bounded(0, 0), description="0 for create"
    )
    lease_timeout_seconds: (
        Annotated[JsonInt, checked(inputs.at_most(MAX_LEASE_TIMEOUT), "lease_timeout_seconds")] | None
    ) = optional_int(
        0, MAX_LEASE_TIMEOUT, "how long a lease may stay silent before the dispatcher fences it; 0 = never"
    )
    accept_timeout_seconds: (
        Annotated[JsonInt, checked(inputs.at_most(MAX_ACCEPT_TIMEOUT), "accept_timeout_seconds")] | None
    ) = optional_int(
        0, MAX_ACCEPT_TIMEOUT, "how long a grant may stay unaccepted before the dispatcher fences it; 0 = never"
    )


class CallerCommandIn(_In):
    command_id: CommandId = _id()
    expected_revision: ExpectedRevision = REVISION


class ReplyIn(CallerCommandIn):
    message: Message


class WorkerCommandIn(_In):
    command_id: CommandId = _id()
    expected_revision: ExpectedRevision = REVISION
    fence: Fence = FENCE


class RequestInputIn(WorkerCommandIn):
    message: Message


# fail_task's optional reason: why, in the worker's words, kept on the task_failed event.
FailReason = Annotated[StrictStr, checked(inputs.bounded_text(MAX_FAIL_REASON_BYTES), "reason")]
FAIL_REASON = Field(
    default=None,
    json_schema_extra=utf8_text(MAX_FAIL_REASON_BYTES),
    description="why the task failed, in the worker's words: kept on the task_failed event",
)


class FailIn(WorkerCommandIn):
    reason: FailReason | None = FAIL_REASON


class CompleteIn(WorkerCommandIn):
    submission_id: Annotated[StrictStr, checked(check_id, "submission_id")] = _id("unique in the authority")
    message: Message
    artifact_id: Annotated[StrictStr, checked(check_id, "artifact_id")] | None = Field(
        default=None, json_schema_extra=ID
    )


class CommandIn(_In):
    command_id: CommandId = _id()


class ClaimIn(_In):
    command_id: CommandId = _id()
    wait_seconds: Annotated[JsonInt, checked(inputs.wait_seconds, "wait_seconds")] = Field(
        default=0,
        json_schema_extra=bounded(0, limits.MAX_CLAIM_WAIT),
        description="long-poll: wait up to this long for a claimable task (billed as Lambda duration)",
    )


class HeartbeatIn(_In):
    fence: Fence = FENCE


class FenceIn(_In):
    command_id: CommandId = _id()
    fence: Fence = FENCE


# ---- artifacts, apply receipts, worker events -------------------------------------------------------------


class PayloadIn(_In):
    """Exactly one of `text`, `data_b64` (inline, up to the request limit) or `upload_sha256` (a
    presigned upload from POST /v1/tasks/{id}/artifacts/uploads)."""

    # Its rule needs the deployment's maximum: the gate applies it (tasks/inputs.py `payload`).

    model_config = with_schema(
        {"oneOf": [{"required": ["text"]}, {"required": ["data_b64"]}, {"required": ["upload_sha256"]}]}
    )
    media_type: StrictStr = Field(json_schema_extra=MEDIA_TYPE)
    text: StrictStr | None = None
    data_b64: StrictStr | None = Field(default=None, json_schema_extra=BASE64)
    upload_sha256: StrictStr | None = Field(default=None, json_schema_extra=SHA256_TEXT)


class FreezeIn(WorkerCommandIn):
    artifact_id: Annotated[StrictStr, checked(check_id, "artifact_id")] = _id("unique in the workspace")
    expected_base_revision: Annotated[StrictStr, checked(inputs.revision, "expected_base_revision")] = Field(
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
    sha256: Annotated[StrictStr, checked(inputs.sha256, "sha256")] = Field(
        json_schema_extra=SHA256_TEXT, description="hex SHA-256 of the payload"
    )
    fence: Fence = FENCE


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
    command_id: CommandId = _id()
    receipt_id: Annotated[StrictStr, checked(check_id, "receipt_id")] = _id()
    artifact_digest: Annotated[StrictStr, checked(inputs.digest, "artifact_digest")] = Field(
        json_schema_extra=DIGEST_TEXT, description="the artifact's `digest`"
    )
    base_revision: Annotated[StrictStr, checked(inputs.revision, "base_revision")] = Field(
        json_schema_extra=REVISION_TEXT
    )
    result_revision: Annotated[StrictStr, checked(inputs.revision, "result_revision")] = Field(
        json_schema_extra=REVISION_TEXT
    )
    decision: Annotated[StrictStr, checked(inputs.decision, "decision")] = Field(
        json_schema_extra={"enum": list(DECISIONS)}
    )
    observed_revision: Annotated[StrictStr, checked(inputs.revision, "observed_revision")] | None = Field(
        default=None,
        json_schema_extra=REVISION_TEXT,
        description="required for conflict; equal to result_revision for success",
    )
    code: Annotated[StrictStr, checked(inputs.bounded_text(MAX_RECEIPT_CODE_BYTES), "code")] | None = Field(
        default=None, json_schema_extra=utf8_text(MAX_RECEIPT_CODE_BYTES)
    )
    message: Annotated[StrictStr, checked(inputs.bounded_text(MAX_RECEIPT_MESSAGE_BYTES), "message")] | None = Field(
        default=None, json_schema_extra=utf8_text(MAX_RECEIPT_MESSAGE_BYTES)
    )


class WorkerFreezeIn(_In):
    artifact: Annotated[StrictStr, checked(check_id, "artifact_id")] = _id()
    expected_base_revision: Annotated[StrictStr, checked(inputs.revision, "expected_base_revision")] = Field(
        json_schema_extra=REVISION_TEXT
    )
    payload: PayloadIn


class WorkerEventIn(_In):
    """One worker command. `message` only for request_input and complete_task; `submission` (and an
    optional `artifact`) only for complete_task; `freeze` only for freeze_artifact; an optional
    `reason` only for fail_task. Every field a kind does not use must be absent."""

    # A field that breaks its rule is a refusal the gate settles as a NACK (tasks/commands.py); the
    # refusals name the command's fields (`command_id` for `event_id`).

    event_id: Annotated[StrictStr, checked(check_id, "command_id")] = _id(
        "the command id: the same event retried is the same command"
    )
    kind: Annotated[StrictStr, checked(inputs.event_kind, "event.kind")] = Field(
        json_schema_extra={"enum": list(limits.WORKER_EVENT_KINDS)}
    )
    task: Annotated[StrictStr, checked(check_id, "event.task")] = _id("the task id")
    fence: Fence = FENCE
    expected_revision: ExpectedRevision = REVISION
    message: Message | None = None
    submission: Annotated[StrictStr, checked(check_id, "submission")] | None = Field(default=None, json_schema_extra=ID)
    artifact: Annotated[StrictStr, checked(inputs.optional_id, "event.artifact")] | None = Field(
        default=None, json_schema_extra=ID
    )
    freeze: WorkerFreezeIn | None = None
    reason: Annotated[StrictStr, checked(inputs.bounded_text(MAX_FAIL_REASON_BYTES), "event.reason")] | None = Field(
        default=None, json_schema_extra=utf8_text(MAX_FAIL_REASON_BYTES), description="fail_task only: why"
    )

    @property
    def command_id(self) -> str:
        """The event's command id is its event id (what the gate reads as any command's)."""
        return self.event_id

    def as_delivered(self) -> dict[str, Any]:
        """The event as the worker sent it, integers as integers (JSON Schema's `3.0` is 3): what a
        delivery's digest covers, so an exact retry is the same delivery."""
        return {
            name: int(value) if name in ("fence", "expected_revision") and isinstance(value, float) else value
            for name, value in self._given.items()
        }


class WorkerDeliveryIn(_In):
    delivery_id: Annotated[StrictStr, checked(check_id, "delivery_id")] = _id(
        "the outbox entry: retry it with the same id and the same event"
    )
    event: WorkerEventIn
