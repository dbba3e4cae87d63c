"""Tasks API function: the body validated by its model (dovecote.tasks.bodies: each field's type and
rule) → the command's one gate (dovecote.tasks.commands: the role and the check order of
docs/design/tasks.md#the-check-order, so a caller token on a worker route is 403) → TaskService →
return a model. No rules here."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from pydantic import BaseModel

from dovecote.platform.http import JSON, current_principal, lambda_entry, new_resolver, responses
from dovecote.platform.principal import Principal
from dovecote.platform.schema import ID, QueryInt, bounded, instant_pattern, one_of
from dovecote.tasks.bodies import (
    ArtifactUploadIn,
    CallerCommandIn,
    ClaimIn,
    CommandIn,
    CompleteIn,
    CreateTaskIn,
    FailIn,
    FenceIn,
    FreezeIn,
    HeartbeatIn,
    ReceiptIn,
    ReplyIn,
    RequestInputIn,
    WorkerCommandIn,
    WorkerDeliveryIn,
)
from dovecote.tasks.limits import MAX_PAGE
from dovecote.tasks.machine import STATES
from dovecote.tasks.model import TaskView
from dovecote.tasks.ports import TaskFilter
from dovecote.tasks.service import Outcome, TaskService
from functions.tasks_api.models import (
    ArtifactEnvelope,
    ArtifactUploadOut,
    AssignmentEnvelope,
    ContextTasksOut,
    EventPage,
    FreezeOut,
    GrantPage,
    HeadOut,
    LeaseListOut,
    MessageEnvelope,
    MessagePage,
    ReceiptEnvelope,
    SettlementOut,
    SnapshotOut,
    TaskEnvelope,
    TaskListOut,
    TaskReadOut,
    message_out,
    payload_out,
)

if TYPE_CHECKING:
    from dovecote.tasks.leases import Assignment

app = new_resolver()
TaskId = Annotated[str, Path(json_schema_extra=ID)]
WorkspaceId = Annotated[str, Path(json_schema_extra=ID)]
ArtifactId = Annotated[str, Path(json_schema_extra=ID)]
LIMIT = {**bounded(0, MAX_PAGE), "description": "0 or absent: the default (100)"}
# RFC 3339 with a zone, years 1000-9999 (an instant before year 1 in UTC is refused, not widened).
INSTANT = instant_pattern(6)
# A stream's `after` is bounded by the task's own count, which JSON Schema cannot state: said in words.
AFTER = "a sequence number, at most the task's {count}: a larger one is 400 invalid_argument"
PAST_THE_END = "invalid_argument: `after` is past the end of the stream (the task's {count}), or a bad `limit`"
COMMAND_ERRORS = (400, 401, 403, 404, 409, 413, 429, 503)
READ_ERRORS = (400, 401, 403, 404, 429, 503)
Limit = Annotated[QueryInt | None, Query(json_schema_extra=LIMIT)]
Cursor = Annotated[str | None, Query()]
MessagesAfter = Annotated[
    QueryInt | None, Query(json_schema_extra=bounded(0), description=AFTER.format(count="message_count"))
]
EventsAfter = Annotated[
    QueryInt | None, Query(json_schema_extra=bounded(0), description=AFTER.format(count="event_count"))
]
GrantsAfter = Annotated[QueryInt | None, Query(json_schema_extra=bounded(0), description=AFTER.format(count="fence"))]


def _stream_responses(page: type[BaseModel], count: str) -> dict[int, Any]:
    """A stream's answers: a 400 also says `after` may be past the end of the task's `count`."""
    return responses(200, page, *READ_ERRORS, why={400: PAST_THE_END.format(count=count)})


@lru_cache(maxsize=1)
def service() -> TaskService:
    """Composition root: wires the AWS adapters on the first request of the container."""
    from dovecote.tasks.wiring import task_service

    return task_service()


def _task(outcome: Outcome[TaskView]) -> TaskEnvelope:
    return TaskEnvelope.model_validate({"task": outcome.answer})


def _assignment(found: Assignment) -> AssignmentEnvelope:
    return AssignmentEnvelope.model_validate({"assignment": found})


def _caller() -> tuple[TaskService, Principal]:
    return service(), current_principal(app)


# ---- caller ----------------------------------------------------------------------------------------


@app.post(
    "/v1/tasks",
    tags=["tasks"],
    responses={
        201: {"description": "created", "content": {JSON: {"model": TaskEnvelope}}},
        **responses(200, TaskEnvelope, *COMMAND_ERRORS),
    },
)
def create_task(body: Annotated[CreateTaskIn, Body()]) -> Response[TaskEnvelope]:
    """Create a task (revision 1, one caller message). An exact retry answers 200 with the same task."""
    tasks, principal = _caller()
    outcome = tasks.create(principal, tasks.gate.create(principal, body))
    return Response(status_code=outcome.status, content_type=JSON, body=_task(outcome))


@app.get("/v1/tasks/<task_id>", tags=["tasks"], responses=responses(200, TaskReadOut, *READ_ERRORS))
def get_task(task_id: TaskId) -> TaskReadOut:
    """Read a task (strongly consistent), with its current lease (who holds it, its last sign of
    life, when the dispatcher will fence it) and how the last lease that ended did end. Callers and
    workers of the authority."""
    return TaskReadOut.model_validate(service().get(current_principal(app), task_id))


@app.get("/v1/tasks", tags=["tasks"], responses=responses(200, TaskListOut, *READ_ERRORS))
def list_tasks(
    context: Annotated[
        str, Query(json_schema_extra={"anyOf": [{"maxLength": 0}, ID]}, description="empty or absent: any context")
    ] = "",
    state: Annotated[str, Query(json_schema_extra=one_of("", *STATES), description="empty or absent: any state")] = "",
    updated_since: Annotated[
        str,
        Query(
            # Empty (the default) is no filter, so the document allows it beside the instant grammar.
            json_schema_extra={"anyOf": [{"maxLength": 0}, {"format": "date-time", "pattern": INSTANT}]},
            description="RFC 3339 with a zone; empty or absent: no filter",
        ),
    ] = "",
    limit: Limit = None,
    cursor: Cursor = None,
) -> TaskListOut:
    """The authority's tasks, newest update first, with `total_size` of the filtered set."""
    page = service().list_tasks(current_principal(app), TaskFilter(context, state, updated_since), limit, cursor)
    return TaskListOut.model_validate(page)


