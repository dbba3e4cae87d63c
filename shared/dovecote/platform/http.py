"""The HTTP edge shared by every API function: one resolver factory, one error mapping, one
decorator stack. Handlers only parse, call a service, and return models."""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from typing import Any, Callable, cast

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError, ResponseValidationError
from aws_lambda_powertools.logging import correlation_paths
from pydantic import BaseModel, ConfigDict, GetJsonSchemaHandler, model_serializer
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from dovecote.platform import gc_pause, snapstart
from dovecote.platform.errors import DomainError, InvalidArgument, NotFound
from dovecote.platform.observability import logger, metrics
from dovecote.platform.principal import Principal, principal_from_event
from dovecote.platform.request_text import SURROGATE, bad_text, not_utf8, query_refusal
from dovecote.platform.schema import EdgeModel, type_error

JSON = "application/json"


class ApiModel(EdgeModel):
    """Response models leave out null fields: an absent cursor or body form is omitted, not null.
    They are read from the attributes of the value a service answers (a record, a typed read)."""

    model_config = ConfigDict(from_attributes=True)

    @model_serializer(mode="wrap")
    def _omit_none(self, handler: Any) -> Any:
        data = handler(self)
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """The wrap serializer above returns `Any`, which pydantic documents as `{}`: every response
        body would have no schema at all. Document the fields as serialized instead: each one is
        always present, except an optional one, which is omitted (never null) when it has no value."""
        if handler.mode != "serialization":
            return handler(core_schema)
        unwrapped = {k: v for k, v in core_schema.items() if k != "serialization"}
        reference = handler(cast(CoreSchema, unwrapped))
        schema = handler.resolve_ref_schema(reference)
        properties: dict[str, Any] = schema.get("properties") or {}
        optional = set()
        for name, prop in properties.items():
            options = prop.get("anyOf")
            if isinstance(options, list) and {"type": "null"} in options:
                optional.add(name)
                rest = [o for o in options if o != {"type": "null"}]
                del prop["anyOf"]
                prop.pop("default", None)
                if len(rest) == 1:
                    prop.update(rest[0])
                else:
                    prop["anyOf"] = rest
        schema["required"] = [name for name in properties if name not in optional]
        return reference


class ErrorBody(EdgeModel):
    code: str
    message: str
    details: dict[str, Any] = {}


class ErrorEnvelope(EdgeModel):
    """Every non-2xx response: {"error": {"code", "message", "details"}}."""

    error: ErrorBody


class GatewayMessage(EdgeModel):
    """API Gateway's own answers, given before any function runs: 401 when the Authorization
    header is missing, 413 when the body is over the Lambda payload limit."""

    message: str


# Statuses API Gateway itself may answer, with {"message"} instead of the envelope.
GATEWAY_STATUSES = (401, 413)


def responses(
    status: int, model: type[BaseModel] | None, *errors: int, why: dict[int, str] | None = None
) -> dict[int, Any]:
    """OpenAPI responses of a route: its success (with its model, or none for 204) and the error
    statuses it can return, each with `why` it is answered when a route says. Powertools documents
    only what is listed once any entry is given."""
    success: dict[str, Any] = {"description": "success"}
    if model is not None:
        success["content"] = {JSON: {"model": model}}
    return {status: success, **error_responses(*errors, why=why)}


def error_responses(*statuses: int, why: dict[int, str] | None = None) -> dict[int, Any]:
    """OpenAPI response entries for the error statuses a route can return."""
    envelope = {"$ref": "#/components/schemas/ErrorEnvelope"}
    either = {"anyOf": [envelope, {"$ref": "#/components/schemas/GatewayMessage"}]}
    return {
        status: {
            "description": (why or {}).get(status, "error"),
            "content": {JSON: {"schema": either if status in GATEWAY_STATUSES else envelope}},
        }
        for status in statuses
    }


def error_response(error: DomainError) -> Response:
    return Response(status_code=error.status, content_type=JSON, body=json.dumps(error.envelope()))


# Routes API Gateway serves without the authorizer (infra/routes.py; tests/unit/test_routes.py
# checks the two agree). Every other route needs a principal before anything else is looked at.
PUBLIC_ROUTES = frozenset({"GET /v1/health", "GET /v1/openapi.json", "GET /.well-known/jwks.json"})
# Deeper JSON than this is refused: no Dovecote body nests more than a few levels, and deep nesting
# is how a small body turns into a RecursionError deep inside a parser or validator.
MAX_JSON_DEPTH = 32


def _refusal(error: DomainError) -> dict[str, Any]:
    return {
        "statusCode": error.status,
        "headers": {"Content-Type": JSON},
        "body": json.dumps(error.envelope()),
        "isBase64Encoded": False,
    }


def _header(event: dict[str, Any], wanted: str) -> tuple[str | None, str]:
    for name, value in (event.get("headers") or {}).items():
        if name.lower() == wanted:
            return name, value
    return None, ""


