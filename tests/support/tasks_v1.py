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


def load(dynamodb: Any, table: str, authority: str = "acme") -> dict[str, Any]:
    """Every item of the v1 table into `table`, as the v1 adapter left it; returns the fixture."""
    fixture = recorded(authority)
    for item in fixture["items"]:
        dynamodb.put_item(TableName=table, Item=_from_wire(item))
    return fixture
