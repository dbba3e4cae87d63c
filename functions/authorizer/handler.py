"""Lambda REQUEST authorizer (HTTP API, payload 2.0, simple responses).

It resolves `Authorization: Bearer <token>` through the SHA-256 token table to {authority, role,
worker}. An unknown token is still answered `isAuthorized: true`, with no authority in the context:
HTTP APIs cannot shape an authorizer denial (it becomes a bare 403), and API.md wants 401 with the
error envelope. Every API handler reads the principal through `principal_from_event`, which
refuses a context without an authority, so no route runs unauthenticated.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from dovecote.admin.tokens import TokenService
from dovecote.platform.observability import logger


@lru_cache(maxsize=1)
def service() -> TokenService:
    from dovecote.admin.dynamo import DynamoTokenStore
    from dovecote.platform import aws
    from dovecote.platform.settings import get_settings

    return TokenService(DynamoTokenStore(table=get_settings().tokens_table, dynamodb=aws.client("dynamodb")))


def bearer_token(headers: dict[str, str] | None) -> str | None:
    for name, value in (headers or {}).items():
        if name.lower() == "authorization":
            scheme, _, token = value.strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    token = bearer_token(event.get("headers"))
    if token is None:
        return {"isAuthorized": True, "context": {"reason": "missing bearer token"}}
    principal = service().authenticate(token)
    if principal is None:
        return {"isAuthorized": True, "context": {"reason": "invalid bearer token"}}
    return {"isAuthorized": True, "context": principal.as_context()}
