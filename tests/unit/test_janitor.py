"""Which body versions a stream record orphans: the janitor's pure rule, as a table."""

from __future__ import annotations

from typing import Any

import pytest

from dovecote.notes.janitor import BodyVersion, sweep, unreferenced_body

REF = "ab" * 32


def record(event: str, pk: str = "a#acme", old: str | None = None, new: str | None = None) -> dict[str, Any]:
    change: dict[str, Any] = {"Keys": {"pk": {"S": pk}, "ref": {"S": REF}}, "SequenceNumber": "1"}
    if old is not None:
        change["OldImage"] = {"pk": {"S": pk}, "ref": {"S": REF}, **({"blob_version": {"S": old}} if old else {})}
    if new is not None:
        change["NewImage"] = {"pk": {"S": pk}, "ref": {"S": REF}, **({"blob_version": {"S": new}} if new else {})}
    return {"eventName": event, "dynamodb": change}


@pytest.mark.parametrize(
    ("rec", "expected"),
    [
        (record("REMOVE", old="v1"), BodyVersion(f"notes/acme/{REF}", "v1")),
        (record("REMOVE", old=""), BodyVersion(f"notes/acme/{REF}", None)),
        (record("MODIFY", old="v1", new="v2"), BodyVersion(f"notes/acme/{REF}", "v1")),
        (record("MODIFY", old="v1", new="v1"), None),  # same body version re-indexed
        (record("MODIFY", old="", new="v2"), None),  # nothing pinned before
        (record("INSERT", new="v1"), None),
        (record("REMOVE", pk="k#0123", old="v1"), None),  # a view item: no body of its own
        (record("REMOVE", pk="n#0123", old="v1"), None),
    ],
)
def test_unreferenced_body(rec: dict[str, Any], expected: BodyVersion | None) -> None:
    assert unreferenced_body(rec) == expected


def test_sweep_deletes_each_orphan_once() -> None:
    deleted: list[tuple[str, str | None]] = []

    class Store:
        def delete_body_version(self, key: str, version: str | None) -> None:
            deleted.append((key, version))

    swept = sweep(
        [record("INSERT", new="v1"), record("MODIFY", old="v1", new="v2"), record("REMOVE", old="v2")], Store()
    )
    assert deleted == [(f"notes/acme/{REF}", "v1"), (f"notes/acme/{REF}", "v2")]
    assert len(swept) == 2
