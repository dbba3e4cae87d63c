"""HTTP shapes of the task routes (API.md § Tasks). Types only: dovecote.tasks holds the rules."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from dovecote.platform.http import ApiModel
from dovecote.tasks.model import MAX_LEASE_TIMEOUT, TOTAL_SIZE_CAP
from dovecote.tasks.service import MAX_CLAIM_WAIT


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PartIn(_In):
    media_type: StrictStr
    text: StrictStr | None = None
    data_b64: StrictStr | None = None


class MessageIn(_In):
    id: StrictStr
    parts: list[PartIn]


class CreateTaskIn(_In):
    command_id: StrictStr
    workspace: StrictStr
    id: StrictStr
    context: StrictStr
    message: MessageIn
    expected_revision: StrictInt = 0
    lease_timeout_seconds: StrictInt | None = Field(
        default=None,
        json_schema_extra={"minimum": 0, "maximum": MAX_LEASE_TIMEOUT},
        description="how long a lease may stay silent before the dispatcher fences it; 0 = never",
    )


class CallerCommandIn(_In):
    command_id: StrictStr
    expected_revision: StrictInt


class ReplyIn(CallerCommandIn):
    message: MessageIn


class WorkerCommandIn(_In):
    command_id: StrictStr
    expected_revision: StrictInt
    fence: StrictInt


class RequestInputIn(WorkerCommandIn):
    message: MessageIn


class CompleteIn(WorkerCommandIn):
    submission_id: StrictStr
    message: MessageIn
    artifact_id: StrictStr | None = None


class CommandIn(_In):
    command_id: StrictStr


class ClaimIn(_In):
    command_id: StrictStr
    wait_seconds: StrictInt = Field(
        default=0,
        json_schema_extra={"minimum": 0, "maximum": MAX_CLAIM_WAIT},
        description="long-poll: wait up to this long for a claimable task (billed as Lambda duration)",
    )


class HeartbeatIn(_In):
    fence: StrictInt


class FenceIn(_In):
    command_id: StrictStr
    fence: StrictInt


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
    media_type: str
    text: str | None = None
    data_b64: str | None = None


class MessageOut(ApiModel):
    id: str
    sequence: int
    author: str
    parts: list[PartOut]
    created_at: str


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
