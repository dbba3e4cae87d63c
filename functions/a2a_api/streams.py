"""A2A's streaming methods on both bindings (dovecote/a2a/streaming.py), as server-sent events:
JSON-RPC 2.0 (`SendStreamingMessage`, `SubscribeToTask` POSTed to the JSON-RPC URL; each message's
data a JSON-RPC response whose result is a StreamResponse) and HTTP+JSON (`POST /message:stream`,
`POST /tasks/{id}:subscribe`; each message's data the StreamResponse). Every message carries `id:`,
the task event sequence it reflects; `Last-Event-ID` on SubscribeToTask resumes after it.

An error found before the first byte (a bad request, an unknown task, a terminal one for a
subscription) is the binding's ordinary error answer, not a stream. Run by the streams function
(functions/streams_api/handler.py), which serves the whole A2A interface on the streaming front.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from a2a.types import SendMessageRequest, SubscribeToTaskRequest

from dovecote.a2a.bindings import (
    STREAMING_METHODS,
    Call,
    check_json,
    check_version,
    json_body,
    parse_params,
    rpc_error,
)
from dovecote.a2a.errors import A2AError, error
from dovecote.a2a.mapping import as_json
from dovecote.a2a.service import A2AService
from dovecote.a2a.streaming import Update, send_streaming, subscribe
from dovecote.platform import sse
from dovecote.platform.observability import logger

REST_STREAM_VERB = "message:stream"
REST_SUBSCRIBE_VERB = "subscribe"


@dataclass(frozen=True, slots=True)
class Streamed:
    """A stream to send (status 200, text/event-stream)."""

    frames: Iterator[bytes]


Answer = Streamed | tuple[int, dict[str, Any]]


def is_streaming_jsonrpc(body: bytes) -> bool:
    """Whether a JSON-RPC request names a streaming method (the local gateway routes by it)."""
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(request, dict) and request.get("method") in STREAMING_METHODS


def is_streaming_rest(method_or_action: str) -> bool:
    """`POST /a2a/{method}` or `POST /a2a/tasks/{id_action}`: the streaming verbs."""
    return method_or_action == REST_STREAM_VERB or method_or_action.rpartition(":")[2] == REST_SUBSCRIBE_VERB


def last_event_id(call: Call) -> int | None:
    given = call.header("last-event-id").strip()
    if not given:
        return None
    if not given.isascii() or not given.isdigit() or len(given) > 12:
        raise error("INVALID_PARAMS", "Last-Event-ID must be a task event sequence (a non-negative integer)")
    return int(given)


def jsonrpc(a2a: A2AService, call: Call, text: str) -> Answer:
    try:
        # Every streaming request is a POST: JSON declared, as on the buffered routes (no id yet).
        check_json(call.header("content-type"), body=bool(text), post=True)
    except A2AError as exc:
        return 200, rpc_error(None, exc)
    try:
        request = json.loads(text)
    except (ValueError, RecursionError):
        return 200, rpc_error(None, error("PARSE_ERROR", "Invalid JSON payload"))
    if not isinstance(request, dict) or request.get("jsonrpc") != "2.0":
        return 200, rpc_error(None, error("INVALID_REQUEST", "Request payload validation error: jsonrpc 2.0"))
    rpc_id = request.get("id")
    if rpc_id is not None and (isinstance(rpc_id, bool) or not isinstance(rpc_id, str | int)):
        return 200, rpc_error(None, error("INVALID_REQUEST", "id must be a string or an integer"))
    try:
        check_version(call)
        updates = _open(a2a, call, str(request.get("method")), request.get("params", {}))
    except A2AError as exc:
        return 200, rpc_error(rpc_id, exc)
    return Streamed(
        _frames(
            updates,
            lambda response: {"jsonrpc": "2.0", "id": rpc_id, "result": as_json(response)},
            lambda exc: rpc_error(rpc_id, exc),
        )
    )


def rest(a2a: A2AService, call: Call, verb: str, text: str, task_id: str = "") -> Answer:
    try:
        check_json(call.header("content-type"), body=bool(text), post=True, bodiless=verb == REST_SUBSCRIBE_VERB)
        check_version(call)
        if verb == REST_STREAM_VERB:
            updates = _open(a2a, call, "SendStreamingMessage", json_body(text))
        else:
            updates = _open(a2a, call, "SubscribeToTask", {**json_body(text), "id": task_id})
    except A2AError as exc:
        return exc.http()
    return Streamed(_frames(updates, as_json, lambda exc: exc.http()[1]))


def _open(a2a: A2AService, call: Call, method: str, params: Any) -> Iterator[Update]:
    if method == "SendStreamingMessage":
        return send_streaming(a2a, call.principal, parse_params(params, SendMessageRequest()), call.idempotency_key)
    return subscribe(a2a, call.principal, parse_params(params, SubscribeToTaskRequest()), last_event_id(call))


def _frames(
    updates: Iterator[Update], data: Callable[[Any], dict[str, Any]], failed: Callable[[A2AError], dict[str, Any]]
) -> Iterator[bytes]:
    """Each update as one SSE message with `id:` its sequence; a keep-alive as a comment. An error
    after the first byte is sent as the binding's error object, and the stream ends."""
    try:
        for update in updates:
            if update.response is None:
                yield sse.comment("keep-alive")
            else:
                yield sse.frame(data(update.response), id=update.sequence)
    except A2AError as exc:
        yield sse.frame(failed(exc))
    except Exception:
        logger.exception("A2A stream failed")
        yield sse.frame(failed(error("INTERNAL", "internal error")))
