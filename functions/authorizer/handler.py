"""Lambda REQUEST authorizer (HTTP API, payload 2.0, simple responses).

It resolves `Authorization: Bearer <token>` to {authority, role, worker, agent, token_id,
expires_at}. An invalid, expired or revoked token is denied here (`isAuthorized: false`), so API
Gateway answers a bare 403 and no function runs for a stranger. Each denial is one structured log
line (level WARNING, so `dovecote dev` shows it too) with the reason (`malformed`, `unknown`,
`expired`, `revoked`) and the token id when one can be read: the id is public, the secret is never
logged. API Gateway caches a denial like an answer, so a token refused again within the cache TTL
logs no second line.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from dovecote.admin.model import claimed_id
from dovecote.admin.service import TokenService
from dovecote.platform import gc_pause, snapstart
from dovecote.platform.observability import logger


@lru_cache(maxsize=1)
def service() -> TokenService:
    from dovecote.admin.dynamo import DynamoTokenStore
    from dovecote.platform import aws
    from dovecote.platform.settings import get_settings

    return TokenService(DynamoTokenStore(table=get_settings().tokens_table, dynamodb=aws.client("dynamodb")))


snapstart.register(prime=service, forget=(service,))


def bearer_token(headers: dict[str, str] | None) -> str | None:
    for name, value in (headers or {}).items():
        if name.lower() == "authorization":
            scheme, _, token = value.strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


def refuse(reason: str, token: str | None) -> dict[str, Any]:
    facts = {"reason": reason}
    token_id = claimed_id(token) if token else None
    if token_id:
        facts["token_id"] = token_id
    logger.warning("token refused", extra=facts)
    return {"isAuthorized": False}


@gc_pause.resumes_gc
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    token = bearer_token(event.get("headers"))
    if token is None:
        return refuse("malformed", None)  # no `Bearer <token>` in the header
    principal, reason = service().authenticate(token)
    if principal is None:
        return refuse(reason, token)
    return {"isAuthorized": True, "context": principal.as_context()}