@app.get("/v1/contexts/<context>/tasks", tags=["tasks"], responses=responses(200, ContextTasksOut, *READ_ERRORS))
def list_context_tasks(
    context: Annotated[str, Path(json_schema_extra=ID)],
    limit: Limit = None,
    cursor: Cursor = None,
) -> ContextTasksOut:
    """One context's tasks, oldest first by (created_at, workspace, id)."""
    return ContextTasksOut.model_validate(service().list_context(current_principal(app), context, limit, cursor))


@app.post("/v1/tasks/<task_id>/reply", tags=["tasks"], responses=responses(200, TaskEnvelope, *COMMAND_ERRORS))
def reply_task(task_id: TaskId, body: Annotated[ReplyIn, Body()]) -> TaskEnvelope:
    """Answer input_required with the caller's message: back to working."""
    tasks, principal = _caller()
    return _task(tasks.reply(principal, tasks.gate.reply(principal, task_id, body)))


@app.post("/v1/tasks/<task_id>/cancel", tags=["tasks"], responses=responses(200, TaskEnvelope, *COMMAND_ERRORS))
def cancel_task(task_id: TaskId, body: Annotated[CallerCommandIn, Body()]) -> TaskEnvelope:
    """Cancel a task that is not terminal; a frozen artifact is discarded."""
    tasks, principal = _caller()
    return _task(tasks.cancel(principal, tasks.gate.cancel(principal, task_id, body)))


