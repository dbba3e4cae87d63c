"""An API Gateway HTTP API (payload 2.0) emulator as a WSGI app.

It matches the route table, runs the real authorizer with the REQUEST event shape and its simple
response, then invokes the real function handler with the same event shape API Gateway sends, and
turns the returned dict into the HTTP response. Behaviour copied from API Gateway on purpose:
- an authorized route without an Authorization header is answered 401 {"message":"Unauthorized"}
  by the gateway itself (the identity source is missing), before the authorizer runs;
- a request body over the Lambda payload limit (6 MB) is answered 413 by the gateway.
"""

from __future__ import annotations

import base64
import importlib
import json
import logging
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import parse_qsl

from werkzeug.wrappers import Request, Response

from infra.routes import AUTHORIZER, FUNCTIONS, ROUTES, Function, Route

LAMBDA_PAYLOAD_LIMIT = 6 * 1024 * 1024
TEXT_TYPES = ("application/json", "text/", "application/x-www-form-urlencoded")


@dataclass
class LambdaContext:
    function_name: str
    memory_limit_in_mb: int
    aws_request_id: str
    invoked_function_arn: str
    log_group_name: str = "/aws/lambda/local"
    log_stream_name: str = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


def _context(function: Function) -> LambdaContext:
    return LambdaContext(
        function_name=function.name,
        memory_limit_in_mb=function.memory_mb,
        aws_request_id=str(uuid.uuid4()),
        invoked_function_arn=f"arn:aws:lambda:us-east-1:000000000000:function:{function.name}",
    )


def _pattern(path: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\{(\w+)\\}", r"(?P<\1>[^/]+)", re.escape(path)) + "$")


# `dovecote dev --faults` only: a request carrying this header is served in full (the command
# commits), then its connection is cut before any answer is written, as when a network drops after
# the server committed. The SDK's retry of the same command must replay the original answer.
FAULT_HEADER = "X-Dovecote-Fault"
DROP_RESPONSE = "drop-response"
log = logging.getLogger("dovecote-dev")


class Gateway:
    def __init__(self, *, faults: bool = False, log_requests: bool = True) -> None:
        self._routes: list[tuple[Route, re.Pattern[str]]] = [(r, _pattern(r.path)) for r in ROUTES]
        self._handlers: dict[str, Callable[[dict[str, Any], Any], dict[str, Any]]] = {}
        self._faults = faults
        self._log_requests = log_requests

    def _handler(self, function: Function) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
        if function.name not in self._handlers:
            module, attr = function.handler.rsplit(".", 1)
            self._handlers[function.name] = getattr(importlib.import_module(module), attr)
        return self._handlers[function.name]

    def match(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        for route, pattern in self._routes:
            found = pattern.match(path)
            if found and route.method == method:
                return route, found.groupdict()
        return None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request = Request(environ)
        started = time.perf_counter()
        response = self.dispatch(request)
        if self._log_requests:
            log.info(
                "%s %s %d %s %.0fms",
                request.method,
                request.path,
                response.status_code,
                _code_of(response) or "-",
                (time.perf_counter() - started) * 1000,
            )
        if self._faults and request.headers.get(FAULT_HEADER) == DROP_RESPONSE:
            sock = environ.get("werkzeug.socket")
            if sock is not None:
                import socket

                # The command ran; the client never hears of it (the write below fails, and the
                # server treats it as a dropped connection).
                sock.shutdown(socket.SHUT_RDWR)
        return response(environ, start_response)

    def dispatch(self, request: Request) -> Response:
        matched = self.match(request.method, request.path)
        if matched is None:
            return _json(404, {"message": "Not Found"})
        route, path_parameters = matched
        body = request.get_data()
        if len(body) > LAMBDA_PAYLOAD_LIMIT:
            return _json(413, {"message": "Request Entity Too Large"})
        event = self._event(request, route, path_parameters, body)
        if route.authorized:
            if not request.headers.get("Authorization"):
                return _json(401, {"message": "Unauthorized"})
            decision = self._handler(AUTHORIZER)(self._authorizer_event(event), _context(AUTHORIZER))
            if not decision.get("isAuthorized"):
                return _json(403, {"message": "Forbidden"})
            event["requestContext"]["authorizer"] = {"lambda": decision.get("context") or {}}
        function = FUNCTIONS[route.function]
        result = self._handler(function)(event, _context(function))
        return _response(result)

    @staticmethod
    def _event(request: Request, route: Route, path_parameters: dict[str, str], body: bytes) -> dict[str, Any]:
        headers: dict[str, str] = {}
        for name, value in request.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]},{value}" if key in headers else value
        raw_query = request.query_string.decode("latin-1")
        query: dict[str, str] = {}
        for name, value in parse_qsl(raw_query, keep_blank_values=True):
            query[name] = f"{query[name]},{value}" if name in query else value
        content_type = headers.get("content-type", "")
        is_text = not body or content_type.startswith(TEXT_TYPES)
        now = time.time()
        event: dict[str, Any] = {
            "version": "2.0",
            "routeKey": f"{route.method} {route.path}",
            "rawPath": request.path,
            "rawQueryString": raw_query,
            "headers": headers,
            "requestContext": {
                "accountId": "000000000000",
                "apiId": "local",
                "domainName": request.host,
                "domainPrefix": "local",
                "http": {
                    "method": request.method,
                    "path": request.path,
                    "protocol": "HTTP/1.1",
                    "sourceIp": request.remote_addr or "127.0.0.1",
                    "userAgent": headers.get("user-agent", ""),
                },
                "requestId": str(uuid.uuid4()),
                "routeKey": f"{route.method} {route.path}",
                "stage": "$default",
                "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
                "timeEpoch": int(now * 1000),
            },
            "isBase64Encoded": not is_text,
        }
        if query:
            event["queryStringParameters"] = query
        if path_parameters:
            event["pathParameters"] = path_parameters
        if body:
            event["body"] = body.decode("utf-8", "replace") if is_text else base64.b64encode(body).decode()
        return event

    @staticmethod
    def _authorizer_event(event: dict[str, Any]) -> dict[str, Any]:
        return {
            "version": "2.0",
            "type": "REQUEST",
            "routeArn": "arn:aws:execute-api:us-east-1:000000000000:local/$default/"
            + event["routeKey"].replace(" ", ""),
            "identitySource": [event["headers"].get("authorization", "")],
            "routeKey": event["routeKey"],
            "rawPath": event["rawPath"],
            "rawQueryString": event["rawQueryString"],
            "headers": event["headers"],
            "queryStringParameters": event.get("queryStringParameters"),
            "pathParameters": event.get("pathParameters"),
            "requestContext": event["requestContext"],
        }


def _code_of(response: Response) -> str:
    """The error code of an error envelope, for the request log line."""
    if response.status_code < 400 or response.mimetype != "application/json":
        return ""
    try:
        body = json.loads(response.get_data())
    except ValueError:
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("code", "")) if isinstance(error, dict) else str(body.get("message", ""))


def _json(status: int, body: dict[str, Any]) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json")


def _response(result: dict[str, Any]) -> Response:
    body = result.get("body") or ""
    data = base64.b64decode(body) if result.get("isBase64Encoded") else body.encode("utf-8")
    response = Response(data, status=int(result.get("statusCode", 200)))
    for name, value in (result.get("headers") or {}).items():
        response.headers[name] = value
    for name, values in (result.get("multiValueHeaders") or {}).items():
        for value in values:
            response.headers.add(name, value)
    for cookie in result.get("cookies") or []:
        response.headers.add("Set-Cookie", cookie)
    return response
