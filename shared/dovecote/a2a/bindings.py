"""The two HTTP bindings of A2A 1.0 over one A2AService: JSON-RPC 2.0 (A2A v1.0 §9) and HTTP+JSON
(§11). Each request is parsed into a2a-sdk's protobuf request type (protobuf JSON: camelCase, or the
proto field names, as the spec allows), answered by the service, and serialized back the same way,
so the wire is the spec's by construction. Errors are A2AError (dovecote.a2a.errors) rendered as a
JSON-RPC error object or an AIP-193 body.

Streaming (SendStreamingMessage, SubscribeToTask) is not offered (the card says streaming: false):
UnsupportedOperation. Push notification configs: PushNotificationNotSupported. The extended card:
UnsupportedOperation (the card does not declare one).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a2a.types import CancelTaskRequest, GetTaskRequest, ListTasksRequest, SendMessageRequest
from google.protobuf import json_format
from google.protobuf.message import Message as Proto

from dovecote.a2a.errors import A2AError, error
from dovecote.a2a.mapping import as_json
from dovecote.a2a.service import A2AService
from dovecote.platform.principal import Principal

JSON = "application/json"
SUPPORTED_VERSIONS = ("1.0",)
STREAMING_METHODS = frozenset({"SendStreamingMessage", "SubscribeToTask"})
PUSH_METHODS = frozenset(
    {
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    }
)


@dataclass(frozen=True, slots=True)
class Call:
    """One A2A request as the binding received it: who, the service parameters (headers), the body."""

    principal: Principal
    headers: dict[str, str]  # lower-case names
    query: dict[str, str]

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")

    @property
    def idempotency_key(self) -> str:
        return self.header("idempotency-key").strip()


def check_version(call: Call) -> None:
    """A2A-Version (header, or query parameter): Major.Minor must be one this agent serves. An empty
    one means 0.3 to the spec (A2A v1.0 §3.6), which it does not serve."""
    given = (call.header("a2a-version") or call.query.get("A2A-Version", "")).strip()
    major_minor = ".".join(given.split(".")[:2])
    if major_minor not in SUPPORTED_VERSIONS:
        raise error(
            "VERSION_NOT_SUPPORTED",
            f"A2A-Version {given or '(none: 0.3)'} is not supported; send A2A-Version: 1.0",
            version=given,
            supported=",".join(SUPPORTED_VERSIONS),
        )


def _parse(params: Any, message: Proto) -> Any:
    if not isinstance(params, dict):
        raise error("INVALID_PARAMS", "params must be an object")
    try:
        # Unknown fields are ignored (a newer client's additions), as A2A v1.0's serialization asks.
        json_format.ParseDict(params, message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise error("INVALID_PARAMS", f"invalid parameters: {str(exc)[:300]}") from None
    return message


# ---- JSON-RPC 2.0 ---------------------------------------------------------------------------------------


def jsonrpc(service: A2AService, call: Call, body: str) -> dict[str, Any]:
    """One JSON-RPC request → its response object (always HTTP 200, as JSON-RPC over HTTP answers)."""
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested past the decoder's stack
        return _rpc_error(None, error("PARSE_ERROR", "Invalid JSON payload"))
    if not isinstance(request, dict):
        return _rpc_error(
            None, error("INVALID_REQUEST", "a request is one JSON-RPC 2.0 object (batches are not served)")
        )
    rpc_id = request.get("id")
    if rpc_id is not None and (isinstance(rpc_id, bool) or not isinstance(rpc_id, str | int)):
        return _rpc_error(None, error("INVALID_REQUEST", "id must be a string or an integer"))
    if request.get("jsonrpc") != "2.0" or not isinstance(request.get("method"), str):
        return _rpc_error(
            rpc_id, error("INVALID_REQUEST", "Request payload validation error: jsonrpc 2.0 and a method")
        )
    method = request["method"]
    params = request.get("params", {})
    try:
        result = _dispatch(service, call, method, params)
    except A2AError as exc:
        return _rpc_error(rpc_id, exc)
    return {"jsonrpc": "2.0", "id": rpc_id, "result": result}


def _dispatch(service: A2AService, call: Call, method: str, params: Any) -> dict[str, Any]:
    if method == "SendMessage":
        check_version(call)
        return as_json(service.send_message(call.principal, _parse(params, SendMessageRequest()), call.idempotency_key))
    if method == "GetTask":
        check_version(call)
        return as_json(service.get_task(call.principal, _parse(params, GetTaskRequest())))
    if method == "ListTasks":
        check_version(call)
        return list_json(service.list_tasks(call.principal, _parse(params, ListTasksRequest())))
    if method == "CancelTask":
        check_version(call)
        return as_json(service.cancel_task(call.principal, _parse(params, CancelTaskRequest())))
    if method in STREAMING_METHODS:
        raise unsupported_streaming()
    if method in PUSH_METHODS:
        raise push_not_supported()
    if method == "GetExtendedAgentCard":
        raise no_extended_card()
    raise error("METHOD_NOT_FOUND", f"Method not found: {method[:100]}", method=method[:100])


def _rpc_error(rpc_id: Any, exc: A2AError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "error": exc.jsonrpc()}


def list_json(response: Any) -> dict[str, Any]:
    """ListTasksResponse: nextPageToken is always present, "" on the last page (protobuf JSON would
    leave an empty string out), and so are pageSize and totalSize."""
    out = as_json(response)
    out.setdefault("tasks", [])
    out["nextPageToken"] = response.next_page_token
    out["pageSize"] = response.page_size
    out["totalSize"] = response.total_size
    return out


def unsupported_streaming() -> A2AError:
    return error(
        "UNSUPPORTED_OPERATION",
        "streaming is not supported (the agent card says capabilities.streaming: false): "
        "send SendMessage and follow the task with GetTask",
    )


def push_not_supported() -> A2AError:
    return error("PUSH_NOTIFICATION_NOT_SUPPORTED", "push notifications are not supported")


def no_extended_card() -> A2AError:
    return error("UNSUPPORTED_OPERATION", "this agent has no extended agent card")


# ---- HTTP+JSON ------------------------------------------------------------------------------------------

Answer = tuple[int, dict[str, Any]]


def rest(service: A2AService, call: Call, operation: str, body: str, path: dict[str, str]) -> Answer:
    """One HTTP+JSON request (`operation` is the route's, see functions/a2a_api) → status and body."""
    try:
        handle = REST_OPERATIONS.get(operation)
        if handle is None:
            raise error("METHOD_NOT_FOUND", "no such A2A operation")
        return 200, handle(service, call, body, path)
    except A2AError as exc:
        return exc.http()


def _body(body: str) -> dict[str, Any]:
    if not body:
        return {}
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        raise error("PARSE_ERROR", "Invalid JSON payload") from None
    if not isinstance(parsed, dict):
        raise error("INVALID_PARAMS", "the request body is a JSON object")
    return parsed


def _send(service: A2AService, call: Call, body: str, path: dict[str, str]) -> dict[str, Any]:
    verb = path.get("method", "")
    if verb == "message:stream":
        raise unsupported_streaming()
    if verb != "message:send":
        raise error("METHOD_NOT_FOUND", f"no such A2A operation: POST /{verb[:100]}")
    check_version(call)
    request = _parse(_body(body), SendMessageRequest())
    return as_json(service.send_message(call.principal, request, call.idempotency_key))


def _get(service: A2AService, call: Call, body: str, path: dict[str, str]) -> dict[str, Any]:
    check_version(call)
    params: dict[str, Any] = {"id": path.get("id", "")}
    if "historyLength" in call.query:
        params["historyLength"] = call.query["historyLength"]
    return as_json(service.get_task(call.principal, _parse(params, GetTaskRequest())))


# ListTasks query parameters (camelCase, A2A v1.0 §11.5) and how each is read.
_LIST_QUERY = ("contextId", "status", "pageSize", "pageToken", "historyLength", "statusTimestampAfter")


def _list(service: A2AService, call: Call, body: str, path: dict[str, str]) -> dict[str, Any]:
    check_version(call)
    params: dict[str, Any] = {name: call.query[name] for name in _LIST_QUERY if name in call.query}
    if "includeArtifacts" in call.query:
        flag = call.query["includeArtifacts"].lower()
        if flag not in ("true", "false"):
            raise error("INVALID_PARAMS", "includeArtifacts is true or false")
        params["includeArtifacts"] = flag == "true"
    return list_json(service.list_tasks(call.principal, _parse(params, ListTasksRequest())))


def _task_action(service: A2AService, call: Call, body: str, path: dict[str, str]) -> dict[str, Any]:
    """POST /tasks/{id}:cancel and /tasks/{id}:subscribe (a custom method: the id, a colon, the verb)."""
    target = path.get("id_action", "")
    task_id, _, verb = target.rpartition(":")
    if verb == "subscribe":
        raise unsupported_streaming()
    if verb != "cancel" or not task_id:
        raise error("METHOD_NOT_FOUND", "no such A2A operation: POST /tasks/{id}:cancel or :subscribe")
    check_version(call)
    params = _body(body)
    params["id"] = task_id
    return as_json(service.cancel_task(call.principal, _parse(params, CancelTaskRequest())))


def _push(service: A2AService, call: Call, body: str, path: dict[str, str]) -> dict[str, Any]:
    raise push_not_supported()


def _extended_card(service: A2AService, call: Call, body: str, path: dict[str, str]) -> dict[str, Any]:
    raise no_extended_card()


REST_OPERATIONS: dict[str, Callable[[A2AService, Call, str, dict[str, str]], dict[str, Any]]] = {
    "send": _send,
    "get_task": _get,
    "list_tasks": _list,
    "task_action": _task_action,
    "push": _push,
    "extended_card": _extended_card,
}
