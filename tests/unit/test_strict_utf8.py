"""Strict bytes at the edge (issue 15 item 3): a request body or query string that is not valid
UTF-8 is `400 invalid_argument`, whichever way the gateway hands it over, and is never turned into
U+FFFD. Over HTTP, on every route: tests/e2e/test_hostile_input.py."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from dovecote.platform.http import gate_request
from infra.local.gateway import Gateway

AUTHORIZED = {"requestContext": {"authorizer": {"lambda": {"authority": "acme", "role": "caller"}}}}
INVALID = [b"\xff\xfe", b"\xc3", b"\xc3(", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x80"]
VALID = ["é", "\ufffd", "日本", "\U0001f600", "a+b"]


def event(**extra: Any) -> dict[str, Any]:
    return {"routeKey": "PUT /v1/notes", "headers": {"content-type": "application/json"}, **AUTHORIZED, **extra}


def refusal(result: dict[str, Any] | None) -> tuple[int, str, str]:
    assert result is not None
    error = json.loads(result["body"])["error"]
    return result["statusCode"], error["code"], error["message"]


def body_of(raw: bytes) -> bytes:
    return b'{"key": "k' + raw + b'", "run": 1, "name": "n"}'


@pytest.mark.parametrize("raw", INVALID)
def test_a_base64_body_that_is_not_utf8_is_400(raw: bytes) -> None:
    """API Gateway's shape for a body it treats as binary."""
    e = event(body=base64.b64encode(body_of(raw)).decode(), isBase64Encoded=True)
    assert refusal(gate_request(e)) == (400, "invalid_argument", "request body is not valid UTF-8")


@pytest.mark.parametrize("raw", INVALID)
def test_a_text_body_with_undecodable_bytes_is_400(raw: bytes) -> None:
    """The local gateway's shape: a text body whose bytes are not UTF-8 keeps them as lone
    surrogates (surrogateescape), which the gate refuses instead of reading U+FFFD."""
    e = event(body=body_of(raw).decode("utf-8", "surrogateescape"), isBase64Encoded=False)
    assert refusal(gate_request(e)) == (400, "invalid_argument", "request body is not valid UTF-8")


@pytest.mark.parametrize("text", VALID)
def test_valid_utf8_bodies_pass_in_both_shapes(text: str) -> None:
    raw = body_of(text.encode())
    for e in (
        event(body=raw.decode(), isBase64Encoded=False),
        event(body=base64.b64encode(raw).decode(), isBase64Encoded=True),
    ):
        assert gate_request(e) is None
        assert json.loads(e["body"])["key"] == "k" + text


@pytest.mark.parametrize("raw", INVALID)
def test_a_query_string_that_is_not_utf8_is_400(raw: bytes) -> None:
    from urllib.parse import quote_from_bytes

    escaped = "key=" + quote_from_bytes(raw)  # API Gateway keeps rawQueryString percent-encoded
    literal = "key=" + raw.decode("latin-1")  # the local gateway: raw bytes as Latin-1 characters
    for raw_query in (escaped, literal, "a=1&" + escaped + "&b=2"):
        e = event(rawQueryString=raw_query, queryStringParameters={"key": "k\ufffd"})
        assert refusal(gate_request(e)) == (400, "invalid_argument", "the query string is not valid UTF-8")


@pytest.mark.parametrize("text", VALID)
def test_valid_utf8_query_strings_pass(text: str) -> None:
    from urllib.parse import quote

    for raw_query in ("key=" + quote(text), "key=" + text.encode().decode("latin-1")):
        assert gate_request(event(rawQueryString=raw_query, queryStringParameters={"key": text})) is None


def test_the_local_gateway_keeps_undecodable_body_bytes_for_the_gate() -> None:
    """The local gateway used to decode with errors="replace": `{"key":"\\xff\\xfe"}` reached the
    notes service as the key "\\ufffd\\ufffd" and was stored."""
    from werkzeug.test import EnvironBuilder
    from werkzeug.wrappers import Request

    from infra.routes import ROUTES

    route = next(r for r in ROUTES if r.method == "PUT" and r.path == "/v1/notes")
    raw = b'{"key":"\xff\xfe","run":1,"name":"n","text":"x"}'
    request = Request(
        EnvironBuilder(method="PUT", path="/v1/notes", data=raw, content_type="application/json").get_environ()
    )
    e = Gateway._event(request, route, {}, raw, "/v1/notes")
    e.update(AUTHORIZED)
    assert refusal(gate_request(e)) == (400, "invalid_argument", "request body is not valid UTF-8")
