"""The two HTTP bindings of A2A 1.0 over one A2AService: JSON-RPC 2.0 (A2A v1.0 §9) and HTTP+JSON
(§11). Each request is parsed into a2a-sdk's protobuf request type (protobuf JSON: camelCase, or the
proto field names, as the spec allows), answered by the service, and serialized back the same way,
so the wire is the spec's by construction. Errors are A2AError (dovecote.a2a.errors) rendered as a
JSON-RPC error object or an AIP-193 body.

Streaming (SendStreamingMessage, SubscribeToTask) is served by the streams function
(functions/a2a_api/streams.py, on the streaming front the card names); a streaming request that
reaches this buffered binding anyway is UnsupportedOperation. Push notification configs: the push
service (dovecote/a2a/push.py), or PushNotificationNotSupported where none is wired. The extended
card: UnsupportedOperation (the card does not declare one).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a2a.types import CancelTaskRequest, GetTaskRequest, ListTasksRequest, SendMessageRequest
from google.protobuf import json_format
from google.protobuf.message import Message as Proto

from dovecote.a2a.errors import A2AError, error
from dovecote.a2a.mapping import as_json
from dovecote.a2a.service import A2AService
from dovecote.platform import jsonvalues
from dovecote.platform.principal import Principal
from dovecote.tasks.limits import MAX_PARTS

JSON = "application/json"
SUPPORTED_VERSIONS = ("1.0",)
# What an A2A-Version may look like (Major.Minor[.Patch], a few digits each): anything else is refused
# without being echoed back.
_VERSION = re.compile(r"[0-9]{1,4}(\.[0-9]{1,4}){0,2}")
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


def check_json(content_type: str, *, body: bool, post: bool, bodiless: bool = False) -> None:
    """The request's declared media type: JSON (the bindings' one content type, `application/json`
    or a `+json` type such as `application/a2a+json`), by essence, case-insensitively, on every POST
    (an empty one too) and any body, on the buffered routes and the streaming ones alike: a
    browser's cross-site request can carry no Content-Type, or text/plain, without asking first
    (CORS), so a POST that does not say JSON is never served (ContentTypeNotSupported).
    `bodiless`: a POST the spec sends without a body, HTTP+JSON SubscribeToTask (the task id is in
    the path; a2a-sdk's client sends neither body nor Content-Type): with no body it may declare
    nothing, but what it declares is JSON."""
    declared = content_type.split(";", 1)[0].strip().lower()
    if not (body or post) or (bodiless and not body and not declared):
        return
    if declared != JSON and not declared.endswith("+json"):
        raise error(
            "CONTENT_TYPE_NOT_SUPPORTED",
            f"requests are JSON: send Content-Type: application/json, not {declared[:100] or 'none'}",
            contentType=declared[:100],
        )


def check_version(call: Call) -> None:
    """A2A-Version (header, or query parameter): Major.Minor must be one this agent serves. An empty
    one means 0.3 to the spec (A2A v1.0 §3.6), which it does not serve."""
    given = (call.header("a2a-version") or call.query.get("A2A-Version", "")).strip()
    if given and not _VERSION.fullmatch(given):
        # Not a version at all: named by its length, never echoed (it may be anything, of any size).
        raise error(
            "VERSION_NOT_SUPPORTED",
            "A2A-Version is not a version (Major.Minor, optionally .Patch); send A2A-Version: 1.0",
            length=len(given),
            supported=",".join(SUPPORTED_VERSIONS),
        )
    major_minor = ".".join(given.split(".")[:2])
    if major_minor not in SUPPORTED_VERSIONS:
        raise error(
            "VERSION_NOT_SUPPORTED",
            f"A2A-Version {given or '(none: 0.3)'} is not supported; send A2A-Version: 1.0",
            version=given,
            supported=",".join(SUPPORTED_VERSIONS),
        )


def parse_params(params: Any, message: Proto) -> Any:
    """The request's parameters into its protobuf type, each check before the costlier next: the
    limits a raw request can be held to at once (a message's part count: 300,000 parts otherwise
    cost seconds of parsing before the gate refused them), numbers protobuf JSON cannot hold
    (NaN, Infinity, 1e999, a 400-digit integer: jsonvalues), enum values the type does not name
    (protobuf would drop an unknown name silently, or keep an unknown number), then the parse.
    Each is InvalidParams: a client's error, answered with its request's id."""
    if not isinstance(params, dict):
        raise error("INVALID_PARAMS", "params must be an object")
    _check_limits(params, message)
    unheld = jsonvalues.problem(params, "")
    if unheld:
        raise error("INVALID_PARAMS", unheld)
    _check_enums(params, message.DESCRIPTOR)
    try:
        # Unknown fields are ignored (a newer client's additions), as A2A v1.0's serialization asks.
        json_format.ParseDict(params, message, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, OverflowError) as exc:
        raise error("INVALID_PARAMS", f"invalid parameters: {str(exc)[:300]}") from None
    return message


def _check_limits(params: dict[str, Any], message: Proto) -> None:
    """What the task gate will refuse anyway, checked on the raw request where it is cheap to see:
    a SendMessage's parts beyond MAX_PARTS (the gate's own bound, tasks/model.py)."""
    if not isinstance(message, SendMessageRequest):
        return
    sent = params.get("message")
    parts = sent.get("parts") if isinstance(sent, dict) else None
    if isinstance(parts, list) and len(parts) > MAX_PARTS:
        raise error("INVALID_PARAMS", f"message.parts must hold 1 to {MAX_PARTS} parts", parts=len(parts))


# Message types whose JSON is free-form (Struct, Value, ...) or a string (Timestamp): no enum inside.
_OPAQUE = frozenset(
    {
        "google.protobuf.Struct",
        "google.protobuf.Value",
        "google.protobuf.ListValue",
        "google.protobuf.Timestamp",
        "google.protobuf.Duration",
        "google.protobuf.FieldMask",
        "google.protobuf.Any",
    }
)


def _check_enums(params: dict[str, Any], descriptor: Any) -> None:
    """Every enum field the request sets names a value of its enum: by name, or by number (as
    protobuf JSON allows). Walks the request beside its descriptor, iteratively; unknown fields are
    skipped, as the parse ignores them."""
    stack: list[tuple[Any, Any, str]] = [(params, descriptor, "")]
    while stack:
        node, desc, where = stack.pop()
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            field = desc.fields_by_camelcase_name.get(key) or desc.fields_by_name.get(key)
            if field is None:
                continue
            name = where + field.json_name
            values = value if field.is_repeated and isinstance(value, list) else [value]
            if field.enum_type is not None:
                for one in values:
                    if not _names_a_value(field.enum_type, one):
                        shown = repr(one[:40]) if isinstance(one, str) else str(one)[:40]
                        raise error(
                            "INVALID_PARAMS",
                            f"{name} must be one of {', '.join(field.enum_type.values_by_name)}, not {shown}",
                            field=name,
                        )
            elif field.message_type is not None and field.message_type.full_name not in _OPAQUE:
                if field.message_type.GetOptions().map_entry:
                    continue  # no map of this API holds an enum
                stack.extend((one, field.message_type, name + ".") for one in values)


def _names_a_value(enum: Any, value: Any) -> bool:
    if value is None:
        return True  # null: the field's default, as protobuf JSON reads it
    if isinstance(value, str):
        if value in enum.values_by_name:
            return True
        try:
            value = int(value)
        except ValueError:
            return False
    return isinstance(value, int) and not isinstance(value, bool) and value in enum.values_by_number


# ---- JSON-RPC 2.0 ---------------------------------------------------------------------------------------


def jsonrpc(service: A2AService, call: Call, body: str, *, refused: A2AError | None = None) -> dict[str, Any]:
    """One JSON-RPC request → its response object (always HTTP 200, as JSON-RPC over HTTP answers).
    `refused`: what the request's envelope (its query) already failed, answered with its id."""
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested past the decoder's stack
        return rpc_error(None, error("PARSE_ERROR", "Invalid JSON payload"))
    if not isinstance(request, dict):
        return rpc_error(
            None, error("INVALID_REQUEST", "a request is one JSON-RPC 2.0 object (batches are not served)")
        )
    rpc_id = request.get("id")
    if rpc_id is not None and (isinstance(rpc_id, bool) or not isinstance(rpc_id, str | int)):
        return rpc_error(None, error("INVALID_REQUEST", "id must be a string or an integer"))
    if request.get("jsonrpc") != "2.0" or not isinstance(request.get("method"), str):
        return rpc_error(rpc_id, error("INVALID_REQUEST", "Request payload validation error: jsonrpc 2.0 and a method"))
    method = request["method"]
    params = request.get("params", {})
    if refused is not None:
        return rpc_error(rpc_id, refused)
    try:
        result = _dispatch(service, call, method, params)
    except A2AError as exc:
        return rpc_error(rpc_id, exc)
    return {"jsonrpc": "2.0", "id": rpc_id, "result": result}


