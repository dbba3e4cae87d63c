"""The ingested-digest ledger behind `POST /v1/transcripts/check` (dovecote.recall.digests): the
DynamoDB adapter and its fake held to one suite; the service records a file's digest once it is
archived and indexed (inline or through the indexer), per authority; the gate; the round trips."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from dovecote.platform.errors import InvalidArgument
from dovecote.platform.principal import Principal
from dovecote.recall.digests import DynamoIngestedDigests, IngestedDigests, InMemoryIngestedDigests, gate_check
from dovecote.recall.service import RecallService
from dovecote.recall.sqlite import SqliteSearchIndex
from infra.local.metering import count_round_trips
from tests.conftest import DATA
from tests.integration.test_recall_adapters import recall_on_moto, recall_table
from tests.support.stores import fake_or_moto

ACME, OTHER = Principal("acme", "caller"), Principal("other", "worker", "w1")
SESSION_FILE = DATA / "transcripts" / "claude-code" / "lanegrid-agtrace__claude_session.jsonl"
A, B, C = ("a" * 64), ("b" * 64), ("c" * 64)


@pytest.fixture(params=["memory", "dynamo"])
def digests(request: pytest.FixtureRequest) -> IngestedDigests:
    return fake_or_moto(request, InMemoryIngestedDigests, lambda env: DynamoIngestedDigests(**recall_table(env)))


def test_known_is_per_authority_and_recording_is_idempotent(digests: IngestedDigests) -> None:
    assert digests.known("acme", [A, B]) == set()
    digests.record("acme", A)
    digests.record("acme", A)
    digests.record("other", B)
    assert digests.known("acme", [A, B, C]) == {A}
    assert digests.known("other", [A, B]) == {B}
    assert digests.known("acme", []) == set()


def test_more_than_one_batch(digests: IngestedDigests) -> None:
    many = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(250)]
    for digest in many[::2]:
        digests.record("acme", digest)
    assert digests.known("acme", many) == set(many[::2])


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        {},
        {"sha256": []},
        {"sha256": "a" * 64},
        {"sha256": ["A" * 64]},
        {"sha256": ["a" * 63]},
        {"sha256": [7]},
        {"sha256": ["a" * 64] * 1001},
        {"sha256": ["a" * 64 + "\n"]},  # `$` matches before a final newline; the digest must be whole
    ],
    ids=["null", "array", "no-field", "empty", "not-a-list", "upper", "short", "number", "too-many", "newline"],
)
def test_the_gate_refuses_bad_bodies(body: Any) -> None:
    with pytest.raises(InvalidArgument):
        gate_check(body)


def test_the_gate_keeps_order_and_collapses_duplicates() -> None:
    assert gate_check({"sha256": [B, A, B]}) == [B, A]


@pytest.fixture
def recall(moto_env: dict[str, Any], tmp_path: Path) -> Iterator[tuple[RecallService, dict[str, Any]]]:
    digests = DynamoIngestedDigests(**recall_table(moto_env))
    yield recall_on_moto(moto_env, tmp_path, digests=digests), moto_env


def test_an_ingested_file_is_known_to_its_authority_only(recall: tuple[RecallService, dict[str, Any]]) -> None:
    service, env = recall
    raw = SESSION_FILE.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    assert service.unknown_transcripts(ACME, {"sha256": [digest, A]}) == [digest, A]
    with count_round_trips(env["s3"], env["dynamodb"]) as meter:
        service.ingest(ACME, {"format": "claude-code-jsonl", "jsonl": raw.decode()})
    assert dict(meter.calls) == {"s3.PutObject": 1, "dynamodb.PutItem": 1}
    with count_round_trips(env["s3"], env["dynamodb"]) as meter:
        assert service.unknown_transcripts(ACME, {"sha256": [digest, A]}) == [A]
    assert dict(meter.calls) == {"dynamodb.BatchGetItem": 1}
    assert service.unknown_transcripts(OTHER, {"sha256": [digest]}) == [digest]  # another authority lacks it


def test_a_file_indexed_through_an_upload_is_known(recall: tuple[RecallService, dict[str, Any]]) -> None:
    service, _ = recall
    raw = SESSION_FILE.read_bytes().replace(b"hoge", b"piyo")
    created = service.create_upload(ACME, {"format": "claude-code-jsonl"})
    assert requests.put(created.upload_url, data=raw, timeout=30).status_code == 200
    digest = hashlib.sha256(raw).hexdigest()
    assert service.unknown_transcripts(ACME, {"sha256": [digest]}) == [digest]  # not indexed yet
    assert service.index_upload("acme", created.upload_id) is not None
    assert service.unknown_transcripts(ACME, {"sha256": [digest]}) == []


def test_without_a_ledger_everything_is_unknown(tmp_path: Path) -> None:
    from dovecote.recall.memory import InMemoryArchive, InMemoryLedger

    service = RecallService(SqliteSearchIndex(tmp_path / "r.sqlite3"), InMemoryArchive(), InMemoryLedger())
    service.ingest(ACME, {"format": "claude-code-jsonl", "jsonl": SESSION_FILE.read_text()})
    digest = hashlib.sha256(SESSION_FILE.read_bytes()).hexdigest()
    assert service.unknown_transcripts(ACME, {"sha256": [digest]}) == [digest]
