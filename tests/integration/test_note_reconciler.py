"""The reconciler on moto: body versions that no note pins (a failed overwrite's version, a note
deleted while the janitor was away) are deleted once older than the grace period; pinned versions
and young ones are never touched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from dovecote.notes.dynamo import DynamoNoteStore, blob_key
from dovecote.notes.model import note_ref
from dovecote.notes.reconcile import GRACE, StoredVersion, orphans
from dovecote.notes.service import NotesService, PutNote
from dovecote.platform.cursors import CursorSigner
from dovecote.platform.errors import CommitUnknown
from dovecote.platform.principal import Principal
from functions.notes_reconciler.handler import reconcile

ACME = Principal("acme", "caller")


def later() -> datetime:
    """A moment past the grace period of everything written so far (computed when used: a module
    constant would age while the suite runs)."""
    return datetime.now(UTC) + GRACE + timedelta(minutes=5)


def wired(env: dict[str, Any]) -> tuple[NotesService, DynamoNoteStore]:
    s = env["settings"]
    store = DynamoNoteStore(table=s.notes_table, bucket=s.bucket, dynamodb=env["dynamodb"], s3=env["s3"])
    return NotesService(store, CursorSigner(b"reconcile-key-0123456789abcdefg")), store


def versions(env: dict[str, Any], key: str) -> list[str]:
    listed = env["s3"].list_object_versions(Bucket=env["settings"].bucket, Prefix=key)
    return [v["VersionId"] for v in listed.get("Versions", []) + listed.get("DeleteMarkers", [])]


def test_a_failed_overwrite_leaves_a_version_only_the_reconciler_removes(moto_env: dict[str, Any]) -> None:
    notes, store = wired(moto_env)
    ref = note_ref("k", 1, "n", "")
    notes.put(ACME, PutNote(key="k", run=1, name="n", text="v1"))
    pinned = store.get("acme", ref).blob_version

    def fail(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "InternalServerError", "Message": "injected"}}, "TransactWriteItems")

    moto_env["dynamodb"].meta.events.register("before-call.dynamodb.TransactWriteItems", fail, unique_id="f")
    with pytest.raises(CommitUnknown):
        notes.put(ACME, PutNote(key="k", run=1, name="n", text="v2, never committed"))
    moto_env["dynamodb"].meta.events.unregister("before-call.dynamodb.TransactWriteItems", unique_id="f")
    key = blob_key("acme", ref)
    assert len(versions(moto_env, key)) == 2

    # Young versions are in-flight Puts as far as the reconciler knows: untouched.
    assert reconcile(store, datetime.now(UTC))["versions_deleted"] == 0
    summary = reconcile(store, later())
    assert summary == {"versions_seen": 2, "versions_deleted": 1, "complete": 1}
    assert versions(moto_env, key) == [pinned]
    assert notes.get(ACME, ref).text == "v1"


def test_bodies_of_notes_deleted_while_the_janitor_was_away_are_removed(moto_env: dict[str, Any]) -> None:
    notes, store = wired(moto_env)
    kept = notes.put(ACME, PutNote(key="k", run=1, name="kept", text="stay"))
    gone = notes.put(ACME, PutNote(key="k", run=1, name="gone", text="go"))
    notes.delete(ACME, gone.ref)  # no janitor runs in this test
    reconcile(store, later())
    assert versions(moto_env, blob_key("acme", gone.ref)) == []
    assert len(versions(moto_env, blob_key("acme", kept.ref))) == 1
    assert notes.get(ACME, kept.ref).text == "stay"


def test_orphans_keeps_pinned_and_young_versions_and_foreign_keys() -> None:
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    old, young = now - timedelta(hours=2), now - timedelta(minutes=1)
    ref = "a" * 64
    key = f"notes/acme/{ref}"
    found = [
        StoredVersion(key, "pinned", old),
        StoredVersion(key, "stale", old),
        StoredVersion(key, "marker", old, delete_marker=True),
        StoredVersion(key, "in-flight", young),
        StoredVersion("notes/acme/not-a-ref", "x", old),
        StoredVersion(f"notes/other/{'b' * 64}", "no-note", old),
    ]
    chosen = orphans(found, {key: "pinned"}, now)
    assert [v.version for v in chosen] == ["stale", "marker", "no-note"]
