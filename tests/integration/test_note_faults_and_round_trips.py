"""Faults injected at botocore level, and the deterministic AWS round-trip counts per command."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from dovecote.notes.dynamo import DynamoNoteStore
from dovecote.notes.limits import INLINE_LIMIT
from dovecote.notes.model import NoteFilter, note_ref
from dovecote.notes.service import NotesService, PutNote
from dovecote.platform.cursors import CursorSigner
from dovecote.platform.errors import CommitUnknown, InvalidArgument, NotFound, Throttled, Unavailable
from dovecote.platform.principal import Principal
from infra.local.metering import count_round_trips
from tests.support.faults import heal, inject, server_error

ACME = Principal("acme", "caller")


@pytest.fixture
def notes(moto_env: dict[str, Any]) -> Iterator[tuple[NotesService, dict[str, Any]]]:
    store = DynamoNoteStore(
        table=moto_env["settings"].notes_table,
        bucket=moto_env["settings"].bucket,
        dynamodb=moto_env["dynamodb"],
        s3=moto_env["s3"],
    )
    yield NotesService(store, CursorSigner(b"fault-key-0123456789abcdefghij")), moto_env


def put(service: NotesService, text: str = "body") -> Any:
    return service.put(ACME, PutNote(key="k", run=1, name="n", author="a", text=text))


def test_index_write_failing_after_the_body_write_leaves_nothing_listed(notes: Any) -> None:
    service, env = notes
    ref = note_ref("k", 1, "n", "a")
    inject(env["dynamodb"], "before-call.dynamodb.TransactWriteItems", server_error("TransactWriteItems"))
    with pytest.raises(CommitUnknown):
        put(service)
    heal(env["dynamodb"], "before-call.dynamodb.TransactWriteItems")
    assert service.list(ACME, NoteFilter(), None, None) == ([], None)
    with pytest.raises(NotFound):
        service.get(ACME, ref)
    # The exact retry converges to one note.
    put(service)
    items, _ = service.list(ACME, NoteFilter(), None, None)
    assert [m.ref for m in items] == [ref]
    assert service.get(ACME, ref).text == "body"


def test_failed_overwrite_keeps_the_previous_note_whole(notes: Any) -> None:
    service, env = notes
    put(service, "v1")
    inject(env["dynamodb"], "before-call.dynamodb.TransactWriteItems", server_error("TransactWriteItems"))
    with pytest.raises(CommitUnknown):
        put(service, "v2 replaces the body in S3 first")
    heal(env["dynamodb"], "before-call.dynamodb.TransactWriteItems")
    view = service.get(ACME, note_ref("k", 1, "n", "a"))
    assert view.text == "v1" and view.meta.size == 2


def test_failed_overwrite_of_a_large_note_keeps_serving_the_committed_version(notes: Any) -> None:
    import requests

    service, env = notes
    big1, big2 = b"1" * (INLINE_LIMIT + 1), b"2" * (INLINE_LIMIT + 1)
    import hashlib

    for body, fail in ((big1, False), (big2, True)):
        digest = hashlib.sha256(body).hexdigest()
        upload = service.create_upload(ACME, PutNote(key="k", run=1, name="big", size=len(body), sha256=digest))
        assert requests.put(upload.upload_url, data=body, timeout=30).status_code == 200
        if fail:
            inject(env["dynamodb"], "before-call.dynamodb.TransactWriteItems", server_error("TransactWriteItems"))
            with pytest.raises(CommitUnknown):
                service.put(ACME, PutNote(key="k", run=1, name="big", upload=True, sha256=digest))
            heal(env["dynamodb"], "before-call.dynamodb.TransactWriteItems")
        else:
            service.put(ACME, PutNote(key="k", run=1, name="big", upload=True, sha256=digest))
    url = service.get(ACME, note_ref("k", 1, "big", "")).download_url
    assert url and requests.get(url, timeout=30).content == big1


def test_body_write_failing_stores_nothing(notes: Any) -> None:
    service, env = notes
    inject(env["s3"], "before-call.s3.PutObject", server_error("PutObject"))
    with pytest.raises(CommitUnknown):
        put(service)
    heal(env["s3"], "before-call.s3.PutObject")
    assert service.list(ACME, NoteFilter(), None, None) == ([], None)


def test_timeout_after_the_index_write_is_commit_unknown_and_the_retry_converges(notes: Any) -> None:
    service, env = notes
    inject(env["dynamodb"], "after-call.dynamodb.TransactWriteItems", ReadTimeoutError(endpoint_url="https://dynamodb"))
    with pytest.raises(CommitUnknown):
        put(service)
    heal(env["dynamodb"], "after-call.dynamodb.TransactWriteItems")
    put(service)
    items, _ = service.list(ACME, NoteFilter(), None, None)
    assert len(items) == 1


def test_throttle_is_429_and_read_failure_is_503(notes: Any) -> None:
    service, env = notes
    inject(
        env["dynamodb"], "before-call.dynamodb.Query", server_error("Query", "ProvisionedThroughputExceededException")
    )
    with pytest.raises(Throttled) as throttled:
        service.list(ACME, NoteFilter(), None, None)
    assert throttled.value.status == 429
    heal(env["dynamodb"], "before-call.dynamodb.Query")
    inject(env["dynamodb"], "before-call.dynamodb.GetItem", server_error("GetItem"))
    with pytest.raises(Unavailable) as unavailable:
        service.get(ACME, note_ref("k", 1, "n", "a"))
    assert unavailable.value.status == 503


def test_transaction_conflicts_are_retried_then_surface_as_503(notes: Any) -> None:
    service, env = notes
    conflict = ClientError(
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "injected"},
            "CancellationReasons": [{"Code": "TransactionConflict"}] * 4,
        },
        "TransactWriteItems",
    )
    calls = {"n": 0}

    def fail_twice(**_: Any) -> None:
        calls["n"] += 1
        if calls["n"] <= 2:
            raise conflict

    env["dynamodb"].meta.events.register("before-call.dynamodb.TransactWriteItems", fail_twice, unique_id="fault")
    put(service)  # third attempt commits
    assert calls["n"] == 3
    heal(env["dynamodb"], "before-call.dynamodb.TransactWriteItems")
    inject(env["dynamodb"], "before-call.dynamodb.TransactWriteItems", conflict)
    with pytest.raises(CommitUnknown):
        put(service, "other")
    heal(env["dynamodb"], "before-call.dynamodb.TransactWriteItems")
    assert service.get(ACME, note_ref("k", 1, "n", "a")).text == "body"


def test_round_trips_per_command(notes: Any) -> None:
    service, env = notes
    clients = (env["dynamodb"], env["s3"])
    with count_round_trips(*clients) as meter:
        meta = put(service)
    assert meter.total == 2, meter.calls
    with count_round_trips(*clients) as meter:
        service.get(ACME, meta.ref)
    assert meter.total == 1, meter.calls
    for i in range(4):
        service.put(ACME, PutNote(key="k", run=1, name=f"p{i}", text="x"))
    cursor, pages = None, 0
    with count_round_trips(*clients) as meter:
        while True:
            _, cursor = service.list(ACME, NoteFilter(key="k"), 2, cursor)
            pages += 1
            if not cursor:
                break
    assert pages == 3 and meter.total == pages, meter.calls
    with count_round_trips(*clients) as meter:
        service.delete(ACME, meta.ref)
    assert meter.total == 2, meter.calls


def test_get_of_a_large_note_is_one_round_trip(notes: Any) -> None:
    import hashlib

    import requests

    service, env = notes
    body = b"L" * (INLINE_LIMIT + 10)
    digest = hashlib.sha256(body).hexdigest()
    upload = service.create_upload(ACME, PutNote(key="k", run=1, name="big", size=len(body), sha256=digest))
    requests.put(upload.upload_url, data=body, timeout=30)
    with count_round_trips(env["dynamodb"], env["s3"]) as meter:
        service.put(ACME, PutNote(key="k", run=1, name="big", upload=True, sha256=digest))
    # GetObject (hashed) + CopyObject out of the expiring uploads prefix + TransactWriteItems.
    assert meter.calls == {"s3.GetObject": 1, "s3.CopyObject": 1, "dynamodb.TransactWriteItems": 1}, meter.calls
    with count_round_trips(env["dynamodb"], env["s3"]) as meter:
        assert service.get(ACME, upload.ref).download_url
    assert meter.total == 1, meter.calls


# ---- presigned uploads: bound to one body, read no further than declared -------------------------


def _upload_setup(service: NotesService, size: int, content_type: str = "text/plain") -> Any:
    import hashlib

    body = b"u" * size
    digest = hashlib.sha256(body).hexdigest()
    upload = service.create_upload(
        ACME, PutNote(key="k", run=1, name="up", size=size, sha256=digest, content_type=content_type)
    )
    return upload, body, digest


def test_the_upload_url_is_signed_for_the_declared_length_checksum_and_type(notes: Any) -> None:
    import base64
    import hashlib
    from urllib.parse import parse_qs, urlparse

    service, _ = notes
    upload, body, digest = _upload_setup(service, 10)
    query = parse_qs(urlparse(upload.upload_url).query)
    signed = set(query["X-Amz-SignedHeaders"][0].split(";"))
    assert {"content-length", "content-type", "x-amz-checksum-sha256"} <= signed
    checksum = base64.b64encode(hashlib.sha256(body).digest()).decode()
    assert upload.upload_headers == {
        "Content-Length": "10",
        "Content-Type": "text/plain",
        "x-amz-checksum-sha256": checksum,
    }
    # Uploads land in the expiring prefix, never on the committed body's key.
    assert urlparse(upload.upload_url).path.endswith(f"/uploads/notes/acme/{upload.ref}")


class _ReadMeter:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from botocore.response import StreamingBody

        self.bytes = 0
        original = StreamingBody.read

        def read(body: Any, amt: int | None = None) -> bytes:
            chunk = original(body, amt)
            self.bytes += len(chunk)
            return chunk

        monkeypatch.setattr(StreamingBody, "read", read)


def test_a_commit_refuses_an_oversized_upload_without_reading_it(notes: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from dovecote.notes.dynamo import upload_key

    service, env = notes
    upload, _, digest = _upload_setup(service, 10)
    # moto does not check presigned signatures, so this stands in for a body S3 would have refused.
    env["s3"].put_object(Bucket=env["settings"].bucket, Key=upload_key("acme", upload.ref), Body=b"x" * 5_000_000)
    meter = _ReadMeter(monkeypatch)
    with pytest.raises(InvalidArgument, match="larger than the declared size"):
        service.put(ACME, PutNote(key="k", run=1, name="up", upload=True, sha256=digest, size=10))
    assert meter.bytes == 0
    assert service.list(ACME, NoteFilter(), None, None) == ([], None)


def test_a_commit_stops_reading_at_the_declared_size_plus_one_byte(notes: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from dovecote.notes.dynamo import upload_key

    service, env = notes
    upload, _, digest = _upload_setup(service, 10)
    env["s3"].put_object(Bucket=env["settings"].bucket, Key=upload_key("acme", upload.ref), Body=b"x" * 5_000_000)

    def hide_length(parsed: dict[str, Any], **_: Any) -> None:
        parsed["ContentLength"] = 0  # a length that lies: only the bounded read protects us

    env["s3"].meta.events.register("after-call.s3.GetObject", hide_length, unique_id="liar")
    meter = _ReadMeter(monkeypatch)
    try:
        with pytest.raises(InvalidArgument, match="larger than the declared size"):
            service.put(ACME, PutNote(key="k", run=1, name="up", upload=True, sha256=digest, size=10))
    finally:
        env["s3"].meta.events.unregister("after-call.s3.GetObject", unique_id="liar")
    assert meter.bytes == 11
