"""The HTTP edge shared by every API function: one resolver factory, one error mapping, one
decorator stack. Handlers only parse, call a service, and return models."""

from __future__ import annotations

import functools
import json
from typing import Any, Callable

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError, ResponseValidationError
from aws_lambda_powertools.logging import correlation_paths
from pydantic import BaseModel, model_serializer

from dovecote.platform.errors import DomainError, InvalidArgument, NotFound
from dovecote.platform.observability import logger, metrics
from dovecote.platform.principal import Principal, principal_from_event

JSON = "application/json"


class ApiModel(BaseModel):
    """Response models leave out null fields: an absent cursor or body form is omitted, not null."""

    @model_serializer(mode="wrap")
    def _omit_none(self, handler: Any) -> Any:
        data = handler(self)
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data


class ErrorBody(BaseModel):
    code: str
    message: str
    details: dict[str, Any] = {}


class ErrorEnvelope(BaseModel):
    """Every non-2xx response: {"error": {"code", "message", "details"}}."""

    error: ErrorBody


class GatewayMessage(BaseModel):
    """API Gateway's own answers, given before any function runs: 401 when the Authorization
    header is missing, 413 when the body is over the Lambda payload limit."""

    message: str


# Statuses API Gateway itself may answer, with {"message"} instead of the envelope.
GATEWAY_STATUSES = (401, 413)


def responses(status: int, model: type[BaseModel] | None, *errors: int) -> dict[int, Any]:
    """OpenAPI responses of a route: its success (with its model, or none for 204) and the error
    statuses it can return. Powertools documents only what is listed once any entry is given."""
    success: dict[str, Any] = {"description": "success"}
    if model is not None:
        success["content"] = {JSON: {"model": model}}
    return {status: success, **error_responses(*errors)}


def error_responses(*statuses: int) -> dict[int, Any]:
    """OpenAPI response entries for the error statuses a route can return."""
    envelope = {"$ref": "#/components/schemas/ErrorEnvelope"}
    either = {"anyOf": [envelope, {"$ref": "#/components/schemas/GatewayMessage"}]}
    return {
        status: {
            "description": "error",
            "content": {JSON: {"schema": either if status in GATEWAY_STATUSES else envelope}},
        }
        for status in statuses
    }


def error_response(error: DomainError) -> Response:
    return Response(status_code=error.status, content_type=JSON, body=json.dumps(error.envelope()))


def _validation_details(exc: RequestValidationError) -> dict[str, Any]:
    problems = []
    for err in exc.errors():
        location = [str(part) for part in err.get("loc", ()) if part not in ("body",)]
        if err.get("type") == "json_invalid":
            location = []
        problems.append({"field": ".".join(location), "problem": err.get("msg", "invalid")})
    return {"problems": problems}


def refuse_non_json_body(event: dict[str, Any]) -> dict[str, Any] | None:
    """Request bodies are JSON. Any other declared Content-Type is refused before the resolver's
    body parser sees it (a multipart type without a boundary would crash it into a 500)."""
    if not event.get("body"):
        return None
    declared = ""
    for name, value in (event.get("headers") or {}).items():
        if name.lower() == "content-type":
            declared = value
    essence = declared.split(";", 1)[0].strip().lower()
    if not essence or essence == JSON or essence.endswith("+json"):
        return None
    error = InvalidArgument("request bodies are JSON: send Content-Type: application/json", content_type=declared)
    return {
        "statusCode": error.status,
        "headers": {"Content-Type": JSON},
        "body": json.dumps(error.envelope()),
        "isBase64Encoded": False,
    }


def _refuse_unknown_query(app: APIGatewayHttpResolver, next_middleware: Any) -> Response:
    """A misspelt filter (`?atuhor=x`) must not silently widen a listing: every query parameter
    has to be one the route declares."""
    route = app.context.get("_route")
    given = set((app.current_event.query_string_parameters or {}).keys())
    if route is not None and given:
        declared = {p.alias for p in route.dependant.query_params}
        unknown = sorted(given - declared)
        if unknown:
            return error_response(
                InvalidArgument(f"unknown query parameter {unknown[0]!r}", unknown=unknown, allowed=sorted(declared))
            )
    return next_middleware(app)


def _refuse_control_characters(app: APIGatewayHttpResolver, next_middleware: Any) -> Response:
    """Route patterns end in `$`, which also matches before a trailing newline: `/x/id%0A` would
    reach the handler as `id`. No path names anything with a control character in it: not_found,
    as for a path no route matches (Powertools runs middlewares on that one too)."""
    path = app.current_event.path or ""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in path):
        return error_response(NotFound("no such route"))
    return next_middleware(app)


def new_resolver() -> APIGatewayHttpResolver:
    # A response that fails its own schema is our bug: 500, never a client error.
    app = APIGatewayHttpResolver(enable_validation=True, response_validation_error_http_code=500)

    app.use(middlewares=[_refuse_control_characters, _refuse_unknown_query])

    @app.exception_handler(DomainError)
    def _domain(exc: DomainError) -> Response:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    def _invalid(exc: RequestValidationError) -> Response:
        details = _validation_details(exc)
        first = details["problems"][0] if details["problems"] else {"field": "", "problem": "invalid"}
        where = f"{first['field']}: " if first["field"] else ""
        return error_response(InvalidArgument(f"{where}{first['problem']}", **details))

    @app.exception_handler(RecursionError)
    def _too_deep(exc: RecursionError) -> Response:
        # json.loads gives up on very deeply nested input ("[[[[…"): malformed input, not a bug.
        if "decoding" in str(exc):
            return error_response(InvalidArgument("the JSON body is nested too deeply"))
        logger.exception("unhandled error")
        return error_response(DomainError("internal error"))

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


def current_principal(app: APIGatewayHttpResolver) -> Principal:
    return principal_from_event(app.current_event.raw_event)


def lambda_entry(app: APIGatewayHttpResolver) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The one decorator stack, in the same order on every entry point: logger context with the
    correlation id, metrics, tracer. The Tracer (X-Ray SDK, which loads botocore) is built on the
    first invocation so that import stays cheap; the first call loads botocore anyway."""

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
    @metrics.log_metrics
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return refuse_non_json_body(event) or _traced(app)(event, context)

    return handler


@functools.cache
def _traced(app: APIGatewayHttpResolver) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    from aws_lambda_powertools import Tracer

    tracer = Tracer()

    @tracer.capture_lambda_handler
    def run(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return app.resolve(event, context)

    return run
