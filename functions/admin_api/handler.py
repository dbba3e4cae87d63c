"""Admin and meta routes: health, the OpenAPI document, token minting."""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from pydantic import BaseModel, ConfigDict, StrictStr

import dovecote
from dovecote.admin.tokens import TokenService
from dovecote.platform.http import current_principal, lambda_entry, new_resolver, responses

app = new_resolver()

# Every API function whose routes the published OpenAPI document covers. The route-table test
# checks that this list names every API function in infra/routes.py.
API_MODULES = (
    "functions.admin_api.handler",
    "functions.notes_api.handler",
    "functions.tasks_api.handler",
    "functions.memory_api.handler",
)


@lru_cache(maxsize=1)
def service() -> TokenService:
    from dovecote.admin.dynamo import DynamoTokenStore
    from dovecote.platform import aws
    from dovecote.platform.settings import get_settings

    return TokenService(DynamoTokenStore(table=get_settings().tokens_table, dynamodb=aws.client("dynamodb")))


class Health(BaseModel):
    status: str
    version: str


class TokenBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    authority: StrictStr
    role: StrictStr
    worker: StrictStr | None = None


class TokenOut(BaseModel):
    token: str
    authority: str
    role: str
    worker: str


@app.get("/v1/health", tags=["meta"])
def health() -> Health:
    return Health(status="ok", version=dovecote.__version__)


@app.get("/v1/openapi.json", tags=["meta"])
def openapi() -> dict[str, Any]:
    return openapi_document()


@app.post("/v1/admin/tokens", tags=["admin"], responses=responses(201, TokenOut, 400, 401, 403, 503))
def create_token(body: Annotated[TokenBody, Body()]) -> Response[TokenOut]:
    """Mint a bearer token. Admin only, inside the admin's own authority. Shown once."""
    token, principal = service().mint(current_principal(app), body.authority, body.role, body.worker)
    out = TokenOut(token=token, authority=principal.authority, role=principal.role, worker=principal.worker)
    return Response(status_code=201, content_type="application/json", body=out)


@lru_cache(maxsize=1)
def openapi_document() -> dict[str, Any]:
    """Powertools generates one document per resolver; the API spans several functions, so their
    documents are merged here (paths and component schemas)."""
    from aws_lambda_powertools.event_handler.openapi.models import SecurityScheme  # noqa: F401

    merged: dict[str, Any] = {}
    for name in API_MODULES:
        module = importlib.import_module(name)
        doc = module.app.get_openapi_schema(title="Dovecote", version=dovecote.__version__).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        if not merged:
            merged = doc
            merged.setdefault("components", {}).setdefault("schemas", {})
            continue
        merged["paths"].update(doc.get("paths", {}))
        merged["components"]["schemas"].update(doc.get("components", {}).get("schemas", {}))
    from dovecote.platform.http import ErrorEnvelope, GatewayMessage

    for model in (ErrorEnvelope, GatewayMessage):
        model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        merged["components"]["schemas"].update(model_schema.pop("$defs", {}))
        merged["components"]["schemas"][model.__name__] = model_schema
    for operations in merged["paths"].values():
        for operation in operations.values():
            # Powertools documents FastAPI's 422; Dovecote answers bad input 400 invalid_argument.
            operation.get("responses", {}).pop("422", None)
    for unused in ("HTTPValidationError", "ValidationError"):
        merged["components"]["schemas"].pop(unused, None)
    merged["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    for path, operations in merged["paths"].items():
        if path in ("/v1/health", "/v1/openapi.json"):
            continue
        for operation in operations.values():
            operation["security"] = [{"bearer": []}]
    return merged


handler = lambda_entry(app)
