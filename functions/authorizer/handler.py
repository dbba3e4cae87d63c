"""Lambda REQUEST authorizer (HTTP API, payload 2.0, simple responses).

It resolves `Authorization: Bearer <token>` to {authority, role, worker, agent, token_id}. An
invalid, expired or revoked token is denied here (`isAuthorized: false`), so API Gateway answers a
bare 403 and no function runs for a stranger. The reason is logged, never the token.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from dovecote.admin.service import TokenService
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
        logger.info("request refused", extra={"reason": "no bearer token"})
        return {"isAuthorized": False}
    principal, reason = service().authenticate(token)
    if principal is None:
        logger.info("request refused", extra={"reason": reason})
        return {"isAuthorized": False}
    return {"isAuthorized": True, "context": principal.as_context()}
