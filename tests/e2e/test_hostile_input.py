"""Hostile input over real HTTP, against every route that takes a body or a query: each is a 4xx
with a stable code, never a 5xx, and nothing is stored (the security review's list, issue 3/9)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.routes import ROUTES
from tests.conftest import examples
from tests.e2e.conftest import bearer, local_http

BODY_ROUTES = [r for r in ROUTES if r.method in ("POST", "PUT") and r.authorized]
QUERY_ROUTES = [r for r in ROUTES if r.method == "GET" and r.authorized and "{" not in r.path]


def concrete(path: str) -> str:
    return path.replace("{", "").replace("}", "")  # {id} → id: a syntactically valid path segment


def roles(dev_runtime: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {role: bearer(token) for role, token in dev_runtime["tokens"].items()}


def send_as_admin(http: httpx.Client, dev_runtime: dict[str, Any], route: Any, body: str, content_type: str) -> Any:
    """`body` to the route (its path parameters filled in) with the admin token."""
    headers = {**roles(dev_runtime)["admin"], "Content-Type": content_type}
    return http.request(route.method, concrete(route.path), content=body, headers=headers)


HOSTILE_BODIES = {
    "deep": "[" * 1000 + "]" * 1000,
    "huge_int": '{"run": ' + "9" * 5001 + "}",
    "surrogate": '{"key": "\\ud800", "run": 1, "name": "n", "text": "x", "id": "\\udfff"}',
    "not_json": "{nope",
}


@pytest.mark.parametrize("route", BODY_ROUTES, ids=lambda r: f"{r.method} {r.path}")
@pytest.mark.parametrize("kind", sorted(HOSTILE_BODIES))
def test_hostile_bodies_are_400_on_every_route(
    http: httpx.Client, dev_runtime: dict[str, Any], route: Any, kind: str
) -> None:
    response = send_as_admin(http, dev_runtime, route, HOSTILE_BODIES[kind], "application/json")
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_argument"


EMPTY_BODY_IS_VALID = {"/v1/recall/rebuild"}


@pytest.mark.parametrize("route", BODY_ROUTES, ids=lambda r: f"{r.method} {r.path}")
@pytest.mark.parametrize("content_type", ["APPLICATION/JSON", "application/vnd.x+json"])
def test_json_content_types_in_any_spelling_never_500(
    http: httpx.Client, dev_runtime: dict[str, Any], route: Any, content_type: str
) -> None:
    response = send_as_admin(http, dev_runtime, route, "{}", content_type)
    # `{}` is a whole request where every field is optional (recall rebuild); elsewhere it is a 4xx.
    if route.path in EMPTY_BODY_IS_VALID:
        assert response.status_code == 200, response.text
    else:
        assert 400 <= response.status_code < 500, response.text
        assert "error" in response.json()


@pytest.mark.parametrize("route", QUERY_ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_a_lone_surrogate_in_a_query_is_400(http: httpx.Client, dev_runtime: dict[str, Any], route: Any) -> None:
    # %ED%A0%80 is U+D800 in (invalid) UTF-8; the gateway decodes it, the gate refuses it.
    response = http.get(concrete(route.path) + "?limit=%ED%A0%80", headers=roles(dev_runtime)["admin"])
    assert 400 <= response.status_code < 500, response.text


# Every route, public ones included: the gate runs before any of them (issue 15 item 3).
EVERY_ROUTE = [pytest.param(r, id=f"{r.method} {r.path}") for r in ROUTES]
NOT_UTF8 = b'{"key": "\xff\xfe", "run": 1, "name": "n", "text": "\xc3(", "id": "x\xed\xa0\x80"}'


@pytest.mark.parametrize("route", EVERY_ROUTE)
def test_a_body_that_is_not_utf8_is_400_on_every_route(
    http: httpx.Client, dev_runtime: dict[str, Any], route: Any
) -> None:
    response = http.request(
        route.method,
        concrete(route.path),
        content=NOT_UTF8,
        headers={**roles(dev_runtime)["admin"], "Content-Type": "application/json"},
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_argument"
    assert response.json()["error"]["message"] == "request body is not valid UTF-8"


@pytest.mark.parametrize("route", EVERY_ROUTE)
@pytest.mark.parametrize("query", ["key=a%C3%FF", "limit=1&%ED%A0%80=x"])
def test_a_query_that_is_not_utf8_is_400_on_every_route(
    http: httpx.Client, dev_runtime: dict[str, Any], route: Any, query: str
) -> None:
    response = http.request(route.method, concrete(route.path) + "?" + query, headers=roles(dev_runtime)["admin"])
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_argument"
    assert response.json()["error"]["message"] == "the query string is not valid UTF-8"


def test_undecodable_bytes_are_never_stored_as_replacement_characters(
    http: httpx.Client, dev_runtime: dict[str, Any]
) -> None:
    """The review's reproduction: `{"key":"\xff\xfe", ...}` was stored under the key "\ufffd\ufffd"."""
    caller = roles(dev_runtime)["caller"]
    key = f"utf8-{uuid.uuid4().hex}"
    for raw in (b"\xff\xfe", b"\xc3", b"\xed\xa0\x80"):
        body = b'{"key": "' + key.encode() + raw + b'", "run": 1, "name": "n", "text": "x"}'
        response = http.put("/v1/notes", content=body, headers={**caller, "Content-Type": "application/json"})
        assert response.status_code == 400, response.text
        text = b'{"key": "' + key.encode() + b'", "run": 1, "name": "n", "text": "x' + raw + b'"}'
        response = http.put("/v1/notes", content=text, headers={**caller, "Content-Type": "application/json"})
        assert response.status_code == 400, response.text
        garbled = raw.decode("utf-8", "replace")
        assert http.get("/v1/notes", params={"key": key + garbled}, headers=caller).json()["items"] == []
    assert http.get("/v1/notes", params={"key": key}, headers=caller).json()["items"] == []
    # A query that is not UTF-8 filters nothing either: it is refused, not read as U+FFFD.
    response = http.get(f"/v1/notes?key={key}%FF", headers=caller)
    assert response.status_code == 400, response.text
    # The character U+FFFD itself, sent as UTF-8, is valid text and stored as sent.
    sent = http.put("/v1/notes", json={"key": key + "\ufffd", "run": 1, "name": "n", "text": "x"}, headers=caller)
    assert sent.status_code == 200, sent.text
    assert [
        i["key"] for i in http.get("/v1/notes", params={"key": key + "\ufffd"}, headers=caller).json()["items"]
    ] == [key + "\ufffd"]


