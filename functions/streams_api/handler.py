"""Streams function: `GET /v1/tasks/{id}/stream` as server-sent events (docs/guides/streams.md).

A WSGI app, not a Lambda handler: Lambda's Python runtime cannot stream a response, so in the cloud
the Lambda Web Adapter (its layer, AWS_LWA_INVOKE_MODE=response_stream) runs this app in a plain
HTTP server (functions/streams_api/serve.py) behind the streaming front (infra/constructs/streams.py);
`dovecote dev` hands the same app its stream routes on its one port (infra/local/gateway.py).

No authorizer runs in front of it (API Gateway's streaming front has none of the HTTP API's simple
responses), so it checks the bearer token itself, with the authorizer's own code
(functions/authorizer/handler.py: the same parse, the same TokenService, the same log line on a
refusal) and answers as API Gateway does for it: 401 {"message": "Unauthorized"} without a token,
403 {"message": "Forbidden"} for a refused one. Every check (the token, the role, the task in the
caller's authority, `after`) is made before the first byte: another authority's task is a plain
404 JSON answer, never a stream.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl

from dovecote.platform import gc_pause, sse
from dovecote.platform.errors import DomainError, InvalidArgument
from dovecote.platform.observability import logger
from dovecote.platform.principal import Principal
from dovecote.platform.request_text import QUERY_INT, QUERY_INT_RULE
from dovecote.tasks.service import TaskService
from dovecote.tasks.streams import LEASE, RECONNECT, KeepAlive, LeaseState, Logged, Reconnect, StreamItem
from functions.streams_api.wsgi import guarded, json_answer


def openapi_paths() -> dict[str, Any]:
    """The stream route in the API's OpenAPI document (functions/admin_api merges it): not a
    Powertools route, so described here, beside the code that answers it."""
    from dovecote.platform.schema import ID

    envelope = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}}
    gateway = {"application/json": {"schema": {"$ref": "#/components/schemas/GatewayMessage"}}}
    return {
        "/v1/tasks/{id}/stream": {
            "get": {
                "tags": ["tasks"],
                "summary": "Follow Task Stream",
                "operationId": "follow_task_stream",
                "description": "The task's events as server-sent events, live: `id:` the event's sequence, "
                "`event:` its type, `data:` the event object as the events route pages it; `event: lease` "
                "(no `id:`) the lease state, first and at each change; a comment at least every 15 s; the "
                "stream ends after the event that makes the task terminal, or with `event: reconnect` at its "
                "time bound. `Last-Event-ID` (or `after`) resumes after that sequence. Served by the "
                "streaming front in the cloud (docs/guides/streams.md).",
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string", **ID}},
                    {
                        "name": "after",
                        "in": "query",
                        "required": False,
                        # At most 12 digits, as Last-Event-ID (resume_after reads both the same way).
                        "schema": {"type": "integer", "minimum": 0, "maximum": 999_999_999_999},
                        "description": "a sequence number, at most the task's event_count: a larger one is 400 "
                        "invalid_argument",
                    },
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "required": False,
                        "schema": {"type": "string", "pattern": "^[0-9]{0,12}$"},
                        "description": "the last sequence received: resume after it (before `after`)",
                    },
                ],
                "responses": {
                    "200": {
                        "description": "the stream: each message an event of the task's log, a lease state or "
                        "the reconnect notice",
                        # One SSE message, as a reader dispatches it (data: one line of JSON).
                        "content": {
                            sse.MEDIA_TYPE: {
                                "schema": {
                                    "type": "object",
                                    "required": ["data"],
                                    "properties": {
                                        "event": {"type": "string"},
                                        "data": {"type": "string"},
                                        "id": {"type": "string", "pattern": "^[0-9]+$"},
                                    },
                                }
                            }
                        },
                    },
                    "400": {"description": "invalid_argument", "content": envelope},
                    "401": {"description": "no token", "content": gateway},
                    "403": {"description": "a refused token, or a role that may not read tasks", "content": gateway},
                    "404": {"description": "not_found: no such task in the caller's authority", "content": envelope},
                },
            }
        }
    }


STREAM_PATH = re.compile(r"/v1/tasks/([^/]+)/stream")
StartResponse = Callable[..., Any]


@lru_cache(maxsize=1)
def service() -> TaskService:
    from dovecote.tasks.wiring import task_service

    return task_service()


def authenticate(environ: dict[str, Any]) -> Principal | tuple[int, dict[str, str]]:
    """The principal of the request's bearer token, or the gateway's own refusal (status, body)."""
    from functions.authorizer import handler as authorizer

    header = environ.get("HTTP_AUTHORIZATION")
    if not header:
        return 401, {"message": "Unauthorized"}
    token = authorizer.bearer_token({"authorization": str(header)})
    if token is None:
        authorizer.refuse("malformed", None)
        return 403, {"message": "Forbidden"}
    principal, reason = authorizer.service().authenticate(token)
    if principal is None:
        authorizer.refuse(reason, token)
        return 403, {"message": "Forbidden"}
    return principal


def resume_after(environ: dict[str, Any]) -> int | None:
    """Where a stream starts: `Last-Event-ID` (what an EventSource resends on its own reconnect)
    before `?after=`; each a sequence number. Any other query parameter is refused, as on every route."""
    query = parse_qsl(str(environ.get("QUERY_STRING", "")), keep_blank_values=True)
    unknown = sorted({name for name, _ in query} - {"after"})
    if unknown:
        raise InvalidArgument(f"unknown query parameter {unknown[0]!r}", field=unknown[0])
    values = [value for name, value in query if name == "after"]
    if len(values) > 1:
        raise InvalidArgument("after is given more than once", field="after")
    # An empty Last-Event-ID is no id (the standard's reader never sends one): `after` then counts.
    given, field = str(environ.get("HTTP_LAST_EVENT_ID") or "").strip(), "Last-Event-ID"
    if not given:
        if not values:
            return None
        given, field = values[0], "after"
        # The query's integer as every route reads one: its canonical decimal text, nothing around it.
        if not QUERY_INT.fullmatch(given):
            raise InvalidArgument(f"after {QUERY_INT_RULE}", field=field)
    text = str(given)
    if not text.isascii() or not text.isdigit() or len(text) > 12:
        raise InvalidArgument(f"{field} must be a sequence number (a non-negative integer)", field=field)
    return int(text)


def frames(items: Iterable[StreamItem]) -> Iterator[bytes]:
    """The stream's SSE messages: an event with `id:` (its sequence) and `event:` (its type); the
    lease state without `id:`; a comment to keep the connection alive; `event: reconnect` last when
    the stream reached its time bound."""
    yield sse.comment("dovecote task stream")  # the headers and a first byte reach the client now
    for item in items:
        if isinstance(item, Logged):
            yield sse.frame(item.to_json(), event=item.type, id=item.sequence)
        elif isinstance(item, LeaseState):
            yield sse.frame(item.to_json(), event=LEASE)
        elif isinstance(item, KeepAlive):
            yield sse.comment("keep-alive")
        elif isinstance(item, Reconnect):
            yield sse.frame(item.to_json(), event=RECONNECT)


def _app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    path = str(environ.get("PATH_INFO", ""))
    matched = STREAM_PATH.fullmatch(path)
    if matched is None:
        from functions.streams_api import a2a_front

        return a2a_front.serve(environ, start_response, authenticate)
    if environ.get("REQUEST_METHOD") != "GET":
        return json_answer(start_response, 405, {"message": "Method Not Allowed"})
    found = authenticate(environ)
    if not isinstance(found, Principal):
        return json_answer(start_response, *found)
    try:
        items = service().follow(found, matched.group(1), resume_after(environ))
    except DomainError as exc:
        return json_answer(start_response, exc.status, exc.envelope())
    except Exception:
        logger.exception("unhandled error")
        return json_answer(
            start_response, 500, {"error": {"code": "internal", "message": "internal error", "details": {}}}
        )
    start_response("200 OK", list(sse.HEADERS))
    return guarded(frames(items))


# The WSGI entry. The first request resumes the garbage collector the `functions` package paused
# for the cold start (dovecote/platform/gc_pause.py): in Lambda the app's server process is the
# function's, and no Lambda handler of ours runs there to do it.
app = handler = gc_pause.resumes_gc(_app)
