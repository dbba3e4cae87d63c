"""The local runtime's control route (infra/local/control.py) in front of the gateway: loopback peers
only, the secret compared in constant time, everything else passed to the gateway untouched."""

from __future__ import annotations

import json
from typing import Any

import pytest
from werkzeug.test import Client
from werkzeug.wrappers import Response

from dovecote.admin.model import MintedToken
from dovecote.platform.errors import InvalidArgument
from infra.local.control import LocalControl

MINTED: list[dict[str, Any]] = []


def mint(body: dict[str, Any]) -> MintedToken:
    if body.get("role") == "boss":
        raise InvalidArgument("role must be one of admin, caller, worker", field="role")
    MINTED.append(body)
    return MintedToken("secret-token", "t1", body["authority"], body["role"], "", "", "2030-01-01T00:00:00Z")


def gateway(_environ: dict[str, Any], start_response: Any) -> Any:
    return Response("from the gateway", status=200)(_environ, start_response)


def post_tokens(client: Client, peer: str, **body: Any) -> Any:
    """POST /_dev/tokens with the control secret, from the peer address `peer` (`body`: json= or data=)."""
    return client.post(
        "/_dev/tokens", headers={"X-Dovecote-Dev-Control": "s3cret"}, environ_overrides={"REMOTE_ADDR": peer}, **body
    )


@pytest.fixture
def client() -> Client:
    MINTED.clear()
    return Client(LocalControl(gateway, secret="s3cret", mint=mint))


@pytest.mark.parametrize("peer", ["10.0.0.7", "192.168.1.2", "::ffff:10.0.0.1", "", "not-an-ip"])
def test_only_a_loopback_peer_reaches_the_route(client: Client, peer: str) -> None:
    answer = post_tokens(client, peer, json={"authority": "a", "role": "caller"})
    assert answer.status_code == 403 and answer.json["error"]["code"] == "forbidden"
    assert MINTED == []


@pytest.mark.parametrize("peer", ["127.0.0.1", "127.0.0.2", "::1"])
def test_a_loopback_peer_with_the_secret_mints(client: Client, peer: str) -> None:
    answer = post_tokens(client, peer, json={"authority": "a", "role": "caller"})
    assert answer.status_code == 200 and answer.json["token_id"] == "t1"
    assert MINTED == [{"authority": "a", "role": "caller"}]


def test_a_domain_error_is_its_envelope_and_the_rest_goes_to_the_gateway(client: Client) -> None:
    refused = post_tokens(client, "127.0.0.1", json={"authority": "a", "role": "boss"})
    assert refused.status_code == 400
    assert json.loads(refused.data) == {
        "error": {"code": "invalid_argument", "message": "role must be one of admin, caller, worker",
                  "details": {"field": "role"}}
    }  # fmt: skip
    too_big = post_tokens(client, "127.0.0.1", data=b"{" + b" " * 20_000 + b"}")
    assert too_big.status_code == 400
    assert client.get("/v1/health", environ_overrides={"REMOTE_ADDR": "10.0.0.7"}).data == b"from the gateway"
    assert MINTED == []


def test_the_dev_admin_token_is_renewed_when_it_has_less_than_a_day_left() -> None:
    from datetime import UTC, datetime

    from infra.local.runtime import admin_renewal_due

    now = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
    assert admin_renewal_due(None, now)  # not found (a DIR from before, or revoked and gone)
    assert admin_renewal_due("2026-01-11T11:59:59Z", now)
    assert not admin_renewal_due("2026-01-11T12:00:01Z", now)
    assert admin_renewal_due("2026-01-09T00:00:00Z", now)
