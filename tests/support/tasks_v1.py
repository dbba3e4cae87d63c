"""A tasks table as the v1 layout wrote it (tests/data/tasks-v1/store.json, written by the v1 adapter:
see generate.py beside it), loaded into a table, and what the v1 service answered then."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

STORE = Path(__file__).resolve().parents[1] / "data" / "tasks-v1" / "store.json"


def recorded(authority: str = "acme") -> dict[str, Any]:
    """The fixture, its authority renamed (ids never hold it: "acme" only ever names the authority)."""
    text = STORE.read_text()
    return dict(json.loads(text.replace("acme", authority) if authority != "acme" else text))


def _from_wire(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (base64.b64decode(v) if k == "B" else _from_wire(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_wire(v) for v in value]
    return value


def _sealed(item: dict[str, Any], authority: str, protector: Any) -> dict[str, Any]:
    """A v1 message item with its parts sealed as a v1 adapter with a key sealed them (the fixture was
    written without one): each part's bytes or URL bound to its place (dynamo_items.part_identity)."""
    from dovecote.tasks.dynamo_items import part_identity

    if "parts" not in item:
        return item
    task_id, message_id = item["pk"]["S"].split("#", 2)[2], item["id"]["S"]
    for index, part in enumerate(p["M"] for p in item["parts"]["L"]):
        if "url" in part:
            place = part_identity(authority, task_id, message_id, index, "url")
            part["url"] = {"B": protector.seal(part["url"]["B"], place)}
        elif "data" in part:
            place = part_identity(authority, task_id, message_id, index, part["sha256"]["S"])
            part["data"] = {"B": protector.seal(part["data"]["B"], place)}
    return item


def load(dynamodb: Any, table: str, authority: str = "acme", *, protector: Any = None) -> dict[str, Any]:
    """Every item of the v1 table into `table`, as the v1 adapter left it (its message parts sealed
    by `protector` when given, as a store with a key seals them); returns the fixture."""
    fixture = recorded(authority)
    for item in fixture["items"]:
        raw = _from_wire(item)
        dynamodb.put_item(TableName=table, Item=_sealed(raw, authority, protector) if protector else raw)
    return fixture
