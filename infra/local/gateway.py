"""An API Gateway HTTP API (payload 2.0) emulator as a WSGI app.

It matches the route table, runs the real authorizer with the REQUEST event shape and its simple
response, then invokes the real function handler with the same event shape API Gateway sends, and
turns the returned dict into the HTTP response. Behaviour copied from API Gateway on purpose:
- an authorized route without an Authorization header is answered 401 {"message":"Unauthorized"}
  by the gateway itself (the identity source is missing), before the authorizer runs;
- a request body over the Lambda payload limit (6 MB) is answered 413 by the gateway;
- a function's answer over Lambda's response limit (6 MB, as Lambda measures it: the response
  object as JSON) fails the invocation, which API Gateway answers 500 {"message":"Internal Server
  Error"}: so an answer too large for the cloud fails here too, not only once deployed.

Route matching works on the path as received, segment by segment (`RouteMatcher`): the path is split
at its literal `/` first and each segment percent-decoded after, so `%2F` stays inside its segment
and a route variable receives it (then the id's pattern answers 4xx); `..`, `.` and `%2e%2e` are
never resolved, so no segment reaches a parent route. AWS documents that an HTTP API picks a route
by exact match, then by greedy variable, then `$default`, and passes parameters to the integration
decoded; it documents nothing about dot segments or encoded slashes, and third-party reports say an
HTTP API decodes the whole path, `%2F` included, before it matches. This gateway is the stricter of
the two on purpose: the SDK never sends a `/` inside a segment (`dovecote.client.paths` refuses such
ids), so both agree on every request the SDK, CLI or MCP server makes, and only a hand-made request
can tell them apart. The event's `rawPath` is the decoded path, as HTTP APIs send it, except that a
`/` or `%` inside a segment stays encoded: the function's own router (Powertools, which matches on
`rawPath`) then sees the segments this gateway matched.

The request log writes one line per request with the path as received, still percent-encoded, and
any byte that is not printable ASCII escaped (`\n`, `\x1b`, `\x00`): a request path cannot forge a
line or send terminal escapes.
"""

from __future__ import annotations

import base64
import importlib
import io
import json
import logging
import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import quote_from_bytes, unquote_to_bytes, urlsplit

from werkzeug.wrappers import Request, Response

from dovecote.platform.api_event import http_api_event
from infra.local.log_lines import printable
from infra.routes import ALL_ROUTES, AUTHORIZER, FUNCTIONS, STREAM_ROUTES, STREAMS, Function, Route

LAMBDA_PAYLOAD_LIMIT = 6 * 1024 * 1024
LAMBDA_RESPONSE_LIMIT = 6 * 1024 * 1024  # a synchronous invocation's response, as JSON
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


VARIABLE = re.compile(r"\{(\w+)\}")


def raw_target(environ: dict[str, Any]) -> bytes:
    """The request target's bytes as the client sent them. werkzeug's server keeps them in RAW_URI
    (the request line read as ISO-8859-1, then through its UTF-8 "encoding dance"); without it
    (another WSGI server) the decoded PATH_INFO is encoded again, losing only the `%2F` spelling."""
    raw = environ.get("RAW_URI")
    if raw is not None:
        try:
            return str(raw).encode("latin-1").decode("utf-8").encode("latin-1")
        except UnicodeError:
            return str(raw).encode("utf-8", "surrogateescape")
    path = quote_from_bytes(str(environ.get("PATH_INFO", "")).encode("latin-1"), safe="/").encode("ascii")
    query = str(environ.get("QUERY_STRING", "")).encode("latin-1")
    return path + (b"?" + query if query else b"")


def raw_path(target: bytes) -> bytes:
    """The path of a request target: no query, no fragment; the path of an absolute-form target."""
    path = target.split(b"?", 1)[0].split(b"#", 1)[0]
    if not path.startswith(b"/"):
        path = urlsplit(path).path or b"/"
    return path


def segments(path: bytes) -> list[str]:
    """The segments of a path as received: split at the literal `/`, then each one percent-decoded
    on its own (invalid UTF-8 as U+FFFD, as werkzeug decodes a path). Nothing is resolved."""
    return [unquote_to_bytes(part).decode("utf-8", "replace") for part in path.split(b"/")[1:]]


def event_path(parts: list[str]) -> str:
    """`rawPath` for the function: decoded, except a `/` or `%` inside a segment, kept encoded so
    the function's router splits the path where this gateway did."""
    return "".join("/" + part.replace("%", "%25").replace("/", "%2F") for part in parts)


class RouteMatcher:
    """The route table matched segment by segment: a literal segment must equal the decoded one, a
    variable takes any non-empty decoded segment (a `/`, `..` or `?` in it included)."""

    def __init__(self, routes: tuple[Route, ...] = ALL_ROUTES) -> None:
        # Per route, its segments: a literal as (text, None), a variable as (None, name).
        self._routes = [(route, [_template_part(part) for part in route.path.split("/")[1:]]) for route in routes]

    def match(self, method: str, parts: list[str]) -> tuple[Route, dict[str, str]] | None:
        for route, template in self._routes:
            if route.method == method and len(template) == len(parts):
                found = _bind(template, parts)
                if found is not None:
                    return route, found
        return None


