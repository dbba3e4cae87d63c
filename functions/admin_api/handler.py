"""Admin and meta routes: health, the OpenAPI document, whoami, tokens (mint, list, revoke). The token
service answers typed values (the minted token and its record; a Page of TokenListing), which each
route turns into its response model."""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from pydantic import Field, StrictStr
from typing_extensions import NotRequired, TypedDict

import dovecote
from dovecote.admin.model import MAX_TOKEN_DAYS
from dovecote.admin.service import LIST_MAX, TokenService
from dovecote.platform.http import (
    ApiModel,
    current_principal,
    document_routes,
    lambda_entry,
    new_resolver,
    responses,
)
from dovecote.platform.schema import (
    ID,
    EdgeModel,
    JsonInt,
    QueryInt,
    RequestModel,
    bounded,
    one_of,
    optional_int,
    with_schema,
)

app = new_resolver()

# Every API function whose routes the published OpenAPI document covers. The route-table test
# checks that this list names every API function in infra/routes.py.
API_MODULES = (
    "functions.admin_api.handler",
    "functions.notes_api.handler",
    "functions.tasks_api.handler",
    "functions.recall_api.handler",
    "functions.memory_api.handler",
    "functions.push_api.handler",
)


@lru_cache(maxsize=1)
def service() -> TokenService:
    from dovecote.admin.dynamo import DynamoTokenStore
    from dovecote.platform import aws
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.settings import get_settings

    settings = get_settings()
    return TokenService(
        DynamoTokenStore(table=settings.tokens_table, dynamodb=aws.client("dynamodb")),
        default_days=settings.token_days,
        admin_days=settings.admin_token_days,
        signer_factory=lambda: CursorSigner(aws.cursor_key()),
    )


class Health(EdgeModel):
    status: str
    version: str


class TokenBody(RequestModel):
    """A worker token needs a worker id, a caller token has none, an admin token may have one. Only a
    caller token may carry an agent claim."""

    model_config = with_schema(
        {
            "oneOf": [
                {"properties": {"role": {"const": "caller"}}, "not": {"required": ["worker"]}},
                {
                    "properties": {"role": {"const": "worker"}},
                    "required": ["worker"],
                    "not": {"required": ["agent"]},
                },
                {"properties": {"role": {"const": "admin"}}, "not": {"required": ["agent"]}},
            ]
        }
    )
    authority: StrictStr = Field(json_schema_extra=ID, description="the admin's own authority")
    role: StrictStr = Field(json_schema_extra=one_of("caller", "worker", "admin"))
    worker: StrictStr | None = Field(default=None, json_schema_extra=ID, description="required for worker tokens")
    agent: StrictStr | None = Field(
        default=None,
        json_schema_extra=ID,
        description="caller tokens only: the only note author this token may write or delete as",
    )
    expires_in_days: JsonInt | None = optional_int(1, MAX_TOKEN_DAYS, "default from settings; admin tokens are short")


class TokenOut(EdgeModel):
    token: str = Field(description="shown once: only its hash is stored")
    token_id: str
    authority: str
    role: str
    worker: str
    agent: str
    expires_at: str


class WhoAmI(TypedDict):
    """The principal a token stands for. `worker` and `agent` are present only when the token has them."""

    # A TypedDict, not an ApiModel: absent fields stay absent without a wrap serializer, which would
    # leave the documented response schema empty.
    authority: Annotated[str, Field(json_schema_extra=ID)]
    role: Literal["caller", "worker", "admin"]
    worker: NotRequired[Annotated[str, Field(json_schema_extra=ID, description="the worker id (worker tokens)")]]
    agent: NotRequired[
        Annotated[str, Field(json_schema_extra=ID, description="the only note author this token may write as")]
    ]
    token_id: Annotated[str, Field(json_schema_extra={"pattern": "^[0-9a-f]{16}$"})]
    expires_at: Annotated[str, Field(json_schema_extra={"format": "date-time"}, description="RFC 3339, UTC")]


class TokenListItem(ApiModel):
    token_id: str
    role: str
    worker: str
    agent: str
    created_at: str
    expires_at: str
    minted_by: str
    revoked_at: str | None = None


class TokenListOut(ApiModel):
    items: list[TokenListItem]
    cursor: str | None = None


@app.get("/v1/health", tags=["meta"])
def health() -> Health:
    """Liveness and the service version. No token."""
    return Health(status="ok", version=dovecote.__version__)


@app.get("/v1/openapi.json", tags=["meta"])
def openapi() -> dict[str, Any]:
    """This document: the OpenAPI description of every route. No token."""
    return openapi_document()


