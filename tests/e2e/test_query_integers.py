"""Integer query parameters over real HTTP against `dovecote dev`: every route's integer in a query
string is read only from its canonical decimal text (platform/request_text.py QUERY_INT). Each odd
spelling that int() or pydantic's lax mode would read (" 1", "1\\n", "+1", "01", "1_0" as 10, a
full-width digit) is 400 invalid_argument naming the parameter, and the canonical value is served.

The routes and their integer parameters are read from the published document, so a route that
gains one is in the table below or this test fails."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from functions.admin_api.handler import openapi_document
from tests.e2e.conftest import bearer, local_http

# Percent-encoded as sent on the wire (`+` is a space in a query string).
ODD_INTEGERS = [
    "1%0A",
    "%0A1",
    "%201",
    "1%20",
    "1%0D",
    "%091",
    "%2B1",
    "+1",
    "01",
    "00",
    "-0",
    "--1",
    "1_0",
    "1.0",
    "1e0",
    "0x1",
    "1-",
    "%EF%BC%91",  # U+FF11 FULLWIDTH DIGIT ONE: int() reads it as 1
    "%D9%A1",  # U+0661 ARABIC-INDIC DIGIT ONE
    "abc",
    "",
]

# (method path) → (role, extra query, the canonical value of each integer, the status it answers).
# The task (`task_id`, `id`) and `context` are the test's own (one message, leased once: fence 1).
ROUTES: dict[str, tuple[str, str, dict[str, str], int]] = {
    "GET /v1/admin/tokens": ("admin", "", {"limit": "10"}, 200),
    "GET /v1/contexts/{context}/tasks": ("caller", "", {"limit": "10"}, 200),
    "GET /v1/leases": ("worker", "", {"limit": "10"}, 200),
    "GET /v1/memory": ("caller", "scope=s&", {"limit": "10"}, 200),
    "GET /v1/memory/relations": ("caller", "scope=s&", {"limit": "10"}, 200),
    # No such write: 404 is an answer past the query's check.
    "GET /v1/memory/writes/{write_id}": ("caller", "", {"wait": "0"}, 404),
    "GET /v1/notes": ("caller", "", {"run": "1", "limit": "10"}, 200),
    # No such transcript: 404 past the query's check; `around` may be negative.
    "GET /v1/recall/read/{ref}": (
        "caller",
        "",
        {"budget": "100", "more": "1", "around": "-1", "window": "10"},
        404,
    ),
    "GET /v1/recall/search": ("caller", "", {"limit": "10", "min_messages": "0"}, 200),
    "GET /v1/recall/topics": ("caller", "", {"limit": "10"}, 200),
    "GET /v1/tasks": ("caller", "", {"limit": "10"}, 200),
    "GET /v1/tasks/{task_id}/events": ("caller", "", {"after": "1", "limit": "10"}, 200),
    "GET /v1/tasks/{task_id}/grants": ("caller", "", {"after": "1", "limit": "10"}, 200),
    "GET /v1/tasks/{task_id}/messages": ("caller", "", {"after": "1", "limit": "10"}, 200),
    "GET /v1/tasks/{id}/stream": ("caller", "", {"after": "1"}, 200),
}
# What fills each path parameter: unknown ones answer 404, after the query's check.
NO_SUCH = {"write_id": "w-none", "ref": "abcdef12:12345678"}


def integer_parameters() -> set[tuple[str, str]]:
    """(method path, name) of every integer query parameter the published document declares."""
    found = set()
    for path, operations in openapi_document()["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                types = {schema.get("type"), *(s.get("type") for s in schema.get("anyOf", []))}
                if parameter["in"] == "query" and "integer" in types:
                    found.add((f"{method.upper()} {path}", parameter["name"]))
    return found


PARAMETERS = sorted(integer_parameters())


def test_the_table_holds_every_integer_query_parameter() -> None:
    assert {(route, name) for route, (_, _, values, _) in ROUTES.items() for name in values} == set(PARAMETERS)


@pytest.fixture(scope="module")
def task(dev_runtime: dict[str, Any]) -> dict[str, str]:
    """A task with one message, leased once (fence 1): `after=1` is in range on all three logs."""
    tokens = {role: bearer(token) for role, token in dev_runtime["tokens"].items()}
    task_id, context = f"t-{uuid.uuid4().hex[:10]}", f"ctx-{uuid.uuid4().hex[:10]}"
    body = {
        "command_id": f"c-{uuid.uuid4().hex}",
        "workspace": "ws",
        "id": task_id,
        "context": context,
        "message": {"id": f"m-{uuid.uuid4().hex}", "parts": [{"media_type": "text/plain", "text": "hi"}]},
    }
    with local_http(dev_runtime["endpoint"], timeout=30) as http:
        created = http.post("/v1/tasks", json=body, headers=tokens["caller"])
        assert created.status_code == 201, created.text
        leased = http.post(
            f"/v1/tasks/{task_id}/lease", json={"command_id": f"c-{uuid.uuid4().hex}"}, headers=tokens["worker"]
        )
        assert leased.status_code == 200, leased.text
    return {"task_id": task_id, "id": task_id, "context": context}


def _get(http: httpx.Client, url: str, headers: dict[str, str]) -> tuple[int, str]:
    """The status and body of a GET; a stream is read only up to its status line."""
    with http.stream("GET", url, headers=headers) as response:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return response.status_code, ""
        return response.status_code, response.read().decode("utf-8")


@pytest.mark.parametrize(("route", "name"), PARAMETERS, ids=lambda v: str(v))
def test_an_integer_query_is_its_canonical_decimal_text(
    http: httpx.Client, dev_runtime: dict[str, Any], task: dict[str, str], route: str, name: str
) -> None:
    role, extra, values, served = ROUTES[route]
    headers = bearer(dev_runtime["tokens"][role])
    path = route.split(" ", 1)[1].format(**task, **NO_SUCH)
    others = "".join(f"&{k}={v}" for k, v in values.items() if k != name)
    status, body = _get(http, f"{path}?{extra}{name}={values[name]}{others}", headers)
    assert status == served, body
    wrong = {}
    for odd in ODD_INTEGERS:
        status, body = _get(http, f"{path}?{extra}{name}={odd}{others}", headers)
        error = json.loads(body).get("error", {}) if status == 400 else {}
        if status != 400 or error.get("code") != "invalid_argument" or name not in error.get("message", ""):
            wrong[odd] = (status, body[:200])
    assert wrong == {}
