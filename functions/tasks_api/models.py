"""What the task routes answer (docs/services/tasks.md), and how the task service's typed answers
become it: the HTTP edge's one serializer. Each model is read from the attributes of the value the
service answers (ApiModel: from_attributes), whose names are the wire's; a record's empty optional
field ("") is left out like any absent one (`Absent`). A message's parts and an artifact's payload
are rendered here (`message_out`, `payload_out`): text when Dovecote renders their bytes as text,
else base64, else their presigned URL. The request bodies, with their rules, are
dovecote/tasks/bodies.py: the command gate reads them."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from dovecote.platform.http import ApiModel
from dovecote.platform.media import text_of
from dovecote.tasks.limits import ARTIFACT_STATES, TOTAL_SIZE_CAP

if TYPE_CHECKING:
    from dovecote.tasks.artifacts import ArtifactRead
    from dovecote.tasks.model import Part
    from dovecote.tasks.reads import MessageRead


def _absent_if_empty(value: Any) -> Any:
    return value if value != "" else None


# An optional text field of a record, which holds "" when it has no value: absent on the wire.
Absent = Annotated[str | None, BeforeValidator(_absent_if_empty)]


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
    message: Absent = None
    submission: Absent = None
    artifact: Absent = None
    reason: Absent = Field(default=None, description="task_failed: the worker's reason, when it gave one")
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
    published_at: Absent = None
    discarded_at: Absent = None


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


class ReceiptOut(ApiModel):
    id: str
    artifact: str
    artifact_digest: str
    base_revision: str
    result_revision: str
    decision: str
    observed_revision: Absent = None
    code: Absent = None
    message: Absent = None
    recorded_at: str


class ReceiptEnvelope(ApiModel):
    receipt: ReceiptOut


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


# ---- what the service's records render as ---------------------------------------------------------------


def message_out(read: MessageRead) -> TaskMessageOut:
    """A message with its parts rendered: a URL part by its URL; a part kept in S3 by its digest,
    size and presigned URL; bytes Dovecote renders as text (a textual type, UTF-8) as `text`; any
    other bytes as `data_b64`. `metadata` absent when the message has none."""
    message = read.message
    parts = [part_out(part, url) for part, url in zip(message.parts, read.download_urls, strict=True)]
    return TaskMessageOut(
        id=message.id,
        sequence=message.sequence,
        author=message.author,
        parts=parts,
        created_at=message.created_at,
        metadata=message.metadata or None,
    )


def part_out(part: Part, download_url: str = "") -> PartOut:
    named = part.filename or None
    if part.url:
        return PartOut(media_type=part.media_type, url=part.url, filename=named)
    if part.remote:
        return PartOut(
            media_type=part.media_type, sha256=part.sha256, size=part.size, filename=named, download_url=download_url
        )
    text = text_of(part.media_type, part.data)
    if text is not None:
        return PartOut(media_type=part.media_type, text=text, filename=named)
    return PartOut(media_type=part.media_type, data_b64=base64.b64encode(part.data).decode(), filename=named)


def payload_out(read: ArtifactRead) -> ArtifactEnvelope:
    """An artifact and its payload: `text` (a textual type, UTF-8) or `data_b64` when answered
    inline, else its `download_url`."""
    media_type = read.artifact.media_type
    if read.data is None:
        payload = PayloadOut(media_type=media_type, download_url=read.download_url)
    elif (text := text_of(media_type, read.data)) is not None:
        payload = PayloadOut(media_type=media_type, text=text)
    else:
        payload = PayloadOut(media_type=media_type, data_b64=base64.b64encode(read.data).decode())
    return ArtifactEnvelope.model_validate({"artifact": read.artifact, "payload": payload})
