"""Body cleanup, driven by the notes table's stream. Pure: which S3 body versions a batch of
stream records makes unreachable.

A note item that is removed (Delete) or replaced by one pinning another version (overwrite, upload
commit) leaves its old body version unreferenced. The janitor deletes exactly that version, never the
key's current object, so a Put racing a Delete keeps its own body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from dovecote.notes.dynamo import blob_key

NOTE_PREFIX = "a#"


@dataclass(frozen=True, slots=True)
class BodyVersion:
    key: str
    version: str | None


class BodyStore(Protocol):
    def delete_body_version(self, key: str, version: str | None) -> None: ...


def _s(image: dict[str, Any], name: str) -> str | None:
    value = (image.get(name) or {}).get("S")
    return str(value) if value is not None else None


def unreferenced_body(record: dict[str, Any]) -> BodyVersion | None:
    """The body version one stream record orphans, if any. View items (other prefixes) and inserts
    orphan nothing. An item without a pinned version (unversioned bucket) orphans its key only on
    REMOVE."""
    change = record.get("dynamodb") or {}
    keys = change.get("Keys") or {}
    pk, ref = _s(keys, "pk"), _s(keys, "ref")
    if not pk or not ref or not pk.startswith(NOTE_PREFIX):
        return None
    old = change.get("OldImage") or {}
    old_version = _s(old, "blob_version")
    key = blob_key(pk[len(NOTE_PREFIX) :], ref)
    event = record.get("eventName")
    if event == "REMOVE":
        return BodyVersion(key, old_version)
    if event == "MODIFY" and old_version and old_version != _s(change.get("NewImage") or {}, "blob_version"):
        return BodyVersion(key, old_version)
    return None


def sweep(records: list[dict[str, Any]], store: BodyStore) -> list[BodyVersion]:
    swept = []
    for record in records:
        body = unreferenced_body(record)
        if body is not None:
            store.delete_body_version(body.key, body.version)
            swept.append(body)
    return swept
