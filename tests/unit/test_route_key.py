"""The route that runs is the one API Gateway matched (issue 15 item 1). The gateway routes on the raw
path, then hands the function a decoded one: an id sent as `x%2Fsecret` arrives as `x/secret`, which
Powertools alone would give to a sibling route of the same function. Run through the real entry point
(`lambda_entry` over `new_resolver`)."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest

from dovecote.platform.http import _route_key, _unnamed, lambda_entry, new_resolver
from infra.routes import FUNCTIONS, ROUTES
from tests.support.lambda_events import Context, http_event

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")
RAN: list[str] = []


app = new_resolver()


@app.get("/v1/probe/<name>")
def read(name: str) -> dict[str, Any]:
    RAN.append(f"read {name}")
    return {"name": name}


@app.delete("/v1/probe/<name>/secret")
def destroy(name: str) -> dict[str, Any]:
    RAN.append(f"destroy {name}")
    return {"destroyed": name}


@app.get("/v1/probe/<name>/secret")
def peek(name: str) -> dict[str, Any]:
    RAN.append(f"peek {name}")
    return {"secret": name}


handler = lambda_entry(app)


def event(method: str, route_key: str, decoded_path: str) -> dict[str, Any]:
    return http_event(method, route_key, decoded_path)


@pytest.mark.parametrize("decoded", ["/v1/probe/x/secret", "/v1/probe/../probe/x/secret"])
def test_a_decoded_slash_never_reaches_a_sibling_route(decoded: str) -> None:
    RAN.clear()
    answer = handler(event("GET", "GET /v1/probe/{name}", decoded), Context())
    assert answer["statusCode"] == 404
    assert json.loads(answer["body"])["error"]["code"] == "not_found"
    assert RAN == []


def test_the_matched_route_runs() -> None:
    RAN.clear()
    answer = handler(event("GET", "GET /v1/probe/{name}", "/v1/probe/x"), Context())
    assert answer["statusCode"] == 200, answer
    assert RAN == ["read x"]
    answer = handler(event("GET", "GET /v1/probe/{name}/secret", "/v1/probe/x/secret"), Context())
    assert answer["statusCode"] == 200
    assert RAN == ["read x", "peek x"]


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_every_table_route_is_served_under_its_own_route_key(route) -> None:  # type: ignore[no-untyped-def]
    """The check compares keys, so a function's routes must spell them exactly as the table does."""
    module = importlib.import_module(FUNCTIONS[route.function].module)
    served = {_route_key(r) for routes in (module.app._static_routes, module.app._dynamic_routes) for r in routes}
    assert _unnamed(f"{route.method} {route.path}") in served
