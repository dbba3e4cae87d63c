"""Recall's AWS adapters on moto: the archive (S3) and the ingest ledger (DynamoDB, PynamoDB), each
held to the same cases as its in-memory fake; the upload → S3 notification → SQS → indexer path; faults
injected at botocore level; and the AWS round trips of each command."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from botocore.exceptions import ClientError

from dovecote.platform import aws
from dovecote.platform.errors import CommitUnknown, NotFound
from dovecote.platform.principal import Principal
from dovecote.recall.archive import S3Archive, parse_upload_key
from dovecote.recall.dynamo import DynamoIngestLedger
from dovecote.recall.memory import InMemoryArchive, InMemoryLedger
from dovecote.recall.model import gate_search
from dovecote.recall.ports import ArchiveEntry, IngestLedger, PendingUpload, TopicEntry, TranscriptArchive
from dovecote.recall.service import UPLOAD_GRACE, RecallService
from dovecote.recall.sqlite import SqliteSearchIndex
from infra.local.metering import count_round_trips
from infra.local.resources import DEFAULT_NAMES, create_transcript_queue
from tests.conftest import DATA
from tests.support.faults import heal, inject, server_error
from tests.support.stores import fake_or_moto

ACME = Principal("acme", "caller")
NOW = datetime(2026, 1, 10, tzinfo=UTC)
SESSION_FILE = DATA / "transcripts" / "claude-code" / "lanegrid-agtrace__claude_session.jsonl"


def recall_table(env: dict[str, Any]) -> dict[str, Any]:
    """What a DynamoDB adapter of recall takes on moto (the `moto_env` fixture): its table and client."""
    return {"table": env["settings"].recall_table, "dynamodb": env["dynamodb"]}


# ---- the ledger: fake and DynamoDB, one suite -----------------------------------------------------------


@pytest.fixture(params=["memory", "dynamo"])
def ledger(request: pytest.FixtureRequest) -> IngestLedger:
    return fake_or_moto(request, InMemoryLedger, lambda env: DynamoIngestLedger(**recall_table(env)))


def upload(upload_id: str, expires: str = "2026-01-11T00:00:00.000Z", project: str = "web") -> PendingUpload:
    return PendingUpload(
        upload_id=upload_id,
        format="codex-jsonl",
        project=project,
        project_folder="-Users-me-web",
        created_at="2026-01-10T00:00:00.000Z",
        expires_at=expires,
    )


def test_ledger_add_get_pending_clear(ledger: IngestLedger) -> None:
    ledger.add("acme", upload("u1"))
    ledger.add("acme", upload("u2", project="ünï"))
    ledger.add("globex", upload("u3"))
    got = ledger.get("acme", "u1")
    assert got == upload("u1")
    assert [u.upload_id for u in ledger.pending("acme", "2026-01-10T12:00:00.000Z")] == ["u1", "u2"]
    assert ledger.pending("acme", "2026-01-10T12:00:00.000Z")[1].project == "ünï"
    ledger.clear("acme", "u1")
    ledger.clear("acme", "u1")  # clearing twice is harmless (the indexer may run twice)
    assert ledger.get("acme", "u1") is None
    assert [u.upload_id for u in ledger.pending("globex", "2026-01-10T12:00:00.000Z")] == ["u3"]


def test_ledger_failed_and_expired_entries_are_not_pending(ledger: IngestLedger) -> None:
    ledger.add("acme", upload("u1"))
    ledger.add("acme", upload("old", expires="2026-01-09T00:00:00.000Z"))
    ledger.fail("acme", "u1", "the transcript holds no session")
    ledger.fail("acme", "never-added", "x")  # nothing to mark, no error
    assert ledger.pending("acme", "2026-01-10T00:00:00.000Z") == []
    failed = ledger.get("acme", "u1")
    assert failed is not None and failed.status == "failed" and failed.error.startswith("the transcript")
    assert ledger.get("acme", "never-added") is None


# ---- the archive: fake and S3, one suite ------------------------------------------------------------------


@pytest.fixture(params=["memory", "s3"])
def archive(request: pytest.FixtureRequest) -> Iterator[tuple[TranscriptArchive, Any]]:
    if request.param == "memory":
        fake = InMemoryArchive()
        yield fake, fake.upload
        return
    env = request.getfixturevalue("moto_env")

    def http_put(url: str, body: bytes) -> None:
        assert requests.put(url, data=body, timeout=30).status_code == 200

    yield S3Archive(bucket=env["settings"].bucket, s3=env["s3"]), http_put


def test_archive_round_trip_keeps_bytes_and_metadata(archive: tuple[TranscriptArchive, Any]) -> None:
    store, _ = archive
    body = SESSION_FILE.read_bytes()
    entry = ArchiveEntry("", "claude-code-jsonl", project="prøject", project_folder="-Users-me-x", sha256="ab" * 32)
    stored = store.put("acme", "7f2abd2d.jsonl", body, entry)
    assert stored.key == "transcripts/acme/claude-code-jsonl/7f2abd2d.jsonl"
    store.put("acme", "p/child.jsonl", b"{}", ArchiveEntry("", "claude-code-jsonl", sha256="cd" * 32))
    store.put("globex", "other.json", b"{}", ArchiveEntry("", "generic"))
    assert list(store.keys("acme")) == [
        "transcripts/acme/claude-code-jsonl/7f2abd2d.jsonl",
        "transcripts/acme/claude-code-jsonl/p/child.jsonl",
    ]
    got, meta = store.get("acme", stored.key)
    assert got == body and meta == stored
    with pytest.raises(NotFound):
        store.get("globex", stored.key)  # another authority's key is not found
    with pytest.raises(NotFound):
        store.get("acme", "transcripts/acme/codex-jsonl/missing.jsonl")
    store.put("acme", "7f2abd2d.jsonl", b"replaced", entry)
    assert store.get("acme", stored.key)[0] == b"replaced"


def test_archive_topics_and_uploads(archive: tuple[TranscriptArchive, Any]) -> None:
    store, put_url = archive
    store.put_topic("acme", TopicEntry("s1", "u-1", "a label"))
    store.put_topic("acme", TopicEntry("s1", "u-1", "relabelled"))
    store.put_topic("globex", TopicEntry("s1", "u-2", "theirs"))
    assert list(store.topics("acme")) == [TopicEntry("s1", "u-1", "relabelled")]
    url = store.presign_upload("acme", "up1", 60)
    assert not store.upload_exists("acme", "up1")
    with pytest.raises(NotFound):
        store.read_upload("acme", "up1")
    put_url(url, b"line\n")
    assert store.read_upload("acme", "up1") == b"line\n"
    assert store.upload_exists("acme", "up1") and not store.upload_exists("globex", "up1")
    store.delete_upload("acme", "up1")
    assert not store.upload_exists("acme", "up1")
    with pytest.raises(NotFound):
        store.read_upload("acme", "up1")


def test_upload_keys_parse() -> None:
    assert parse_upload_key("uploads/transcripts/acme/0123abcd") == ("acme", "0123abcd")
    for bad in (
        "uploads/transcripts/acme",
        "transcripts/acme/x",
        "uploads/transcripts//x",
        "uploads/transcripts/a/b/c",
        "uploads/notes/acme/x",
        "uploads/acme/x",
    ):
        assert parse_upload_key(bad) is None


# ---- the upload path, end to end on moto --------------------------------------------------------------


def recall_on_moto(moto_env: dict[str, Any], tmp_path: Path, **options: Any) -> RecallService:
    """The recall service over SQLite in `tmp_path`, the S3 archive and the DynamoDB ledger on moto."""
    return RecallService(
        SqliteSearchIndex(tmp_path / "recall.sqlite3"),
        S3Archive(bucket=moto_env["settings"].bucket, s3=moto_env["s3"]),
        DynamoIngestLedger(**recall_table(moto_env)),
        clock=lambda: NOW,
        **options,
    )


@pytest.fixture
def aws_recall(moto_env: dict[str, Any], tmp_path: Path) -> Iterator[tuple[RecallService, dict[str, Any]]]:
    yield recall_on_moto(moto_env, tmp_path), moto_env


def test_upload_is_stale_until_indexed_then_searchable(aws_recall: tuple[RecallService, dict[str, Any]]) -> None:
    service, env = aws_recall
    created = service.create_upload(ACME, {"format": "claude-code-jsonl", "project": "agent-sample"})
    stale = service.search(ACME, gate_search(q="hoge"))
    assert not stale.complete and [(r.project, r.status, r.pending) for r in stale.scopes_report] == [
        ("agent-sample", "stale", 1)
    ]
    assert "scope_incomplete" in [w.code for w in stale.warnings]
    assert requests.put(created.upload_url, data=SESSION_FILE.read_bytes(), timeout=30).status_code == 200
    result = service.index_upload("acme", created.upload_id)
    assert result is not None and result.messages_indexed == 21
    fresh = service.search(ACME, gate_search(q="hoge"))
    assert fresh.complete and fresh.count == 1 and fresh.scopes_report[0].status == "searched"
    assert service.index_upload("acme", created.upload_id) is None  # a redelivery is a no-op
    assert list(S3Archive(bucket=env["settings"].bucket, s3=env["s3"]).keys("acme")) == [
        "transcripts/acme/claude-code-jsonl/7f2abd2d-7cfc-4447-9ddd-3ca8d14e02e9.jsonl"
    ]
    with pytest.raises(ClientError):
        env["s3"].head_object(Bucket=env["settings"].bucket, Key=f"uploads/transcripts/acme/{created.upload_id}")


def test_an_unused_upload_url_leaves_the_report_when_it_expires(moto_env: dict[str, Any], tmp_path: Path) -> None:
    """Issue 16 item 7: a URL never used made every search incomplete for good. It counts while the URL
    works; after that only an upload whose bytes arrived counts (for UPLOAD_GRACE, while the indexer
    runs), so an unused URL leaves the report at the instant it expires."""
    settings = moto_env["settings"]
    now = [NOW]
    service = RecallService(
        SqliteSearchIndex(tmp_path / "recall.sqlite3"),
        S3Archive(bucket=settings.bucket, s3=moto_env["s3"]),
        DynamoIngestLedger(**recall_table(moto_env)),
        clock=lambda: now[0],
        presign_seconds=900,
    )
    service.ingest(ACME, {"format": "claude-code-jsonl", "jsonl": SESSION_FILE.read_text()})
    unused = service.create_upload(ACME, {"format": "claude-code-jsonl"})
    assert unused.expires_at == "2026-01-10T00:15:00.000Z"
    now[0] = NOW + timedelta(seconds=899)
    assert not service.search(ACME, gate_search(q="hoge")).complete
    now[0] = NOW + timedelta(seconds=900)
    with count_round_trips(moto_env["dynamodb"], moto_env["s3"]) as meter:
        envelope = service.search(ACME, gate_search(q="hoge"))
    assert envelope.complete and envelope.count == 1 and "scope_incomplete" not in [w.code for w in envelope.warnings]
    assert meter.total == 2  # the ledger query and one HEAD for the URL that expired within the grace
    now[0] = NOW + timedelta(seconds=900) + UPLOAD_GRACE
    with count_round_trips(moto_env["dynamodb"], moto_env["s3"]) as meter:
        assert service.search(ACME, gate_search(q="hoge")).complete
    assert meter.total == 1  # past the grace the entry is not even looked at

    # An upload that landed before its URL expired still counts after expiry until it is indexed.
    now[0] = NOW + timedelta(hours=1)
    used = service.create_upload(ACME, {"format": "claude-code-jsonl"})
    body = SESSION_FILE.read_bytes().replace(b"hoge", b"fuga")
    assert requests.put(used.upload_url, data=body, timeout=30).status_code == 200
    now[0] = NOW + timedelta(hours=1, seconds=901)
    late = service.search(ACME, gate_search(q="hoge"))
    assert not late.complete and sum(r.pending for r in late.scopes_report) == 1
    assert service.index_upload("acme", used.upload_id) is not None
    assert service.search(ACME, gate_search(q="fuga")).complete


def test_an_unreadable_upload_is_marked_failed_not_pending(aws_recall: tuple[RecallService, dict[str, Any]]) -> None:
    service, env = aws_recall
    created = service.create_upload(ACME, {"format": "codex-jsonl"})
    requests.put(created.upload_url, data=b"not a transcript\n", timeout=30)
    assert service.index_upload("acme", created.upload_id) is None
    ledger = DynamoIngestLedger(**recall_table(env))
    entry = ledger.get("acme", created.upload_id)
    assert entry is not None and entry.status == "failed"
    assert ledger.pending("acme", "2026-01-10T00:00:00.000Z") == []


def test_s3_notification_reaches_the_indexer_through_sqs(
    moto_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from dovecote.platform.settings import get_settings
    from functions.transcript_indexer import handler as indexer

    sqs = aws.client("sqs")
    queue = create_transcript_queue(
        s3=moto_env["s3"], sqs=sqs, bucket=moto_env["settings"].bucket, queue=DEFAULT_NAMES["transcripts_queue"]
    )
    monkeypatch.setenv("DOVECOTE_RECALL_SQLITE_PATH", str(tmp_path / "indexer.sqlite3"))
    get_settings.cache_clear()
    indexer.service.cache_clear()
    try:
        service = indexer.service()
        created = service.create_upload(ACME, {"format": "claude-code-jsonl"})
        requests.put(created.upload_url, data=SESSION_FILE.read_bytes(), timeout=30)
        messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=0)["Messages"]
        bodies = [m for m in messages if "ObjectCreated" in m["Body"]]
        assert len(bodies) == 1
        event = {
            "Records": [
                {
                    "messageId": m["MessageId"],
                    "receiptHandle": m["ReceiptHandle"],
                    "body": m["Body"],
                    "attributes": {},
                    "messageAttributes": {},
                    "md5OfBody": m["MD5OfBody"],
                    "eventSource": "aws:sqs",
                    "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:dovecote-transcripts",
                    "awsRegion": "us-east-1",
                }
                for m in messages
            ]
        }
        response = indexer.handler(event, _Context())
        assert response == {"batchItemFailures": []}
        assert service.search(ACME, gate_search(q="hoge")).count == 1
        assert indexer.uploads_in(json.dumps({"Event": "s3:TestEvent"})) == []
    finally:
        indexer.service.cache_clear()


class _Context:
    function_name = "transcript_indexer"
    memory_limit_in_mb = 2048
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:transcript_indexer"
    aws_request_id = "req-1"


# ---- faults and round trips -----------------------------------------------------------------------------


def test_a_failed_archive_write_indexes_nothing_and_the_retry_converges(
    aws_recall: tuple[RecallService, dict[str, Any]],
) -> None:
    service, env = aws_recall
    body = {"format": "claude-code-jsonl", "jsonl": SESSION_FILE.read_text()}
    inject(env["s3"], "before-call.s3.PutObject", server_error("PutObject"))
    with pytest.raises(CommitUnknown):
        service.ingest(ACME, body)
    heal(env["s3"], "before-call.s3.PutObject")
    assert service.search(ACME, gate_search(q="hoge")).count == 0  # nothing partial
    assert service.ingest(ACME, body).messages_indexed == 21
    assert service.search(ACME, gate_search(q="hoge")).count == 1


def test_a_failed_ledger_clear_is_repaired_by_the_redelivery(aws_recall: tuple[RecallService, dict[str, Any]]) -> None:
    service, env = aws_recall
    created = service.create_upload(ACME, {"format": "claude-code-jsonl"})
    requests.put(created.upload_url, data=SESSION_FILE.read_bytes(), timeout=30)
    inject(env["dynamodb"], "before-call.dynamodb.DeleteItem", server_error("DeleteItem"))
    with pytest.raises(CommitUnknown):
        service.index_upload("acme", created.upload_id)
    heal(env["dynamodb"], "before-call.dynamodb.DeleteItem")
    assert not service.search(ACME, gate_search(q="hoge")).complete  # still reported stale, not lost
    again = service.index_upload("acme", created.upload_id)
    assert again is not None and again.unchanged  # the same bytes are not indexed twice
    envelope = service.search(ACME, gate_search(q="hoge"))
    assert envelope.complete and envelope.count == 1


def test_round_trips(aws_recall: tuple[RecallService, dict[str, Any]]) -> None:
    service, env = aws_recall
    body = {"format": "claude-code-jsonl", "jsonl": SESSION_FILE.read_text()}
    with count_round_trips(env["s3"], env["dynamodb"]) as meter:
        service.ingest(ACME, body)
    assert dict(meter.calls) == {"s3.PutObject": 1}
    with count_round_trips(env["s3"], env["dynamodb"]) as meter:
        service.ingest(ACME, body)  # unchanged: skipped
    assert meter.total == 0
    with count_round_trips(env["s3"], env["dynamodb"]) as meter:
        service.search(ACME, gate_search(q="hoge"))
    assert dict(meter.calls) == {"dynamodb.Query": 1}  # the pending uploads, for completeness
    with count_round_trips(env["s3"], env["dynamodb"]) as meter:
        created = service.create_upload(ACME, {"format": "claude-code-jsonl"})
    assert dict(meter.calls) == {"dynamodb.PutItem": 1}
    requests.put(created.upload_url, data=SESSION_FILE.read_bytes().replace(b"hoge", b"fuga"), timeout=30)
    with count_round_trips(env["s3"], env["dynamodb"]) as meter:
        service.index_upload("acme", created.upload_id)
    assert dict(meter.calls) == {
        "dynamodb.GetItem": 1,
        "s3.GetObject": 1,
        "s3.PutObject": 1,
        "dynamodb.DeleteItem": 1,
        "s3.DeleteObject": 1,
    }


def _inline(session_id: str, text: str) -> dict[str, Any]:
    """A one-message transcript in the generic form, as POST /v1/transcripts takes it."""
    message = {"uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, session_id)), "role": "user", "text": text}
    return {
        "source": "t",
        "project": "p",
        "session_id": session_id,
        "messages": [{**message, "timestamp": "2026-01-01T00:00:00Z"}],
    }


def test_the_indexer_embeds_after_indexing_and_a_scheduled_run_embeds_the_rest(
    moto_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """DOVECOTE_EMBEDDER on: the upload's messages get vectors right after the lexical write; one posted
    inline (never on the queue) gets them from the scheduled run; an embedder failure fails nothing."""
    from dovecote.platform.errors import Unavailable
    from dovecote.platform.settings import get_settings
    from dovecote.recall.fusion import model_key
    from functions.transcript_indexer import handler as indexer

    sqs = aws.client("sqs")
    queue = create_transcript_queue(
        s3=moto_env["s3"], sqs=sqs, bucket=moto_env["settings"].bucket, queue=DEFAULT_NAMES["transcripts_queue"]
    )
    monkeypatch.setenv("DOVECOTE_RECALL_SQLITE_PATH", str(tmp_path / "indexer.sqlite3"))
    monkeypatch.setenv("DOVECOTE_EMBEDDER", "hashing")
    get_settings.cache_clear()
    indexer.service.cache_clear()
    try:
        service = indexer.service()
        assert service.embedder is not None
        key = model_key(service.embedder.info.model_id, service.embedder.info.dimension)
        created = service.create_upload(ACME, {"format": "claude-code-jsonl"})
        requests.put(created.upload_url, data=SESSION_FILE.read_bytes(), timeout=30)
        messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=0)["Messages"]
        records = [
            {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"], "attributes": {},
             "messageAttributes": {}, "md5OfBody": m["MD5OfBody"], "eventSource": "aws:sqs",
             "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:dovecote-transcripts", "awsRegion": "us-east-1"}
            for m in messages
        ]  # fmt: skip
        assert indexer.handler({"Records": records}, _Context()) == {"batchItemFailures": []}
        index: Any = service.index
        assert index.pending_vectors(key, "acme") == 0  # embedded right after the lexical write
        service.ingest(ACME, _inline("inline-1", "posted inline"))
        assert index.pending_vectors(key, "acme") == 1
        scheduled = {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}
        assert indexer.handler(scheduled, _Context()) == {"documents": 0, "embedded": 1}
        assert index.pending_vectors(key, "acme") == 0
        envelope = service.search(ACME, gate_search(q="inline", semantic="on"))
        assert envelope.vector_coverage.ran and envelope.vector_coverage.missing_msgs == 0
        # A backlog is worked down a bounded number of messages per scheduled run.
        monkeypatch.setattr(indexer, "BACKFILL_LIMIT", 1)
        service.ingest(ACME, _inline("inline-3", "first of two"))
        service.ingest(ACME, _inline("inline-4", "second of two"))
        assert index.pending_vectors(key, "acme") == 2
        assert indexer.handler(scheduled, _Context()) == {"documents": 0, "embedded": 1}
        assert index.pending_vectors(key, "acme") == 1
        assert indexer.handler(scheduled, _Context()) == {"documents": 0, "embedded": 1}
        assert index.pending_vectors(key, "acme") == 0

        def down(texts: Any) -> Any:
            raise Unavailable("the embedder is down")

        monkeypatch.setattr(service.embedder, "embed", down)
        service.ingest(ACME, _inline("inline-2", "another"))
        assert indexer.handler(scheduled, _Context()) == {"documents": 0, "embedded": 0}  # logged, not raised
        assert index.pending_vectors(key, "acme") == 1  # still pending: the next run embeds it
        # The session documents' migration runs on the same schedule: a session without its
        # document (as an index made before them) gets it.
        index._db.execute("DELETE FROM session_docs WHERE session_id = 'inline-1'")  # noqa: SLF001
        assert indexer.handler(scheduled, _Context())["documents"] == 1
        assert indexer.handler(scheduled, _Context())["documents"] == 0
    finally:
        indexer.service.cache_clear()
        get_settings.cache_clear()
