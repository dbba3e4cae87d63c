"""The published OpenAPI document is exact: no reference dangles, every operation has a summary and
a description, and every route of the route table is in it (and nothing else)."""

from __future__ import annotations

from typing import Any

from functions.admin_api.handler import openapi_document
from infra.routes import ROUTES


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []


def test_no_reference_dangles() -> None:
    doc = openapi_document()
    schemas = doc["components"]["schemas"]
    missing = sorted({r for r in _refs(doc) if r.split("/")[-1] not in schemas})
    assert missing == []


def test_every_operation_has_a_summary_and_a_description() -> None:
    for path, operations in openapi_document()["paths"].items():
        for method, operation in operations.items():
            assert operation.get("summary") and operation.get("description"), f"{method.upper()} {path}"
            assert not operation["summary"].startswith(method.upper() + " "), f"{method.upper()} {path}"


def test_the_document_covers_exactly_the_route_table() -> None:
    documented = {
        f"{method.upper()} {path}" for path, operations in openapi_document()["paths"].items() for method in operations
    }
    routed = {f"{r.method} {r.path}" for r in ROUTES}

    def normal(key: str) -> str:
        import re

        return re.sub(r"\{[^}]+\}", "{}", key)

    assert {normal(k) for k in documented} == {normal(k) for k in routed}