@app.get("/v1/tasks/<task_id>/messages", tags=["tasks"], responses=_stream_responses(MessagePage, "message_count"))
def list_messages(task_id: TaskId, after: MessagesAfter = None, limit: Limit = None) -> MessagePage:
    """The task's messages after sequence `after`, oldest first; `next` continues the stream. A page
    also stops before its inline parts pass 4 MiB; parts over 8 KiB come as a `download_url`."""
    page = service().messages(current_principal(app), task_id, after, limit)
    return MessagePage(items=[message_out(m) for m in page.items], next=page.next, has_more=page.has_more)


@app.get(
    "/v1/tasks/<task_id>/messages/<message_id>", tags=["tasks"], responses=responses(200, MessageEnvelope, *READ_ERRORS)
)
def get_message(task_id: TaskId, message_id: Annotated[str, Path(json_schema_extra=ID)]) -> MessageEnvelope:
    """One message of the task by its id (message ids are unique in the authority)."""
    return MessageEnvelope(message=message_out(service().message(current_principal(app), task_id, message_id)))


@app.get("/v1/tasks/<task_id>/events", tags=["tasks"], responses=_stream_responses(EventPage, "event_count"))
def list_events(task_id: TaskId, after: EventsAfter = None, limit: Limit = None) -> EventPage:
    """The task's events after sequence `after`, oldest first; `next` continues the stream."""
    return EventPage.model_validate(service().events(current_principal(app), task_id, after, limit))


@app.get("/v1/tasks/<task_id>/grants", tags=["tasks"], responses=_stream_responses(GrantPage, "fence"))
def list_grants(task_id: TaskId, after: GrantsAfter = None, limit: Limit = None) -> GrantPage:
    """The task's grant history after fence `after`, oldest first: each lease generation with its
    worker, grant, acceptance, last sign of life, and when, why and by whom it ended."""
    return GrantPage.model_validate(service().grants(current_principal(app), task_id, after, limit))


@app.get("/v1/tasks/<task_id>/snapshot", tags=["tasks"], responses=responses(200, SnapshotOut, *READ_ERRORS))
def snapshot_task(task_id: TaskId) -> SnapshotOut:
    """The task and `event_cursor` (its event count) from one read: read events after it, gap-free."""
    return SnapshotOut.model_validate(service().snapshot(current_principal(app), task_id))


# ---- worker ----------------------------------------------------------------------------------------


@app.post("/v1/leases/claim", tags=["workers"], responses=responses(200, AssignmentEnvelope, *COMMAND_ERRORS))
def claim_lease(body: Annotated[ClaimIn, Body()]) -> AssignmentEnvelope:
    """Lease a claimable task of the authority, close to the oldest (strictly the oldest when the
    deployment has one claimable shard); 404 when there is none (after waiting up to `wait_seconds`
    for one)."""
    tasks, principal = _caller()
    return _assignment(tasks.claim(principal, tasks.gate.claim(principal, body)).answer)


@app.post("/v1/tasks/<task_id>/lease", tags=["workers"], responses=responses(200, AssignmentEnvelope, *COMMAND_ERRORS))
def acquire_lease(task_id: TaskId, body: Annotated[CommandIn, Body()]) -> AssignmentEnvelope:
    """Lease this task (fence = previous fence + 1). Worker tokens; the worker id comes from the token."""
    tasks, principal = _caller()
    return _assignment(tasks.acquire(principal, tasks.gate.acquire(principal, task_id, body)).answer)


@app.get("/v1/tasks/<task_id>/lease", tags=["workers"], responses=responses(200, AssignmentEnvelope, *READ_ERRORS))
def get_lease(task_id: TaskId) -> AssignmentEnvelope:
    """The task's current lease (worker, fence, granted_at, heartbeat_at); 404 when unleased."""
    return _assignment(service().get_lease(current_principal(app), task_id))


