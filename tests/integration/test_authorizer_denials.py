"""Why was my token refused? The real authorizer handler over the tokens table on moto: one structured
log line per denial with the reason and the token id when one can be read, never the secret."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dovecote.admin.dynamo import DynamoTokenStore
from dovecote.admin.model import new_token
from dovecote.admin.service import TokenService
from dovecote.platform.observability import logger
from functions.authorizer import handler as authorizer
from infra.local.gateway import _context
from infra.routes import AUTHORIZER

ADMIN_ID = "a000000000000000"


@pytest.fixture
def tokens(moto_env: dict[str, Any]) -> Iterator[TokenService]:
    authorizer.service.cache_clear()  # bind the authorizer to this moto backend
    yield TokenService(DynamoTokenStore(table=moto_env["settings"].tokens_table, dynamodb=moto_env["dynamodb"]))
    authorizer.service.cache_clear()


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """The Powertools logger's own output (its JSON lines), as CloudWatch would receive it."""
    stream = io.StringIO()
    handler = logger.registered_handler
    previous = handler.setStream(stream)  # type: ignore[attr-defined]
    yield stream
    handler.setStream(previous)  # type: ignore[attr-defined]


def authorize(header: str) -> dict[str, Any]:
    event = {"type": "REQUEST", "routeKey": "GET /v1/whoami", "headers": {"authorization": header}}
    return dict(authorizer.handler(event, _context(AUTHORIZER)))


def refusals(stream: io.StringIO) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]
    return [line for line in lines if line.get("message") == "token refused"]


def test_each_denial_is_one_line_with_its_reason_and_token_id_never_the_secret(
    tokens: TokenService, log_lines: io.StringIO
) -> None:
    from dovecote.platform.principal import Principal

    admin = Principal("acme", "admin", token_id=ADMIN_ID)
    revoked, revoked_record = tokens.mint(admin, "acme", "caller", None)
    tokens.revoke(admin, revoked_record.token_id)
    past = TokenService(tokens.store, clock=lambda: datetime.now(UTC) - timedelta(days=3))
    expired, expired_record = past.mint(admin, "acme", "caller", None, expires_in_days=1)
    good, good_record = tokens.mint(admin, "acme", "caller", None)
    stranger_id, stranger = new_token()  # well formed, never stored
    forged = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")  # a real id, another secret
    truncated = good[:40]

    cases = [
        ("Bearer " + revoked, "revoked", revoked_record.token_id, revoked),
        ("Bearer " + expired, "expired", expired_record.token_id, expired),
        ("Bearer " + stranger, "unknown", stranger_id, stranger),
        ("Bearer " + forged, "unknown", good_record.token_id, forged),
        ("Bearer " + truncated, "malformed", good_record.token_id, truncated),
        ("Bearer not-a-dovecote-token", "malformed", None, "not-a-dovecote-token"),
        ("Basic dXNlcjpwYXNz", "malformed", None, "dXNlcjpwYXNz"),
    ]
    for header, reason, token_id, secret_bearing in cases:
        before = len(refusals(log_lines))
        assert authorize(header) == {"isAuthorized": False}, header
        lines = refusals(log_lines)
        assert len(lines) == before + 1, header  # exactly one line per denial
        line = lines[-1]
        assert line["level"] == "WARNING" and line["reason"] == reason, line
        assert line.get("token_id") == token_id, line
        assert secret_bearing not in json.dumps(line)

    text = log_lines.getvalue()
    for token in (revoked, expired, stranger, forged, good):
        assert token not in text
        assert token.split("_", 2)[2] not in text  # no secret, whole or alone
    assert "dXNlcjpwYXNz" not in text and "not-a-dovecote-token" not in text

    # A good token is authorized with what whoami needs, and logs no refusal.
    before = len(refusals(log_lines))
    answer = authorize("Bearer " + good)
    assert answer["isAuthorized"] is True
    assert answer["context"]["token_id"] == good_record.token_id
    assert answer["context"]["expires_at"] == good_record.expires_at
    assert len(refusals(log_lines)) == before and good not in log_lines.getvalue()
