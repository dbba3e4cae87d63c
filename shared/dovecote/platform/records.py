"""What the services' pure records share: their JSON rendering from field names, the canonical
digest that binds a command id to its intent, and the receipt that replays a committed command. Pure."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


def fields_json(record: Any, names: Iterable[str], optional: Iterable[str] = ()) -> dict[str, Any]:
    """`{name: record.name}` for each of `names` in order, then each of `optional` that is set (a
    falsy optional field is absent, so a digest of the JSON is unchanged by a field added later).
    A field that holds a record (it has `to_json`) is rendered by it."""
    out = {name: _rendered(getattr(record, name)) for name in names}
    for name in optional:
        value = getattr(record, name)
        if value:
            out[name] = _rendered(value)
    return out


def _rendered(value: Any) -> Any:
    to_json = getattr(value, "to_json", None)
    return value if to_json is None else to_json()


def canonical_digest(value: dict[str, Any]) -> str:
    """`sha256:` of a canonical JSON encoding (sorted keys, no whitespace, UTF-8)."""
    encoded = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return "sha256:" + hashlib.sha256(encoded).hexdigest()


def intent_digest(kind: str, command: dict[str, Any]) -> str:
    """What a command id is bound to: the canonical digest of {kind, command}."""
    return canonical_digest({"kind": kind, "command": command})


@dataclass(frozen=True, slots=True)
class Receipt:
    """The durable idempotency receipt of one committed command, keyed by (authority, command id):
    an exact retry (same id, same intent `digest`) answers `status` and `result` again."""

    authority: str
    id: str
    kind: str
    digest: str
    status: int = 200
    result: dict[str, Any] = field(default_factory=dict)
