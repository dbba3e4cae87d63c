"""The published OpenAPI document is exact: no reference dangles, every operation has a summary and
a description, and every route of the route table is in it (and nothing else)."""

from __future__ import annotations

from typing import Any

from functions.admin_api.handler import openapi_document
from infra.routes import ROUTES, STREAM_ROUTES


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
    routed = {f"{r.method} {r.path}" for r in ROUTES + STREAM_ROUTES}

    def normal(key: str) -> str:
        import re

        return re.sub(r"\{[^}]+\}", "{}", key)

    assert {normal(k) for k in documented} == {normal(k) for k in routed}


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while isinstance(schema.get("$ref"), str):
        schema = doc["components"]["schemas"][schema["$ref"].split("/")[-1]]
    return schema


# What makes a JSON Schema say something about a value: a schema with none of these accepts anything.
_CONSTRAINING = {"type", "properties", "items", "anyOf", "oneOf", "allOf", "enum", "const", "$ref"}


def _vacuous(doc: dict[str, Any], schema: Any, where: str, seen: set[str]) -> list[str]:
    """Every place under `schema` (through references) that accepts any value at all."""
    if not isinstance(schema, dict):
        return []
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if ref in seen:
            return []
        seen.add(ref)
        return _vacuous(doc, _resolve(doc, schema), f"{where} -> {ref.split('/')[-1]}", seen)
    found = [where] if not (_CONSTRAINING & schema.keys()) else []
    if schema.get("type") == "object" and "properties" not in schema and "additionalProperties" not in schema:
        found.append(where)
    for name, prop in (schema.get("properties") or {}).items():
        found += _vacuous(doc, prop, f"{where}.{name}", seen)
    for keyword in ("anyOf", "oneOf", "allOf"):
        for i, option in enumerate(schema.get(keyword) or []):
            found += _vacuous(doc, option, f"{where}/{keyword}[{i}]", seen)
    if isinstance(schema.get("items"), dict):
        found += _vacuous(doc, schema["items"], f"{where}[]", seen)
    return found


STREAM_PATHS = {r.path for r in STREAM_ROUTES}


def test_every_success_body_has_its_real_schema() -> None:
    """A response schema of `{}` verifies nothing (issue 15 item 11: ApiModel's wrap serializer
    made 40 of 54 of them empty), so every 2xx JSON body is described, down to its leaves."""
    doc = openapi_document()
    empty = []
    checked = 0
    for path, operations in doc["paths"].items():
        if path == "/v1/openapi.json":
            continue  # the document itself: an OpenAPI object, described by the OpenAPI spec
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if not status.startswith("2") or status == "204":
                    continue
                content = response.get("content") or {}
                if path in STREAM_PATHS:  # server-sent events: their messages are described in words
                    assert list(content) == ["text/event-stream"], path
                    continue
                assert "application/json" in content, f"{method.upper()} {path} {status}: no JSON body documented"
                checked += 1
                where = f"{method.upper()} {path} {status}"
                empty += _vacuous(doc, content["application/json"].get("schema") or {}, where, set())
    assert checked >= 50  # the walk saw the bodies (50 success bodies today, besides 204s)
    assert empty == []


def test_optional_response_fields_are_omitted_not_null() -> None:
    """ApiModel leaves out a field with no value: the document says so (not required, never null),
    and every other field is required, so a response missing one fails its schema."""
    from functions.tasks_api.models import TaskEnvelope, TaskOut

    schemas = openapi_document()["components"]["schemas"]
    task = schemas["TaskOut"]
    assert "artifact" not in task["required"] and "submission" not in task["required"]
    assert {"id", "state", "revision", "lease_timeout_seconds"} <= set(task["required"])
    assert task["properties"]["artifact"] == {"type": "string", "title": "Artifact"}
    assert "null" not in str(task)
    body = TaskEnvelope(
        task=TaskOut(
            id="t",
            workspace="w",
            context="c",
            state="submitted",
            revision=1,
            message_count=1,
            event_count=1,
            created_at="x",
            updated_at="x",
        )
    ).model_dump(mode="json")
    assert "artifact" not in body["task"] and set(task["required"]) <= set(body["task"])