def _check_json(value: Any) -> DomainError | None:
    """Depth and text checks over a parsed body, iteratively (no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            if bad_text(node):
                return InvalidArgument(SURROGATE)
        elif isinstance(node, dict | list):
            if depth > MAX_JSON_DEPTH:
                return InvalidArgument(f"request JSON nests deeper than {MAX_JSON_DEPTH} levels", limit=MAX_JSON_DEPTH)
            if isinstance(node, dict):
                for key, child in node.items():
                    if bad_text(key):
                        return InvalidArgument(SURROGATE)
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in node)
    return None


def gate_request(event: dict[str, Any]) -> dict[str, Any] | None:
    """The one gate every API request passes before the resolver sees it. In order:
    1. the principal (a route behind the authorizer runs nothing for a stranger, not even a parse);
    2. the query string: valid UTF-8 once its percent-escapes are decoded (strictly: a gateway that
       decoded `%FF` as U+FFFD would otherwise store a character nobody sent); path and query text;
    3. the body: declared JSON (any case, or a +json type), valid UTF-8 (strictly, whether the
       gateway passed it as text or as base64), parseable, at most MAX_JSON_DEPTH deep, no lone
       surrogates, no integer beyond Python's 4300-digit limit.
    It returns the refusal, or None after normalising the event (the body decoded, the content type
    `application/json`) so the resolver's own parser sees exactly what was checked."""
    try:
        if event.get("routeKey") not in PUBLIC_ROUTES:
            principal_from_event(event)
    except DomainError as error:
        return _refusal(error)
    query = query_refusal(event)
    if query is not None:
        return _refusal(query)
    body = event.get("body")
    if not body:
        return None
    header, declared = _header(event, "content-type")
    essence = declared.split(";", 1)[0].strip().lower()
    if essence and essence != JSON and not essence.endswith("+json"):
        return _refusal(
            InvalidArgument("request bodies are JSON: send Content-Type: application/json", content_type=declared)
        )
    try:
        # A text body holding a lone surrogate (the local gateway's surrogateescape of a byte that is
        # not UTF-8) encodes to bytes that are not UTF-8 either: refused below, never replaced.
        raw = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode("utf-8", "surrogatepass")
    except (ValueError, binascii.Error) as exc:
        return _refusal(InvalidArgument("request body is not valid base64", problem=str(exc)[:200]))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _refusal(not_utf8("request body", exc))
    try:
        parsed = json.loads(text)
    except RecursionError:
        return _refusal(InvalidArgument(f"request JSON nests deeper than {MAX_JSON_DEPTH} levels"))
    except ValueError as exc:
        return _refusal(InvalidArgument("request body is not valid JSON", problem=str(exc)[:200]))
    problem = _check_json(parsed)
    if problem is not None:
        return _refusal(problem)
    event["body"] = text
    event["isBase64Encoded"] = False
    event.setdefault("headers", {})
    if header is not None:
        del event["headers"][header]
    event["headers"]["content-type"] = JSON
    return None


def _refuse_unknown_query(app: APIGatewayHttpResolver, next_middleware: Any) -> Response:
    """A misspelt filter (`?atuhor=x`) must not silently widen a listing: every query parameter
    has to be one the route declares."""
    route = app.context.get("_route")
    given = set((app.current_event.query_string_parameters or {}).keys())
    # The not-found route (rule ".*", compiled as "^.*$") declares nothing: it answers 404, whatever
    # the query says.
    if route is not None and given and ".*" not in route.rule.pattern:
        declared = {p.alias for p in route.dependant.query_params}
        unknown = sorted(given - declared)
        if unknown:
            return error_response(
                InvalidArgument(f"unknown query parameter {unknown[0]!r}", unknown=unknown, allowed=sorted(declared))
            )
    return next_middleware(app)


def _refuse_control_characters(app: APIGatewayHttpResolver, next_middleware: Any) -> Response:
    """Route patterns end in `$`, which also matches before a trailing newline: `/x/id%0A` would
    reach the handler as `id`. No path names anything with a control character (C0, DEL, C1) or a
    line separator in it: not_found,
    as for a path no route matches (Powertools runs middlewares on that one too)."""
    path = app.current_event.path or ""
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F or ch in "\u2028\u2029" for ch in path):
        return error_response(NotFound("no such route"))
    return next_middleware(app)


def _route_key(route: Any) -> str:
    """A Powertools route as an API Gateway route key, parameters unnamed (`GET /v1/tasks/{}`): the
    route table may name a parameter otherwise than the handler does."""
    return f"{route.method} " + _POWERTOOLS_PARAM.sub("{}", route.path)


def _unnamed(route_key: str) -> str:
    return _GATEWAY_PARAM.sub("{}", route_key)


_POWERTOOLS_PARAM = re.compile(r"<\w+>")
_GATEWAY_PARAM = re.compile(r"\{[^}/]+\}")