# Powertools documents any type it can validate; `responses` is typed for models only.
@app.get("/v1/whoami", tags=["meta"], responses=responses(200, WhoAmI, 400, 401, 403))  # type: ignore[arg-type]
def whoami() -> WhoAmI:
    """Who this token is: its authority, role, worker, agent claim, id and expiry. Any valid token.

    The answer comes from the authorizer's context (no table read): it is what every other route
    sees of the same token."""
    p = current_principal(app)
    answer = WhoAmI(authority=p.authority, role=p.role, token_id=p.token_id, expires_at=p.expires_at)
    if p.worker:
        answer["worker"] = p.worker
    if p.agent:
        answer["agent"] = p.agent
    return answer


@app.post("/v1/admin/tokens", tags=["admin"], responses=responses(201, TokenOut, 400, 401, 403, 503))
def create_token(body: Annotated[TokenBody, Body()]) -> Response[TokenOut]:
    """Mint a bearer token. Admin only, inside the admin's own authority. Shown once."""
    token, record = service().mint(
        current_principal(app),
        body.authority,
        body.role,
        body.worker,
        agent=body.agent,
        expires_in_days=body.expires_in_days,
    )
    p = record.principal
    out = TokenOut(
        token=token,
        token_id=record.token_id,
        authority=p.authority,
        role=p.role,
        worker=p.worker,
        agent=p.agent,
        expires_at=record.expires_at,
    )
    return Response(status_code=201, content_type="application/json", body=out)


@app.get("/v1/admin/tokens", tags=["admin"], responses=responses(200, TokenListOut, 400, 401, 403, 429, 503))
def list_tokens(
    limit: Annotated[QueryInt | None, Query(json_schema_extra=bounded(0, LIST_MAX))] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> TokenListOut:
    """The authority's tokens, newest first: never their secrets or hashes. Admin only."""
    return TokenListOut.model_validate(service().list(current_principal(app), limit, cursor))


@app.delete("/v1/admin/tokens/<token_id>", tags=["admin"], responses=responses(204, None, 401, 403, 404, 429, 503))
def revoke_token(token_id: Annotated[str, Path()]) -> Response[None]:
    """Revoke a token of the admin's authority. It stops working once the authorizer's cache
    expires (at most the configured TTL). Revoking twice is harmless."""
    service().revoke(current_principal(app), token_id)
    return Response(status_code=204)


@lru_cache(maxsize=1)
def openapi_document() -> dict[str, Any]:
    """Powertools generates one document per resolver; the API spans several functions, so their
    documents are merged here (paths and component schemas)."""
    from aws_lambda_powertools.event_handler.openapi.models import SecurityScheme  # noqa: F401

    merged: dict[str, Any] = {}
    for name in API_MODULES:
        module = importlib.import_module(name)
        document_routes(module.app)
        doc = module.app.get_openapi_schema(title="Dovecote", version=dovecote.__version__).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        if not merged:
            merged = doc
            merged.setdefault("components", {}).setdefault("schemas", {})
            continue
        merged["paths"].update(doc.get("paths", {}))
        for schema_name, schema in doc.get("components", {}).get("schemas", {}).items():
            known = merged["components"]["schemas"].setdefault(schema_name, schema)
            # Two functions naming different models alike would silently document one for both.
            if known != schema:
                raise ValueError(f"two API modules define a different schema named {schema_name!r}")
    from functions.streams_api.handler import openapi_paths

    merged["paths"].update(openapi_paths())
    from dovecote.platform.http import ErrorEnvelope, GatewayMessage

    for model in (ErrorEnvelope, GatewayMessage):
        model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        merged["components"]["schemas"].update(model_schema.pop("$defs", {}))
        merged["components"]["schemas"][model.__name__] = model_schema
    envelope = {"$ref": "#/components/schemas/ErrorEnvelope"}
    for operations in merged["paths"].values():
        for operation in operations.values():
            # Powertools documents FastAPI's 422; Dovecote answers bad input 400 invalid_argument.
            operation.get("responses", {}).pop("422", None)
            # A 204 has no body (Powertools documents the handler's `None` return as a JSON null).
            operation.get("responses", {}).get("204", {}).pop("content", None)
            # Any route can fail on our side: 500 with the envelope (code internal or corrupt_store),
            # never Powertools' response-validation shape.
            operation.setdefault("responses", {})["500"] = {
                "description": "internal error (code internal, or corrupt_store)",
                "content": {"application/json": {"schema": envelope}},
            }
    # Powertools' own error shapes (422 and its response-validation error) are never answered here.
    for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        merged["components"]["schemas"].pop(unused, None)
    merged["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    for path, operations in merged["paths"].items():
        if path in ("/v1/health", "/v1/openapi.json", "/.well-known/jwks.json"):
            continue
        for operation in operations.values():
            operation["security"] = [{"bearer": []}]
    return merged


handler = lambda_entry(app, service)
