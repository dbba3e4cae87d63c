"""The janitor end to end on moto: the table's real stream, the local stream emulator and the
real handler. Overwritten and deleted notes lose exactly their old body versions; a re-put body
written after a delete survives the delete's cleanup."""

from __future__ import annotations

import hashlib
from typing import Any

import requests

from dovecote.notes.dynamo import DynamoNoteStore, blob_key
from dovecote.notes.limits import INLINE_LIMIT
from dovecote.notes.model import note_ref
from dovecote.notes.service import NotesService, PutNote
from dovecote.platform.cursors import CursorSigner
from dovecote.platform.principal import Principal
from infra.local.streams import StreamPoller, streams_client
from infra.routes import JANITOR, JANITOR_FILTER

ACME = Principal("acme", "caller")


def versions(env: dict[str, Any], key: str) -> list[str]:
    listed = env["s3"].list_object_versions(Bucket=env["settings"].bucket, Prefix=key)
    return sorted(v["VersionId"] for v in listed.get("Versions", []))


def drain(poller: StreamPoller) -> None:
    from functions.notes_janitor.handler import handler, store

    store.cache_clear()
    while poller.poll_once(handler):
        pass


def wired(env: dict[str, Any], **poller_options: Any) -> tuple[NotesService, StreamPoller]:
    """The notes service on moto, and the janitor's stream poller bound to its table."""
    settings = env["settings"]
    store = DynamoNoteStore(table=settings.notes_table, bucket=settings.bucket, dynamodb=env["dynamodb"], s3=env["s3"])
    poller = StreamPoller(
        dynamodb=env["dynamodb"],
        streams=streams_client(),
        table=settings.notes_table,
        function=JANITOR,
        event_filter=JANITOR_FILTER,
        **poller_options,
    )
    return NotesService(store, CursorSigner(b"janitor-key-0123456789abcdefghij")), poller.bind()


def test_janitor_deletes_exactly_the_unreferenced_versions(moto_env: dict[str, Any]) -> None:
    notes, poller = wired(moto_env)
    key = blob_key("acme", note_ref("k", 1, "n", ""))

    notes.put(ACME, PutNote(key="k", run=1, name="n", text="v1"))
    notes.put(ACME, PutNote(key="k", run=1, name="n", text="v2"))
    assert len(versions(moto_env, key)) == 2
    drain(poller)
    assert len(versions(moto_env, key)) == 1  # v1's body is gone, v2's is pinned by the index
    assert notes.get(ACME, note_ref("k", 1, "n", "")).text == "v2"

    notes.delete(ACME, note_ref("k", 1, "n", ""))
    # A re-put lands before the janitor sees the delete: its body must survive the cleanup.
    big = b"B" * (INLINE_LIMIT + 1)
    digest = hashlib.sha256(big).hexdigest()
    upload = notes.create_upload(ACME, PutNote(key="k", run=1, name="n", size=len(big), sha256=digest))
    assert requests.put(upload.upload_url, data=big, timeout=30).status_code == 200
    notes.put(ACME, PutNote(key="k", run=1, name="n", upload=True, sha256=digest))
    drain(poller)
    assert len(versions(moto_env, key)) == 1
    url = notes.get(ACME, note_ref("k", 1, "n", "")).download_url
    assert url and requests.get(url, timeout=30).content == big

    notes.delete(ACME, note_ref("k", 1, "n", ""))
    drain(poller)
    assert versions(moto_env, key) == []
    # Only note-item REMOVE/MODIFY records pass the filter: the v1→v2 MODIFY and the two REMOVEs
    # (the re-put after the first delete is an INSERT; view items never pass).
    assert poller.delivered == 3


def test_records_the_janitor_cannot_process_are_kept_not_dropped(moto_env: dict[str, Any]) -> None:
    from botocore.exceptions import ClientError

    notes, poller = wired(moto_env, interval_s=0.01, max_attempts=2)
    notes.put(ACME, PutNote(key="k", run=1, name="n", text="v1"))
    notes.delete(ACME, note_ref("k", 1, "n", ""))

    def refuse(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "InternalError", "Message": "injected"}}, "DeleteObject")

    # The janitor's store uses the same cached S3 client as this fixture.
    moto_env["s3"].meta.events.register("before-call.s3.DeleteObject", refuse, unique_id="fault")
    try:
        drain(poller)
    finally:
        moto_env["s3"].meta.events.unregister("before-call.s3.DeleteObject", unique_id="fault")
    assert [r["eventName"] for r in poller.failures] == ["REMOVE"]
    key = blob_key("acme", note_ref("k", 1, "n", ""))
    assert len(versions(moto_env, key)) == 1  # still there, and named by the kept record