@app.post("/v1/tasks/<task_id>/lease/fence", tags=["workers"], responses=responses(204, None, *COMMAND_ERRORS))
def fence_lease(task_id: TaskId, body: Annotated[FenceIn, Body()]) -> Response[None]:
    """Retire the current lease generation: the owner is cleared, the fence kept. Admin or owner."""
    tasks, principal = _caller()
    tasks.fence(principal, tasks.gate.fence(principal, task_id, body))
    return Response(status_code=204)


@app.post(
    "/v1/tasks/<task_id>/lease/heartbeat",
    tags=["workers"],
    responses=responses(200, AssignmentEnvelope, *COMMAND_ERRORS),
)
def heartbeat_lease(task_id: TaskId, body: Annotated[HeartbeatIn, Body()]) -> AssignmentEnvelope:
    """A sign of life of the lease (never a revision change); a fence that is not current is
    409 stale_lease. Every worker command counts as one too."""
    tasks, principal = _caller()
    return _assignment(tasks.heartbeat(principal, tasks.gate.heartbeat(principal, task_id, body)))


@app.get("/v1/leases", tags=["workers"], responses=responses(200, LeaseListOut, *READ_ERRORS))
def list_leases(
    limit: Limit = None,
    cursor: Cursor = None,
) -> LeaseListOut:
    """This worker's current leases: the restart-recovery scan."""
    return LeaseListOut.model_validate(service().list_leases(current_principal(app), limit, cursor))


@app.post("/v1/tasks/<task_id>/accept", tags=["workers"], responses=responses(200, TaskEnvelope, *COMMAND_ERRORS))
def accept_task(task_id: TaskId, body: Annotated[WorkerCommandIn, Body()]) -> TaskEnvelope:
    """submitted → working."""
    tasks, principal = _caller()
    return _task(tasks.accept(principal, tasks.gate.accept(principal, task_id, body)))


@app.post("/v1/tasks/<task_id>/reject", tags=["workers"], responses=responses(200, TaskEnvelope, *COMMAND_ERRORS))
def reject_task(task_id: TaskId, body: Annotated[WorkerCommandIn, Body()]) -> TaskEnvelope:
    """submitted → rejected."""
    tasks, principal = _caller()
    return _task(tasks.reject(principal, tasks.gate.reject(principal, task_id, body)))


@app.post("/v1/tasks/<task_id>/fail", tags=["workers"], responses=responses(200, TaskEnvelope, *COMMAND_ERRORS))
def fail_task(task_id: TaskId, body: Annotated[FailIn, Body()]) -> TaskEnvelope:
    """working or input_required → failed, with an optional `reason` kept on the task_failed event."""
    tasks, principal = _caller()
    return _task(tasks.fail(principal, tasks.gate.fail(principal, task_id, body)))


@app.post(
    "/v1/tasks/<task_id>/request-input", tags=["workers"], responses=responses(200, TaskEnvelope, *COMMAND_ERRORS)
)
def request_input_task(task_id: TaskId, body: Annotated[RequestInputIn, Body()]) -> TaskEnvelope:
    """working → input_required, with the agent's message."""
    tasks, principal = _caller()
    return _task(tasks.request_input(principal, tasks.gate.request_input(principal, task_id, body)))


@app.post("/v1/tasks/<task_id>/complete", tags=["workers"], responses=responses(200, TaskEnvelope, *COMMAND_ERRORS))
def complete_task(task_id: TaskId, body: Annotated[CompleteIn, Body()]) -> TaskEnvelope:
    """working → completed, with the agent's final message and a submission."""
    tasks, principal = _caller()
    return _task(tasks.complete(principal, tasks.gate.complete(principal, task_id, body)))


