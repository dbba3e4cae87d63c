"""Push API function: the webhooks of a task (/v1/tasks/{id}/webhooks), the dead letters' redrive
(admin) and the public signing keys (/.well-known/jwks.json). Parse → PushService → a model. No
rules here: the roles, the gates and the codes are the service's (dovecote.push.service)."""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path

from dovecote.platform.http import JSON, current_principal, lambda_entry, new_resolver, responses
from dovecote.platform.schema import ID
from dovecote.push.service import PushService
from functions.push_api.models import (
    JwksOut,
    WebhookEnvelope,
    WebhookIn,
    WebhookList,
    WebhookRedriveIn,
    WebhookRedriveOut,
)

app = new_resolver()
TaskId = Annotated[str, Path(json_schema_extra=ID)]
WebhookId = Annotated[str, Path(json_schema_extra=ID)]
COMMAND_ERRORS = (400, 401, 403, 404, 429, 503)
READ_ERRORS = (400, 401, 403, 404, 429, 503)
JWKS_CACHE_S = 60.0  # how long an instance serves the keys it read (the sender publishes before it signs)


@lru_cache(maxsize=1)
def service() -> PushService:
    """Composition root: wires the AWS adapters on the first request of the container."""
    from dovecote.push.wiring import push_service

    return push_service()


def _body(model: Any) -> dict[str, Any]:
    return dict(model.model_dump(exclude_none=True))


@app.post(
    "/v1/tasks/<task_id>/webhooks",
    tags=["webhooks"],
    responses={
        201: {"description": "created", "content": {JSON: {"model": WebhookEnvelope}}},
        **responses(
            200,
            WebhookEnvelope,
            *COMMAND_ERRORS,
            why={
                400: "invalid_argument: also a url the address check refuses (details.refused): https only, a host "
                "that resolves, no loopback, private, link-local, unique-local, CGNAT, multicast or metadata address"
            },
        ),
    },
)
def create_webhook(task_id: TaskId, body: Annotated[WebhookIn, Body()]) -> Response[WebhookEnvelope]:
    """Notify a URL of every event of the task from now on: signed, retried for hours, in order. The
    same id again replaces its settings (200)."""
    from dovecote.push.model import gate_config

    push = service()
    given = gate_config(_body(body))
    existed = bool(given.id) and any(c.id == given.id for c in push.list(current_principal(app), task_id))
    config = push.create(current_principal(app), task_id, given)
    envelope = WebhookEnvelope.model_validate({"webhook": config.public_json()})
    return Response(status_code=200 if existed else 201, content_type=JSON, body=envelope)


@app.get("/v1/tasks/<task_id>/webhooks", tags=["webhooks"], responses=responses(200, WebhookList, *READ_ERRORS))
def list_webhooks(task_id: TaskId) -> WebhookList:
    """The task's webhooks (at most 10), without their token or credentials."""
    found = service().list(current_principal(app), task_id)
    return WebhookList.model_validate({"items": [c.public_json() for c in found]})


@app.get(
    "/v1/tasks/<task_id>/webhooks/<webhook_id>",
    tags=["webhooks"],
    responses=responses(200, WebhookEnvelope, *READ_ERRORS),
)
def get_webhook(task_id: TaskId, webhook_id: WebhookId) -> WebhookEnvelope:
    """One webhook: where it points, how far it delivered, its last failure."""
    config = service().get(current_principal(app), task_id, webhook_id)
    return WebhookEnvelope.model_validate({"webhook": config.public_json()})


@app.delete(
    "/v1/tasks/<task_id>/webhooks/<webhook_id>",
    tags=["webhooks"],
    responses=responses(204, None, *READ_ERRORS),
)
def delete_webhook(task_id: TaskId, webhook_id: WebhookId) -> Response[None]:
    """No more notifications to it. Deleting one that is not there is not an error."""
    service().delete(current_principal(app), task_id, webhook_id)
    return Response(status_code=204)


@app.post("/v1/admin/webhooks/redrive", tags=["webhooks"], responses=responses(200, WebhookRedriveOut, *COMMAND_ERRORS))
def redrive_webhooks(body: Annotated[WebhookRedriveIn, Body()]) -> WebhookRedriveOut:
    """Admin: send this authority's dead-lettered notifications again (the same webhook-id)."""
    return WebhookRedriveOut.model_validate(service().redrive(current_principal(app), body.limit))


_jwks: list[Any] = [0.0, None]


@app.get("/.well-known/jwks.json", tags=["webhooks"], responses=responses(200, JwksOut, 429, 503))
def jwks() -> Response[JwksOut]:
    """The public keys that sign webhooks (no token needed): verify `webhook-signature` v1a with them."""
    now = time.monotonic()
    if _jwks[1] is None or now - _jwks[0] >= JWKS_CACHE_S:
        from dovecote.push.wiring import config_store

        _jwks[:] = [now, config_store(sealed=False).published_keys() or {"keys": []}]
    return Response(
        status_code=200,
        content_type=JSON,
        body=JwksOut.model_validate(_jwks[1]),
        headers={"Cache-Control": "public, max-age=300"},
    )


handler = lambda_entry(app, service)