def _dispatch(service: A2AService, call: Call, method: str, params: Any) -> dict[str, Any]:
    if method == "SendMessage":
        check_version(call)
        return as_json(
            service.send_message(call.principal, parse_params(params, SendMessageRequest()), call.idempotency_key)
        )
    if method == "GetTask":
        check_version(call)
        return as_json(service.get_task(call.principal, parse_params(params, GetTaskRequest())))
    if method == "ListTasks":
        check_version(call)
        return list_json(service.list_tasks(call.principal, parse_params(params, ListTasksRequest())))
    if method == "CancelTask":
        check_version(call)
        return as_json(service.cancel_task(call.principal, parse_params(params, CancelTaskRequest())))
    if method in STREAMING_METHODS:
        raise unsupported_streaming()
    if method in PUSH_METHODS:
        check_version(call)
        return _push_rpc(service, call, method, params)
    if method == "GetExtendedAgentCard":
        raise no_extended_card()
    raise error("METHOD_NOT_FOUND", f"Method not found: {method[:100]}", method=method[:100])


def _push_rpc(service: A2AService, call: Call, method: str, params: Any) -> dict[str, Any]:
    from a2a.types import (
        DeleteTaskPushNotificationConfigRequest,
        GetTaskPushNotificationConfigRequest,
        ListTaskPushNotificationConfigsRequest,
        TaskPushNotificationConfig,
    )

    from dovecote.a2a import push

    if service.push is None:
        raise push_not_supported()
    if method == "CreateTaskPushNotificationConfig":
        return as_json(push.create(service.push, call.principal, parse_params(params, TaskPushNotificationConfig())))
    if method == "GetTaskPushNotificationConfig":
        request = parse_params(params, GetTaskPushNotificationConfigRequest())
        return as_json(push.get(service.push, call.principal, request))
    if method == "ListTaskPushNotificationConfigs":
        request = parse_params(params, ListTaskPushNotificationConfigsRequest())
        return list_configs_json(push.list_configs(service.push, call.principal, request))
    push.delete(service.push, call.principal, parse_params(params, DeleteTaskPushNotificationConfigRequest()))
    return {}


