"""The one request gate every API function runs before its resolver (platform/http.py): the
principal first, then text and body checks. Each refusal is a 4xx envelope, never a 500."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from dovecote.platform.http import MAX_JSON_DEPTH, PUBLIC_ROUTES, gate_request
from infra.routes import ROUTES

AUTHORIZED = {"requestContext": {"authorizer": {"lambda": {"authority": "acme", "role": "caller"}}}}


def event(body: str | None = None, content_type: str = "application/json", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "routeKey": "PUT /v1/notes",
        "headers": {"content-type": content_type},
        **AUTHORIZED,
        **extra,
    }
    if body is not None:
        out["body"] = body
    return out


def refused(result: dict[str, Any] | None) -> tuple[int, str]:
    assert result is not None
    return result["statusCode"], json.loads(result["body"])["error"]["code"]


def test_public_routes_match_the_route_table() -> None:
    assert {f"{r.method} {r.path}" for r in ROUTES if not r.authorized} == PUBLIC_ROUTES


def test_the_principal_is_checked_before_the_body_is_even_parsed() -> None:
    deep = "[" * 5000 + "]" * 5000
    stranger = {"routeKey": "PUT /v1/notes", "headers": {"content-type": "application/json"}, "body": deep}
    assert refused(gate_request(stranger)) == (401, "unauthenticated")
    assert gate_request({"routeKey": "GET /v1/health", "headers": {}}) is None


@pytest.mark.parametrize(
    "body",
    [
        "[" * 1000 + "]" * 1000,  # nested 1,000 deep
        "[" * 100_000 + "]" * 100_000,  # deeper than the C parser's recursion limit
        '{"key": "' + "\\ud800" + '", "run": 1, "name": "n"}',  # a lone surrogate
        '{"key": "k", "run": 1, "name": "n", "text": "a\\udfffb"}',
        '{"\\ud800": 1}',  # in a key
        '{"key": "k", "run": ' + "9" * 5001 + ', "name": "n"}',  # a 5,001-digit integer
        "{not json",
        '{"a": 1} trailing',
    ],
)
def test_bad_json_bodies_are_400(body: str) -> None:
    assert refused(gate_request(event(body))) == (400, "invalid_argument")


def test_the_depth_limit_is_exact() -> None:
    ok = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert gate_request(event(ok)) is None
    deeper = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    assert refused(gate_request(event(deeper))) == (400, "invalid_argument")


@pytest.mark.parametrize(
    "content_type", ["APPLICATION/JSON", "application/vnd.x+json", "Application/Json; charset=UTF-8"]
)
def test_json_content_types_in_any_case_are_normalised(content_type: str) -> None:
    e = event('{"a": "é"}', content_type)
    assert gate_request(e) is None
    assert e["headers"] == {"content-type": "application/json"}
    assert json.loads(e["body"]) == {"a": "é"}


def test_a_base64_body_is_decoded_for_the_resolver() -> None:
    e = event(base64.b64encode('{"a": "é"}'.encode()).decode(), "application/vnd.x+json", isBase64Encoded=True)
    assert gate_request(e) is None
    assert e["isBase64Encoded"] is False and json.loads(e["body"]) == {"a": "é"}
    bad = event(base64.b64encode(b'{"a": "\xff"}').decode(), isBase64Encoded=True)
    assert refused(gate_request(bad)) == (400, "invalid_argument")


@pytest.mark.parametrize("content_type", ["text/plain", "multipart/form-data", "application/x-www-form-urlencoded"])
def test_other_content_types_are_refused(content_type: str) -> None:
    assert refused(gate_request(event('{"a": 1}', content_type))) == (400, "invalid_argument")


def test_lone_surrogates_in_the_query_or_path_are_400() -> None:
    assert refused(gate_request(event(queryStringParameters={"key": "\ud800"}))) == (400, "invalid_argument")
    assert refused(gate_request(event(pathParameters={"ref": "a\udc00"}))) == (400, "invalid_argument")
