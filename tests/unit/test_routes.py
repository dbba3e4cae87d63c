"""The route table is the one definition: every route is served by its function's resolver, and
the published OpenAPI document covers every API function."""

from __future__ import annotations

import importlib

import pytest

from functions.admin_api.handler import API_MODULES
from infra.routes import FUNCTIONS, ROUTES


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_every_route_is_served_by_its_function(route) -> None:  # type: ignore[no-untyped-def]
    module = importlib.import_module(FUNCTIONS[route.function].module)
    served = {(r.method, r.rule.pattern) for r in _routes(module.app)}
    powertools_path = route.path.replace("{", "<").replace("}", ">")
    assert any(m == route.method and _matches(p, powertools_path) for m, p in served), served


def _routes(app):  # type: ignore[no-untyped-def]
    return [r for routes in [app._static_routes, app._dynamic_routes] for r in routes]


def _matches(pattern: str, path: str) -> bool:
    import re

    concrete = re.sub(r"<(\w+)>", "x", path)
    return re.fullmatch(pattern.lstrip("^").rstrip("$"), concrete) is not None


def test_openapi_covers_every_api_function() -> None:
    assert {FUNCTIONS[r.function].module for r in ROUTES} == set(API_MODULES)


def test_the_a2a_function_serves_exactly_its_table_routes() -> None:
    # Another protocol's wire: no Powertools resolver; the function names the route keys it serves.
    from functions.a2a_api.handler import ROUTE_KEYS
    from infra.routes import A2A_ROUTES, ALL_ROUTES

    assert set(ROUTE_KEYS) == {f"{r.method} {r.path}" for r in A2A_ROUTES}
    assert {r.function for r in A2A_ROUTES} == {"a2a_api"}
    assert not {r.function for r in ROUTES} & {"a2a_api"}
    assert ALL_ROUTES == ROUTES + A2A_ROUTES
    public = [f"{r.method} {r.path}" for r in A2A_ROUTES if not r.authorized]
    assert public == ["GET /.well-known/agent-card.json"]