def list_configs_json(response: Any) -> dict[str, Any]:
    """ListTaskPushNotificationConfigsResponse: `configs` always present (protobuf JSON leaves an
    empty list out), `nextPageToken` "" (one page: a task holds at most 10)."""
    out = as_json(response)
    out.setdefault("configs", [])
    out["nextPageToken"] = response.next_page_token
    return out


def rpc_error(rpc_id: Any, exc: A2AError) -> dict[str, Any]:
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
        "streaming is served by the streaming front, at the agent card's interface URLs: "
        "this endpoint buffers its answers (or send SendMessage and follow the task with GetTask)",
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


def json_body(body: str) -> dict[str, Any]:
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
    request = parse_params(json_body(body), SendMessageRequest())
    return as_json(service.send_message(call.principal, request, call.idempotency_key))


def _get(service: A2AService, call: Call, body: str, path: dict[str, str]) -> dict[str, Any]:
    check_version(call)
    params: dict[str, Any] = {"id": path.get("id", "")}
    if "historyLength" in call.query:
        params["historyLength"] = call.query["historyLength"]
    return as_json(service.get_task(call.principal, parse_params(params, GetTaskRequest())))


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
    return list_json(service.list_tasks(call.principal, parse_params(params, ListTasksRequest())))


def _task_action(service: A2AService, call: Call, body: str, path: dict[str, str]) -> dict[str, Any]:
    """POST /tasks/{id}:cancel and /tasks/{id}:subscribe (a custom method: the id, a colon, the verb)."""
    target = path.get("id_action", "")
    task_id, _, verb = target.rpartition(":")
    if verb == "subscribe":
        raise unsupported_streaming()
    if verb != "cancel" or not task_id:
        raise error("METHOD_NOT_FOUND", "no such A2A operation: POST /tasks/{id}:cancel or :subscribe")
    check_version(call)
    params = json_body(body)
    params["id"] = task_id
    return as_json(service.cancel_task(call.principal, parse_params(params, CancelTaskRequest())))


def _push_create(service: A2AService, call: Call, body: str, path: dict[str, str]) -> dict[str, Any]:
    """POST /tasks/{id}/pushNotificationConfigs: the body is the TaskPushNotificationConfig."""
    check_version(call)
    params = json_body(body)
    params["taskId"] = path.get("id", "")
    return _push_rpc(service, call, "CreateTaskPushNotificationConfig", params)


def _push_list(service: A2AService, call: Call, body: str, path: dict[str, str]) -> dict[str, Any]:
    check_version(call)
    params: dict[str, Any] = {"taskId": path.get("id", "")}
    params.update({name: call.query[name] for name in ("pageSize", "pageToken") if name in call.query})
    return _push_rpc(service, call, "ListTaskPushNotificationConfigs", params)


def _push_get(service: A2AService, call: Call, body: str, path: dict[str, str]) -> dict[str, Any]:
    check_version(call)
    params = {"taskId": path.get("id", ""), "id": path.get("config_id", "")}
    return _push_rpc(service, call, "GetTaskPushNotificationConfig", params)


def _push_delete(service: A2AService, call: Call, body: str, path: dict[str, str]) -> dict[str, Any]:
    check_version(call)
    params = {"taskId": path.get("id", ""), "id": path.get("config_id", "")}
    return _push_rpc(service, call, "DeleteTaskPushNotificationConfig", params)


def _extended_card(service: A2AService, call: Call, body: str, path: dict[str, str]) -> dict[str, Any]:
    raise no_extended_card()


REST_OPERATIONS: dict[str, Callable[[A2AService, Call, str, dict[str, str]], dict[str, Any]]] = {
    "send": _send,
    "get_task": _get,
    "list_tasks": _list,
    "task_action": _task_action,
    "push_create": _push_create,
    "push_list": _push_list,
    "push_get": _push_get,
    "push_delete": _push_delete,
    "extended_card": _extended_card,
}