def test_an_out_of_range_instant_is_400(http: httpx.Client, dev_runtime: dict[str, Any]) -> None:
    response = http.get(
        "/v1/tasks", params={"updated_since": "0001-01-01T00:00:00+14:00"}, headers=roles(dev_runtime)["caller"]
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["details"]["field"] == "updated_since"


def test_ids_with_a_trailing_newline_are_refused_and_store_nothing(
    http: httpx.Client, dev_runtime: dict[str, Any]
) -> None:
    r = roles(dev_runtime)
    task = {
        "command_id": f"c-{uuid.uuid4().hex}",
        "workspace": "ws",
        "id": "t1\n",
        "context": "nl",
        "message": {"id": f"m-{uuid.uuid4().hex}", "parts": [{"media_type": "text/plain", "text": "x"}]},
    }
    assert http.post("/v1/tasks", json=task, headers=r["caller"]).status_code == 400
    assert http.get("/v1/contexts/nl/tasks", headers=r["caller"]).json()["items"] == []
    for body in (
        {"authority": "dev\n", "role": "caller"},
        {"authority": "dev", "role": "worker", "worker": "w1\n"},
        {"authority": "dev", "role": "caller", "agent": "claude\n"},
    ):
        response = http.post("/v1/admin/tokens", json=body, headers=r["admin"])
        assert response.status_code == 400, (body, response.text)


# Text that mixes what breaks naive code: lone surrogates, newlines, NUL and other controls.
HOSTILE_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(["\ud800", "\udfff", "\n", "\r", "\x00", "\x1b", "\u2028", "a", "é"]),
        st.characters(codec="utf-8"),
    ),
    min_size=1,
    max_size=12,
)


def _has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(text=HOSTILE_TEXT)
def test_hostile_text_in_note_fields_is_refused_or_round_trips(dev_runtime: dict[str, Any], text: str) -> None:
    caller = roles(dev_runtime)["caller"]
    key = f"hostile-{uuid.uuid4().hex}"
    payload = json.dumps({"key": key, "run": 1, "name": text, "author": "", "text": text})
    with local_http(dev_runtime["endpoint"], timeout=30) as http:
        response = http.put("/v1/notes", content=payload, headers={**caller, "Content-Type": "application/json"})
        stored = http.get("/v1/notes", params={"key": key}, headers=caller).json()["items"]
    if _has_surrogate(text):
        assert response.status_code == 400, response.text
        assert stored == []
    else:
        # Any valid Unicode is a legal note name and body: stored exactly, listed once.
        assert response.status_code == 200, response.text
        assert [i["name"] for i in stored] == [text]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(text=HOSTILE_TEXT)
def test_hostile_text_as_a_task_id_is_400_and_stores_nothing(dev_runtime: dict[str, Any], text: str) -> None:
    caller = roles(dev_runtime)["caller"]
    context = f"h-{uuid.uuid4().hex}"
    body = {
        "command_id": f"c-{uuid.uuid4().hex}",
        "workspace": "ws",
        "id": text,
        "context": context,
        "message": {"id": f"m-{uuid.uuid4().hex}", "parts": [{"media_type": "text/plain", "text": text}]},
    }
    with local_http(dev_runtime["endpoint"], timeout=30) as http:
        response = http.post(
            "/v1/tasks", content=json.dumps(body), headers={**caller, "Content-Type": "application/json"}
        )
        listed = http.get(f"/v1/contexts/{context}/tasks", headers=caller).json()["items"]
    # HOSTILE_TEXT always holds a character outside the id alphabet or is a valid id.
    import re

    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}", text):
        assert response.status_code == 201
    else:
        assert response.status_code == 400, response.text
        assert listed == []
