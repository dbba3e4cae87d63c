"""HTTP shapes of the task routes (API.md § Tasks). Types only: dovecote.tasks holds the rules."""

from __future__ import annotations

from typing import Any

from pydantic import Field, StrictStr

from dovecote.platform.http import ApiModel
from dovecote.platform.schema import BASE64, ID, MEDIA_TYPE, SAFE_MAX, JsonInt, RequestModel, bounded, with_schema
from dovecote.tasks.model import MAX_LEASE_TIMEOUT, MAX_PARTS, TOTAL_SIZE_CAP
from dovecote.tasks.service import MAX_CLAIM_WAIT


class _In(RequestModel):
    pass


def _id(description: str = "") -> Any:
    return Field(json_schema_extra=ID, description=description or None)


REVISION = Field(json_schema_extra=bounded(1, SAFE_MAX), description="the revision this command expects (CAS)")
FENCE = Field(json_schema_extra=bounded(1, SAFE_MAX), description="the lease generation this worker holds")


class PartIn(_In):
    """Exactly one of `text` or `data_b64`, non-empty."""

    model_config = with_schema({"oneOf": [{"required": ["text"]}, {"required": ["data_b64"]}]})
    media_type: StrictStr = Field(json_schema_extra=MEDIA_TYPE)
    text: StrictStr | None = Field(default=None, json_schema_extra={"minLength": 1})
    data_b64: StrictStr | None = Field(default=None, json_schema_extra=BASE64)


class MessageIn(_In):
    id: StrictStr = _id("unique in the authority")
    parts: list[PartIn] = Field(
        json_schema_extra={"minItems": 1, "maxItems": MAX_PARTS}, description="1 to 32 parts, at most 2 MiB in total"
    )


class CreateTaskIn(_In):
    command_id: StrictStr = _id("reuse to retry safely: an exact retry replays")
    workspace: StrictStr = _id()
    id: StrictStr = _id()
    context: StrictStr = _id()
    message: MessageIn
    expected_revision: JsonInt = Field(default=0, json_schema_extra=bounded(0, 0), description="0 for create")
    lease_timeout_seconds: JsonInt | None = Field(
        default=None,
        json_schema_extra=bounded(0, MAX_LEASE_TIMEOUT),
        description="how long a lease may stay silent before the dispatcher fences it; 0 = never",
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
        json_schema_extra=bounded(0, MAX_CLAIM_WAIT),
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
    `sha256` and `size` instead."""

    media_type: str
    text: str | None = None
    data_b64: str | None = None
    download_url: str | None = None
    sha256: str | None = None
    size: int | None = None


class MessageOut(ApiModel):
    id: str
    sequence: int
    author: str
    parts: list[PartOut]
    created_at: str


class MessageEnvelope(ApiModel):
    message: MessageOut


class MessagePage(ApiModel):
    items: list[MessageOut]
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
    occurred_at: str


class EventPage(ApiModel):
    items: list[EventOut]
    next: int
    has_more: bool


class SnapshotOut(ApiModel):
    task: TaskOut
    event_cursor: int


class AssignmentOut(ApiModel):
    task: TaskOut
    fence: int
    worker: str
    granted_at: str
    heartbeat_at: str


class AssignmentEnvelope(ApiModel):
    assignment: AssignmentOut


class LeaseListOut(ApiModel):
    items: list[AssignmentOut]
    cursor: str | None = None
