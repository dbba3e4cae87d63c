"""The A2A interface on the streaming front (docs/guides/streams.md#a2a): the JSON-RPC binding has
one URL for every method, so the whole A2A interface is served where a stream can be: the streaming
methods here (functions/a2a_api/streams.py), every other request by the A2A function's own router
(functions/a2a_api/handler.route) with the event API Gateway would have sent it, the principal
from the same token check as the task stream's. `dovecote dev` hands this app the streaming
requests only (infra/local/gateway.py); the others reach the A2A function there as in an HTTP API.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl

from dovecote.platform import sse
from dovecote.platform.api_event import http_api_event
from dovecote.platform.principal import Principal
from functions.streams_api.wsgi import guarded, json_answer

StartResponse = Callable[..., Any]
Authenticate = Callable[[dict[str, Any]], Principal | tuple[int, dict[str, str]]]


def _routes() -> list[tuple[str, re.Pattern[str], str]]:
    from functions.a2a_api.handler import ROUTE_KEYS

    found = []
    for key in sorted(ROUTE_KEYS):
        method, template = key.split(" ", 1)
        parts = [
            f"(?P<{part[1:-1]}>[^/]+)" if part.startswith("{") else re.escape(part) for part in template.split("/")
        ]
        found.append((method, re.compile("/".join(parts)), key))
    return found


ROUTES = _routes()


def match(method: str, path: str) -> tuple[str, dict[str, str]] | None:
    for route_method, pattern, key in ROUTES:
        found = pattern.fullmatch(path)
        if route_method == method and found:
            return key, found.groupdict()
    return None


def _headers(environ: dict[str, Any]) -> dict[str, str]:
    headers = {k[5:].replace("_", "-").lower(): str(v) for k, v in environ.items() if k.startswith("HTTP_")}
    for name in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(name):
            headers[name.replace("_", "-").lower()] = str(environ[name])
    return headers


def _body(environ: dict[str, Any]) -> bytes:
    try:
        size = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        size = 0
    return environ["wsgi.input"].read(size) if size > 0 else b""


def serve(environ: dict[str, Any], start_response: StartResponse, authenticate: Authenticate) -> Iterable[bytes]:
    method, path = str(environ.get("REQUEST_METHOD", "")), str(environ.get("PATH_INFO", ""))
    matched = match(method, path)
    if matched is None:
        return json_answer(start_response, 404, {"message": "Not Found"})
    key, variables = matched
    headers, body = _headers(environ), _body(environ)
    principal: Principal | None = None
    from functions.a2a_api import handler as a2a

    if key != a2a.CARD_ROUTE:
        found = authenticate(environ)
        if not isinstance(found, Principal):
            return json_answer(start_response, *found)
        principal = found
    streamed = _streaming(key, variables, body, headers, principal, environ)
    if streamed is not None:
        from functions.a2a_api.streams import Streamed

        if isinstance(streamed, Streamed):
            start_response("200 OK", list(sse.HEADERS))
            return guarded(streamed.frames)
        return json_answer(start_response, *streamed)
    event = _event(environ, key, variables, headers, body, principal)
    result = a2a._safe(event)
    return _result(start_response, result)


def _streaming(
    key: str,
    variables: dict[str, str],
    body: bytes,
    headers: dict[str, str],
    principal: Principal | None,
    environ: dict[str, Any],
) -> Any:
    """The answer of a streaming request (a stream, or its error before the first byte), or None
    for any other request."""
    from functions.a2a_api import handler as a2a
    from functions.a2a_api import streams

    if principal is None:
        return None
    if key == a2a.JSONRPC_ROUTE:
        if not streams.is_streaming_jsonrpc(body):
            return None
    elif key == "POST /a2a/{method}":
        if variables.get("method") != streams.REST_STREAM_VERB:
            return None
    elif key == "POST /a2a/tasks/{id_action}":
        if not streams.is_streaming_rest(variables.get("id_action", "")):
            return None
    else:
        return None
    from dovecote.a2a.bindings import Call

    query = {k: v for k, v in parse_qsl(str(environ.get("QUERY_STRING", "")), keep_blank_values=True)}
    call = Call(principal, headers, query)
    text = body.decode("utf-8", "replace")
    if key == a2a.JSONRPC_ROUTE:
        return streams.jsonrpc(a2a.service(), call, text)
    if key == "POST /a2a/{method}":
        return streams.rest(a2a.service(), call, streams.REST_STREAM_VERB, text)
    task_id = variables.get("id_action", "").rpartition(":")[0]
    return streams.rest(a2a.service(), call, streams.REST_SUBSCRIBE_VERB, text, task_id)


def _event(
    environ: dict[str, Any],
    key: str,
    variables: dict[str, str],
    headers: dict[str, str],
    body: bytes,
    principal: Principal | None,
) -> dict[str, Any]:
    """The HTTP API (payload 2.0) event API Gateway would send the A2A function for this request."""
    path = str(environ.get("PATH_INFO", ""))
    context: dict[str, Any] = {"http": {"method": key.split(" ", 1)[0], "path": path}, "routeKey": key}
    if principal is not None:
        context["authorizer"] = {"lambda": principal.as_context()}
    return http_api_event(
        route_key=key,
        path=path,
        raw_query=str(environ.get("QUERY_STRING", "")),
        headers=headers,
        request_context=context,
        path_parameters=variables,
        body=body,
        text=not body or headers.get("content-type", "").startswith(("application/json", "text/")),
    )


def _result(start_response: StartResponse, result: dict[str, Any]) -> list[bytes]:
    status = int(result.get("statusCode", 200))
    body = result.get("body") or ""
    data = base64.b64decode(body) if result.get("isBase64Encoded") else str(body).encode("utf-8")
    headers = [(str(k), str(v)) for k, v in (result.get("headers") or {}).items()]
    start_response(f"{status} {'OK' if status < 400 else 'Error'}", headers)
    return [data]


__all__ = ["json", "match", "serve"]
