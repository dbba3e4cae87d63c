"""Memory API function: parse → call MemoryService → return a model. No rules here: the roles, the
gates and the codes are the service's (dovecote.memory.service). The service answers typed values;
each route's response model reads its answer (functions/memory_api/models.py)."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from dovecote.memory.model import MAX_PAGE, MAX_WAIT_SECONDS, RELATION_STATUSES
from dovecote.memory.service import MemoryService
from dovecote.platform.http import JSON, current_principal, lambda_entry, new_resolver, responses
from dovecote.platform.schema import ID, QueryInt, RedriveIn, bounded, one_of
from functions.memory_api.models import (
    RELATION,
    SCOPE,
    CancelOut,
    JudgmentIn,
    MemoryPage,
    RedriveOut,
    RelationEnvelope,
    RelationPage,
    SubmitIn,
    SubmitOut,
    WriteStatusOut,
)

app = new_resolver()
COMMAND_ERRORS = (400, 401, 403, 404, 409, 413, 429, 503)
READ_ERRORS = (400, 401, 403, 404, 429, 503)
WAIT = bounded(0, MAX_WAIT_SECONDS)


@lru_cache(maxsize=1)
def service() -> MemoryService:
    """Composition root: wires the AWS adapters on the first request of the container."""
    from dovecote.memory.dynamo import DynamoMemoryStore
    from dovecote.memory.queue import SqsMemoryQueue
    from dovecote.platform import aws
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.settings import get_settings

    settings = get_settings()
    store = DynamoMemoryStore(table=settings.memory_table, dynamodb=aws.client("dynamodb"))
    queue = SqsMemoryQueue(
        queue_url=settings.memory_queue_url, dlq_url=settings.memory_dlq_url, sqs=aws.lazy_client("sqs")
    )
    return MemoryService(store, queue, signer_factory=lambda: CursorSigner(aws.cursor_key()))


@app.post("/v1/memory/writes", tags=["memory"], responses=responses(202, SubmitOut, *COMMAND_ERRORS))
def submit_write(body: Annotated[SubmitIn, Body()]) -> Response[SubmitOut]:
    """Queue a memory write. An exact retry answers the same; another write under the id is 409."""
    out = service().submit(current_principal(app), body.input())
    return Response(status_code=202, content_type=JSON, body=SubmitOut.model_validate(out))


@app.get("/v1/memory/writes/<write_id>", tags=["memory"], responses=responses(200, WriteStatusOut, *READ_ERRORS))
def get_write(
    write_id: Annotated[str, Path(json_schema_extra=ID)],
    wait: Annotated[
        QueryInt | None, Query(description="seconds to wait for the evidence", json_schema_extra=WAIT)
    ] = None,
) -> WriteStatusOut:
    """The write's status, and its evidence once settled. With `wait`, long-polls until then."""
    return WriteStatusOut.model_validate(service().status(current_principal(app), write_id, wait))


@app.delete("/v1/memory/writes/<write_id>", tags=["memory"], responses=responses(200, CancelOut, *COMMAND_ERRORS))
def cancel_write(write_id: Annotated[str, Path(json_schema_extra=ID)]) -> CancelOut:
    """Cancel a queued write: true if it never starts (or a pending cancel was repeated)."""
    return CancelOut.model_validate(service().cancel(current_principal(app), write_id))


@app.get("/v1/memory", tags=["memory"], responses=responses(200, MemoryPage, *READ_ERRORS))
def list_memories(
    scope: Annotated[str, Query(json_schema_extra=SCOPE)],
    limit: Annotated[QueryInt | None, Query(json_schema_extra=bounded(0, MAX_PAGE))] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> MemoryPage:
    """A scope's memories in applied order (oldest first)."""
    return MemoryPage.model_validate(service().list_memories(current_principal(app), scope, limit, cursor))


@app.get("/v1/memory/relations", tags=["memory"], responses=responses(200, RelationPage, *READ_ERRORS))
def list_relations(
    scope: Annotated[str, Query(json_schema_extra=SCOPE)],
    status: Annotated[
        str, Query(description="all when absent or empty", json_schema_extra=one_of("", *RELATION_STATUSES))
    ] = "",
    limit: Annotated[QueryInt | None, Query(json_schema_extra=bounded(0, MAX_PAGE))] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> RelationPage:
    """A scope's relation candidates, by the new memory's place in the scope."""
    page = service().list_relations(current_principal(app), scope, status, limit, cursor)
    return RelationPage.model_validate(page)


@app.post(
    "/v1/memory/relations/<relation_id>/judgment",
    tags=["memory"],
    responses=responses(200, RelationEnvelope, *COMMAND_ERRORS),
)
def judge_relation(
    relation_id: Annotated[str, Path(json_schema_extra=RELATION)], body: Annotated[JudgmentIn, Body()]
) -> RelationEnvelope:
    """Confirm or dismiss a pending candidate, once. The exact retry answers the same."""
    judged = service().judge(current_principal(app), relation_id, body.input())
    return RelationEnvelope.model_validate({"relation": judged})


@app.post("/v1/memory/redrive", tags=["memory"], responses=responses(200, RedriveOut, *COMMAND_ERRORS))
def redrive(body: Annotated[RedriveIn, Body()]) -> RedriveOut:
    """Admin: move this authority's dead-lettered writes back to the queue."""
    return RedriveOut.model_validate(service().redrive(current_principal(app), body.limit))


handler = lambda_entry(app, service)
