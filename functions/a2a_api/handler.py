"""A2A API function: the A2A 1.0 wire over the task service, its own Lambda so the other functions'
cold start never pays for a2a-sdk. Thin: the route API Gateway matched (infra/routes.py) picks the
binding (dovecote.a2a.bindings), which parses with a2a-sdk's types and calls A2AService; the Agent
Card is public (no token), every other route is behind the authorizer like the rest of the API.

Its decorator stack is the API functions' (logger context with the correlation id, metrics, then the
tracer when enabled); its error envelope is A2A's own (JSON-RPC errors, AIP-193), not Dovecote's.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
from functools import lru_cache
from typing import Any, Callable

from aws_lambda_powertools.logging import correlation_paths

import dovecote
from dovecote.a2a import bindings
from dovecote.a2a.card import agent_card
from dovecote.a2a.errors import A2AError, error, from_domain
from dovecote.a2a.mapping import as_json
from dovecote.a2a.service import A2AService
from dovecote.platform import gc_pause, snapstart
from dovecote.platform.errors import DomainError
from dovecote.platform.observability import logger, metrics
from dovecote.platform.principal import principal_from_event
from dovecote.platform.request_text import query_refusal

JSON = "application/json"
CARD_ROUTE = "GET /.well-known/agent-card.json"
JSONRPC_ROUTE = "POST /"
# HTTP+JSON: route key → the binding's operation.
REST_ROUTES = {
    "POST /a2a/{method}": "send",
    "GET /a2a/tasks": "list_tasks",
    "GET /a2a/tasks/{id}": "get_task",
    "POST /a2a/tasks/{id_action}": "task_action",
    "POST /a2a/tasks/{id}/pushNotificationConfigs": "push_create",
    "GET /a2a/tasks/{id}/pushNotificationConfigs": "push_list",
    "GET /a2a/tasks/{id}/pushNotificationConfigs/{config_id}": "push_get",
    "DELETE /a2a/tasks/{id}/pushNotificationConfigs/{config_id}": "push_delete",
    "GET /a2a/extendedAgentCard": "extended_card",
}
ROUTE_KEYS = frozenset({CARD_ROUTE, JSONRPC_ROUTE, *REST_ROUTES})


@lru_cache(maxsize=1)
def service() -> A2AService:
    """Composition root: the task service over the deployment's adapters, on the first request."""
    from dovecote.a2a.waits_dynamo import DynamoWaits
    from dovecote.platform import aws
    from dovecote.platform.settings import get_settings
    from dovecote.tasks.wiring import task_service

    settings = get_settings()
    waits = DynamoWaits(
        table=settings.tasks_table, dynamodb=aws.client("dynamodb"), limit=settings.a2a_waits_per_authority
    )
    from dovecote.push.wiring import push_service

    tasks = task_service()
    return A2AService(tasks, waits=waits, push=push_service(tasks))


def _prime() -> None:
    """Before a SnapStart snapshot: the composition root and every task capability built (no AWS
    request); after each restore the root is rebuilt, with new clients (platform/snapstart.py)."""
    service().tasks.prime()


snapstart.register(prime=_prime, forget=(service,))


def _answer(status: int, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": JSON, **headers},
        "body": json.dumps(body, ensure_ascii=False),
        "isBase64Encoded": False,
    }


def _text(event: dict[str, Any], headers: dict[str, str]) -> str:
    """The request body, declared JSON (bindings.check_json), as strictly UTF-8 text."""
    body = event.get("body") or ""
    post = str(event.get("routeKey") or "").startswith("POST ")
    bindings.check_json(headers.get("content-type", ""), body=bool(body), post=post)
    try:
        if not event.get("isBase64Encoded"):
            # A lone surrogate here is the local gateway's surrogateescape of a byte that is not UTF-8.
            return str(body).encode("utf-8", "surrogatepass").decode("utf-8")
        return base64.b64decode(body).decode("utf-8")
    except (binascii.Error, ValueError):
        raise error("PARSE_ERROR", "the request body is not UTF-8 JSON") from None


def _card(event: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    """The public card, cacheable (A2A v1.0 §8.6): Cache-Control and a strong ETag of its bytes; a
    client that already holds them (If-None-Match) gets 304. Its URLs are the configured endpoint's
    (DOVECOTE_PUBLIC_URL), never a request's Host or X-Forwarded-Proto: a cached card must not name
    whatever a client sent (`javascript://…`)."""
    from dovecote.platform.settings import get_settings

    endpoint = get_settings().public_url
    if not endpoint:
        logger.error("the agent card needs DOVECOTE_PUBLIC_URL, the deployment's endpoint")
        return _answer(*error("INTERNAL", "internal error").http())
    answer = _answer(200, as_json(agent_card(endpoint, dovecote.__version__)))
    etag = '"' + hashlib.sha256(answer["body"].encode("utf-8")).hexdigest()[:32] + '"'
    answer["headers"].update({"Cache-Control": "public, max-age=300", "ETag": etag})
    if etag in [tag.strip() for tag in headers.get("if-none-match", "").split(",")]:
        return {"statusCode": 304, "headers": {"Cache-Control": "public, max-age=300", "ETag": etag}, "body": ""}
    return answer


def route(event: dict[str, Any]) -> dict[str, Any]:
    route_key = str(event.get("routeKey") or "")
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    if route_key == CARD_ROUTE:
        return _card(event, headers)
    try:
        principal = principal_from_event(event)
    except DomainError as exc:  # a route wired without the authorizer by mistake: refuse, never guess
        return _answer(
            401 if exc.code == "unauthenticated" else 403, {"error": {"code": exc.code, "message": exc.message}}
        )
    call = bindings.Call(
        principal, headers, {str(k): str(v) for k, v in (event.get("queryStringParameters") or {}).items()}
    )
    # The query's text as every other route checks it (platform/request_text.py): InvalidParams.
    refused = query_refusal(event)
    query_error = from_domain(refused) if refused is not None else None
    if route_key == JSONRPC_ROUTE:
        try:
            text = _text(event, headers)
        except A2AError as exc:
            return _answer(200, {"jsonrpc": "2.0", "id": None, "error": exc.jsonrpc()})
        return _answer(200, bindings.jsonrpc(service(), call, text, refused=query_error))
    operation = REST_ROUTES.get(route_key, "")
    try:
        if query_error is not None:
            raise query_error
        text = _text(event, headers)
    except A2AError as exc:
        return _answer(*exc.http())
    status, body = bindings.rest(service(), call, operation, text, dict(event.get("pathParameters") or {}))
    return _answer(status, body)


@gc_pause.resumes_gc
@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _traced()(event)


@functools.cache
def _traced() -> Callable[[dict[str, Any]], dict[str, Any]]:
    import os

    # As platform.http.tracing_enabled says (not imported: it loads the resolver's pydantic models).
    if os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").lower() in ("1", "true"):
        return _safe
    from aws_lambda_powertools import Tracer

    tracer = Tracer()
    # Timings and the route only: never the response (message parts, presigned URLs) or the error.
    return tracer.capture_method(capture_response=False, capture_error=False)(_safe)


def _safe(event: dict[str, Any]) -> dict[str, Any]:
    try:
        return route(event)
    except Exception:
        logger.exception("unhandled error")
        internal = error("INTERNAL", "internal error")
        if event.get("routeKey") == JSONRPC_ROUTE:
            return _answer(200, {"jsonrpc": "2.0", "id": None, "error": internal.jsonrpc()})
        return _answer(*internal.http())