@app.post("/v1/tasks/<task_id>/artifacts", tags=["workers"], responses=responses(200, FreezeOut, *COMMAND_ERRORS))
def freeze_artifact(task_id: TaskId, body: Annotated[FreezeIn, Body()]) -> FreezeOut:
    """Freeze the task's one artifact (working only): its payload, digests and result revision. The
    first freeze in a workspace creates the head at expected_base_revision; later ones must match
    it (409 workspace_conflict)."""
    tasks, principal = _caller()
    return FreezeOut.model_validate(tasks.freeze(principal, tasks.gate.freeze(principal, task_id, body)).answer)


@app.post(
    "/v1/tasks/<task_id>/artifacts/uploads",
    tags=["workers"],
    responses=responses(200, ArtifactUploadOut, *COMMAND_ERRORS),
)
def create_artifact_upload(task_id: TaskId, body: Annotated[ArtifactUploadIn, Body()]) -> ArtifactUploadOut:
    """A presigned PUT for a large artifact payload, bound to its size and SHA-256, for the holder of
    the task's current lease (`fence`; else 409 stale_lease, 404 for no such task). Send
    upload_headers with it, then freeze with payload.upload_sha256."""
    tasks, principal = _caller()
    return ArtifactUploadOut.model_validate(
        tasks.create_artifact_upload(principal, tasks.gate.create_artifact_upload(principal, task_id, body))
    )


@app.post("/v1/worker/events", tags=["workers"], responses=responses(200, SettlementOut, 400, 401, 403, 429, 503))
def worker_event(body: Annotated[WorkerDeliveryIn, Body()]) -> SettlementOut:
    """Settle one worker event delivery: ack (committed, or an exact replay) or nack with a stable
    code. A 503 settled nothing: retry the exact delivery."""
    tasks, principal = _caller()
    return SettlementOut.model_validate(tasks.worker_event(principal, tasks.gate.worker_event(principal, body)))


# ---- workspaces (caller) ---------------------------------------------------------------------------


# An artifact, by its id within its workspace; its apply receipt below it.
ARTIFACT = "/v1/workspaces/<workspace>/artifacts/<artifact_id>"


@app.get(ARTIFACT, tags=["workspaces"], responses=responses(200, ArtifactEnvelope, *READ_ERRORS))
def get_artifact(workspace: WorkspaceId, artifact_id: ArtifactId) -> ArtifactEnvelope:
    """An artifact and its payload: text or data_b64 up to 4 MiB, else a presigned download_url."""
    return payload_out(service().get_artifact(current_principal(app), workspace, artifact_id))


@app.get("/v1/workspaces/<workspace>/head", tags=["workspaces"], responses=responses(200, HeadOut, *READ_ERRORS))
def get_head(workspace: WorkspaceId) -> HeadOut:
    """The workspace's confirmed revision (404 until its first freeze)."""
    return HeadOut.model_validate(service().get_head(current_principal(app), workspace))


@app.post(f"{ARTIFACT}/receipt", tags=["workspaces"], responses=responses(200, ReceiptEnvelope, *COMMAND_ERRORS))
def record_receipt(
    workspace: WorkspaceId, artifact_id: ArtifactId, body: Annotated[ReceiptIn, Body()]
) -> ReceiptEnvelope:
    """Record the one apply receipt of a published artifact. success moves the head from the
    artifact's base to its result (compare-and-swap); an identical repeat answers the stored one."""
    tasks, principal = _caller()
    outcome = tasks.record_apply_receipt(
        principal, tasks.gate.record_apply_receipt(principal, workspace, artifact_id, body)
    )
    return ReceiptEnvelope.model_validate({"receipt": outcome.answer})


@app.get(f"{ARTIFACT}/receipt", tags=["workspaces"], responses=responses(200, ReceiptEnvelope, *READ_ERRORS))
def get_receipt(workspace: WorkspaceId, artifact_id: ArtifactId) -> ReceiptEnvelope:
    """The artifact's apply receipt, or 404."""
    return ReceiptEnvelope.model_validate(
        {"receipt": service().get_apply_receipt(current_principal(app), workspace, artifact_id)}
    )


handler = lambda_entry(app, service)