def _template_part(part: str) -> tuple[str | None, str | None]:
    variable = VARIABLE.fullmatch(part)
    return (None, variable.group(1)) if variable else (part, None)


def _bind(template: list[tuple[str | None, str | None]], parts: list[str]) -> dict[str, str] | None:
    found: dict[str, str] = {}
    for (literal, variable), given in zip(template, parts, strict=True):
        if variable is None:
            if given != literal:
                return None
        elif not given:
            return None
        else:
            found[variable] = given
    return found


# `dovecote dev --faults` only: a request carrying this header is served in full (the command
# commits), then its connection is cut before any answer is written, as when a network drops after
# the server committed. The SDK's retry of the same command must replay the original answer.
FAULT_HEADER = "X-Dovecote-Fault"
DROP_RESPONSE = "drop-response"
log = logging.getLogger("dovecote-dev")


# The function whose routes `dovecote dev --a2a-unauthenticated` serves without a token.
A2A_FUNCTION = "a2a_api"


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address (127.0.0.0/8, ::1), as a bind address or a Host's name."""
    import ipaddress

    name = host.strip().lower().removeprefix("[").removesuffix("]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_name(authority: str) -> str:
    """The host of `host[:port]` (an IPv6 literal in brackets keeps them)."""
    if authority.startswith("["):
        return authority.split("]", 1)[0] + "]"
    return authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority


def unauthenticated_refusal(headers: dict[str, str]) -> str:
    """Why an A2A request without a token is not served as the dev caller, or "" when it may be.
    The mode trusts whoever reaches the port, so only a client on this machine talking to it by a
    loopback name: a foreign Host is a DNS-rebinding page (its domain resolved to 127.0.0.1); a
    foreign Origin, or a cross-site fetch (Sec-Fetch-Site), is another site's page in a browser.
    A client that is no browser (the A2A TCK) sends no Origin and a loopback Host."""
    host = headers.get("host", "")
    if not is_loopback(_host_name(host)):
        return "dovecote dev --a2a-unauthenticated serves only a loopback Host (localhost, 127.0.0.1, [::1])"
    origin = headers.get("origin")
    if origin is not None:
        parsed = urlsplit(origin) if "://" in origin else None
        if parsed is None or parsed.scheme not in ("http", "https") or not is_loopback(parsed.hostname or ""):
            return "dovecote dev --a2a-unauthenticated serves no page of another origin (send a token)"
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return "dovecote dev --a2a-unauthenticated serves no cross-site request (send a token)"
    return ""


# One Lambda handler module is imported at a time, by the API's first requests and the event sources
# alike: two threads importing the same Powertools modules at once can see a partially initialized
# module. (The event sources start after the API serves, so both happen at a start.)
HANDLER_IMPORTS = threading.RLock()


def load_handler(function: Function) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    module, attr = function.handler.rsplit(".", 1)
    with HANDLER_IMPORTS:
        return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


class Gateway:
    def __init__(self, *, faults: bool = False, log_requests: bool = True, a2a_caller_token: str = "") -> None:
        # The stream routes beside the API's, on the same port (their app: `_stream`).
        self._matcher = RouteMatcher(ALL_ROUTES + STREAM_ROUTES)
        self._stream_app: Callable[..., Any] | None = None
        self._handlers: dict[str, Callable[[dict[str, Any], Any], dict[str, Any]]] = {}
        self._faults = faults
        self._log_requests = log_requests
        # Local only (`dovecote dev --a2a-unauthenticated`; the cloud stack has no such switch): an
        # A2A request without an Authorization header runs as this caller token, through the real
        # authorizer, so a client that cannot send a token (the A2A TCK) reaches a fixed caller.
        self._a2a_caller_token = a2a_caller_token

    def _handler(self, function: Function) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
        if function.name not in self._handlers:
            self._handlers[function.name] = load_handler(function)
        return self._handlers[function.name]

    def match(self, method: str, path: bytes) -> tuple[Route, dict[str, str]] | None:
        """The route of a path as received (percent-encoded bytes), and its decoded variables."""
        return self._matcher.match(method, segments(path))

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request = Request(environ)
        started = time.perf_counter()
        path = raw_path(raw_target(environ))
        matched = self._matcher.match(request.method, segments(path))
        if matched is not None and matched[0].function == STREAMS.name:
            return self._stream(environ, start_response, request, path, started)
        if matched is not None and matched[0].function == A2A_FUNCTION and self._a2a_streaming(request, matched):
            # A2A's streaming methods: the streams function serves them (the cloud's streaming front
            # serves the whole A2A interface; here the others stay with the A2A function).
            body = request.get_data()
            environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(body), str(len(body))
            if self._a2a_caller_token and not request.headers.get("authorization"):
                refused = unauthenticated_refusal({k.lower(): v for k, v in request.headers.items()})
                if refused:
                    return _json(403, {"message": refused})(environ, start_response)
                environ["HTTP_AUTHORIZATION"] = f"Bearer {self._a2a_caller_token}"
            return self._stream(environ, start_response, request, path, started)
        response = self.dispatch(request, path)
        if self._log_requests:
            log.info(
                "%s %s %d %s %.0fms",
                printable(request.method),
                printable(path),
                response.status_code,
                printable(_code_of(response) or "-"),
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

    @staticmethod
    def _a2a_streaming(request: Request, matched: tuple[Route, dict[str, str]]) -> bool:
        route, variables = matched
        if request.method != "POST":
            return False
        from functions.a2a_api import streams

        if route.path == "/":
            return len(request.get_data()) <= LAMBDA_PAYLOAD_LIMIT and streams.is_streaming_jsonrpc(request.get_data())
        if route.path == "/a2a/{method}":
            return variables.get("method") == streams.REST_STREAM_VERB
        if route.path == "/a2a/tasks/{id_action}":
            return streams.is_streaming_rest(variables.get("id_action", ""))
        return False

    def _stream(
        self, environ: dict[str, Any], start_response: Callable[..., Any], request: Request, path: bytes, started: float
    ) -> Any:
        """A stream route: the streams function's WSGI app answers it as the cloud's Web Adapter
        runs it (it checks the token itself). Logged when its answer starts, with its status."""
        if self._stream_app is None:
            self._stream_app = load_handler(STREAMS)

        def logged_start(status: str, headers: list[tuple[str, str]], *rest: Any) -> Any:
            if self._log_requests:
                log.info(
                    "%s %s %s %s %.0fms",
                    printable(request.method),
                    printable(path),
                    status.split(" ", 1)[0],
                    "stream" if status.startswith("200") else "-",
                    (time.perf_counter() - started) * 1000,
                )
            return start_response(status, headers, *rest)

        return self._stream_app(environ, logged_start)

    def dispatch(self, request: Request, path: bytes) -> Response:
        parts = segments(path)
        matched = self._matcher.match(request.method, parts)
        if matched is None or matched[0].function == STREAMS.name:
            return _json(404, {"message": "Not Found"})
        route, path_parameters = matched
        body = request.get_data()
        if len(body) > LAMBDA_PAYLOAD_LIMIT:
            return _json(413, {"message": "Request Entity Too Large"})
        event = self._event(request, route, path_parameters, body, event_path(parts))
        if route.authorized and route.function == A2A_FUNCTION and self._a2a_caller_token:
            if not event["headers"].get("authorization"):
                refused = unauthenticated_refusal(event["headers"])
                if refused:
                    return _json(403, {"message": refused})
                event["headers"]["authorization"] = f"Bearer {self._a2a_caller_token}"
        if route.authorized:
            if not event["headers"].get("authorization"):
                return _json(401, {"message": "Unauthorized"})
            decision = self._handler(AUTHORIZER)(self._authorizer_event(event), _context(AUTHORIZER))
            if not decision.get("isAuthorized"):
                return _json(403, {"message": "Forbidden"})
            event["requestContext"]["authorizer"] = {"lambda": decision.get("context") or {}}
        function = FUNCTIONS[route.function]
        result = self._handler(function)(event, _context(function))
        size = response_size(result)
        if size > LAMBDA_RESPONSE_LIMIT:
            log.warning(
                "%s answered %d bytes, over Lambda's response limit (%d)", function.name, size, LAMBDA_RESPONSE_LIMIT
            )
            return _json(500, {"message": "Internal Server Error"})
        return _response(result)

    @staticmethod
    def _event(
        request: Request, route: Route, path_parameters: dict[str, str], body: bytes, path: str
    ) -> dict[str, Any]:
        headers: dict[str, str] = {}
        for name, value in request.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]},{value}" if key in headers else value
        now = time.time()
        context: dict[str, Any] = {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": request.host,
            "domainPrefix": "local",
            "http": {
                "method": request.method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": request.remote_addr or "127.0.0.1",
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": f"{route.method} {route.path}",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        }
        return http_api_event(
            route_key=f"{route.method} {route.path}",
            path=path,
            raw_query=request.query_string.decode("latin-1"),
            headers=headers,
            request_context=context,
            path_parameters=path_parameters,
            body=body,
            text=not body or headers.get("content-type", "").startswith(TEXT_TYPES),
        )

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


def response_size(result: dict[str, Any]) -> int:
    """A function's answer as Lambda measures it against its limit: the response object as JSON
    (UTF-8, as the Python 3.12 runtime writes it: non-ASCII as itself)."""
    try:
        return len(json.dumps(result, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError):
        return 0  # not JSON: _response fails on it as Lambda would


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