def _refuse_another_route(app: APIGatewayHttpResolver, next_middleware: Any) -> Response:
    """API Gateway chose the route (`routeKey`) on the raw path, then hands the function a decoded
    one: an id holding `%2F` or `..` could make Powertools match a sibling route of the same
    function. The route that runs must be the one the gateway matched; anything else is a path no
    route serves."""
    route = app.context.get("_route")
    expected = app.current_event.raw_event.get("routeKey")
    if route is None or not expected or expected.startswith("$") or ".*" in route.rule.pattern:
        return next_middleware(app)
    if _route_key(route) != _unnamed(expected):
        return error_response(NotFound("no such route"))
    return next_middleware(app)


def new_resolver() -> APIGatewayHttpResolver:
    # A response that fails its own schema is our bug: 500, never a client error.
    app = APIGatewayHttpResolver(enable_validation=True, response_validation_error_http_code=500)

    app.use(middlewares=[_refuse_control_characters, _refuse_another_route, _refuse_unknown_query])

    @app.exception_handler(DomainError)
    def _domain(exc: DomainError) -> Response:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    def _invalid(exc: RequestValidationError) -> Response:
        return error_response(type_error(exc.errors()))

    @app.exception_handler(ResponseValidationError)
    def _bad_response(exc: ResponseValidationError) -> Response:
        logger.error("response failed its schema", extra={"errors": exc.errors()})
        internal = DomainError("internal error")
        return error_response(internal)

    @app.exception_handler(Exception)
    def _unexpected(exc: Exception) -> Response:
        # A bug or an unmapped dependency failure: log it whole, answer the envelope, no details.
        logger.exception("unhandled error")
        return error_response(DomainError("internal error"))

    @app.not_found
    def _not_found(_exc: Exception) -> Response:
        return error_response(NotFound("no such route"))

    return app


def document_routes(app: APIGatewayHttpResolver) -> None:
    """Powertools documents a route's summary and description only when told. The handler's
    docstring is the one place they are written: its first line is the summary, the whole of it the
    description (tests/unit/test_openapi.py requires both on every operation)."""
    import inspect

    for route in app._static_routes + app._dynamic_routes:
        doc = inspect.getdoc(route.func) or ""
        if doc:
            route.summary = route.summary or doc.split("\n", 1)[0].strip().rstrip(".")
            route.description = route.description or doc


def current_principal(app: APIGatewayHttpResolver) -> Principal:
    return principal_from_event(app.current_event.raw_event)


def prime(app: APIGatewayHttpResolver, *services: snapstart.Composition) -> None:
    """The loading a first request does, without a request (before a SnapStart snapshot): the
    composition roots built (adapters imported, clients created: no AWS request), every route's
    parameters resolved and every edge model's validator built."""
    for service in services:
        built = service()
        # A service that builds its parts on first use (the task service) builds them all now.
        getattr(built, "prime", lambda: None)()
    for route in app._static_routes + app._dynamic_routes:
        route.dependant  # noqa: B018 - a cached property: resolving it is the point
    pending = [EdgeModel]
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        if not model.__pydantic_complete__:
            model.model_rebuild()


def lambda_entry(
    app: APIGatewayHttpResolver, *services: snapstart.Composition
) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The one decorator stack, in the same order on every entry point: logger context with the
    correlation id, metrics, tracer; then the request gate, then the resolver. The Tracer (X-Ray SDK,
    which loads botocore) is built on the first invocation so that import stays cheap. `services`,
    the function's composition roots, are primed before a SnapStart snapshot and rebuilt after each
    restore (platform/snapstart.py)."""
    snapstart.register(prime=functools.partial(prime, app, *services), forget=services)

    @gc_pause.resumes_gc
    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
    @metrics.log_metrics
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return _traced(app)(event, context)

    return handler


def tracing_enabled() -> bool:
    """X-Ray subsegments from inside the function (the handler and every AWS call) cost the X-Ray
    SDK's import and botocore patching on a cold start (measured in bench/coldstart.py); Lambda's
    active tracing records each invocation without them. The deployment sets
    POWERTOOLS_TRACE_DISABLED from the CDK context `xray_subsegments`."""
    import os

    return os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").lower() not in ("1", "true")


def _gated(app: APIGatewayHttpResolver) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        refused = gate_request(event)
        if refused is not None:
            return refused
        return app.resolve(event, context)

    return handler


@functools.cache
def _traced(app: APIGatewayHttpResolver) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    if not tracing_enabled():
        return _gated(app)  # not even an import of the tracing SDK
    from aws_lambda_powertools import Tracer

    tracer = Tracer()

    # Traces hold timings and the route, never data: capturing the response would write minted
    # tokens, note bodies, message parts and presigned URLs into X-Ray for anyone who can read it,
    # and an error's capture carries the request. The resolver turns every error into a response,
    # so nothing reaches the tracer as an exception anyway.
    gated = _gated(app)

    @tracer.capture_lambda_handler(capture_response=False, capture_error=False)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return gated(event, context)

    return handler
