"""The HTTP API (payload format 2.0) event API Gateway sends a function, as the two places that stand in
for API Gateway build it: `dovecote dev`'s gateway (infra/local/gateway.py) and the streaming front's
A2A routes (functions/streams_api/a2a_front.py). Each decides its own request context and which
bodies are text; the rest is API Gateway's format, written here once."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qsl


def http_api_event(
    *,
    route_key: str,
    path: str,
    raw_query: str,
    headers: dict[str, str],
    request_context: dict[str, Any],
    path_parameters: dict[str, str],
    body: bytes,
    text: bool,
) -> dict[str, Any]:
    """The event; a text body travels as UTF-8 (undecodable bytes kept as surrogates), any other
    base64-encoded. Query parameters as API Gateway folds them: a repeated name's values joined
    with commas; absent when there are none, as are path parameters and the body."""
    query: dict[str, str] = {}
    for name, value in parse_qsl(raw_query, keep_blank_values=True):
        query[name] = f"{query[name]},{value}" if name in query else value
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": path,
        "rawQueryString": raw_query,
        "headers": headers,
        "requestContext": request_context,
        "isBase64Encoded": not text,
    }
    if query:
        event["queryStringParameters"] = query
    if path_parameters:
        event["pathParameters"] = path_parameters
    if body:
        event["body"] = body.decode("utf-8", "surrogateescape") if text else base64.b64encode(body).decode()
    return event
