"""A valid memory write must not fail for good: long words on DynamoDB (moto) through the memory
worker's real path, and a request AWS refuses as invalid ending the write `failed` at once with AWS's
reason (never `commit_unknown`, never retried), with nothing partial left. The fake store is held to
the same refusal."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from botocore.exceptions import ClientError

from dovecote.memory import lexicon
from dovecote.memory.model import WRITE_COMPLETE, WRITE_FAILED, Evidence, Memory, QueueMessage
from dovecote.memory.ports import Application, StoreRefused
from dovecote.memory.retrieval import Posting
from dovecote.memory.worker import GIVE_UP_AT
from tests.integration import test_memory_conformance, test_memory_pipeline
from tests.integration.test_memory_pipeline import ADMIN, CALLER, Pipeline
from tests.support.faults import failing, heal, inject, server_error
from tests.unit.test_memory_service import Harness

pipeline = test_memory_pipeline.pipeline  # the fixture: DynamoDB + SQS FIFO on moto, the real worker handler
harness = test_memory_conformance.harness  # the fixture: the fake store, then DynamoDB on moto

VALIDATION = "One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit"


def validation_error(operation: str) -> ClientError:
    return ClientError({"Error": {"Code": "ValidationException", "Message": VALIDATION}}, operation)


def cancelled_for_validation(operation: str) -> ClientError:
    reasons = [{"Code": "None"}, {"Code": "ValidationError", "Message": "Item size has exceeded the maximum"}]
    error = {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"}
    return ClientError({"Error": error, "CancellationReasons": reasons}, operation)


# ---- long words complete ------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["a" * 2048, "é" * 4096, " ".join(["a" * 2048, "b" * 2048, "c" * 2048])])
def test_a_write_of_long_words_completes_through_the_worker(pipeline: Pipeline, content: str) -> None:
    assert pipeline.submit("long", content)["status"] == "queued"
    pipeline.drain()
    status = pipeline.status("long")
    assert status["status"] == "complete", status
    assert status["evidence"]["code"] == WRITE_COMPLETE and status["evidence"]["write_ok"] is True
    assert pipeline.memory_ids() == ["long"]
    terms = tuple(lexicon.terms(content))
    view = pipeline.store.scope_view("acme", "s", terms)
    assert view.memories == 1 and {t: p.df for t, p in view.postings.items()} == dict.fromkeys(terms, 1)
    assert pipeline.dead_bodies() == []


def test_the_same_long_word_written_again_is_found_through_its_posting(pipeline: Pipeline) -> None:
    word = "q" * 2048
    pipeline.submit("first", f"{word} retry limit")
    pipeline.drain()
    pipeline.submit("second", f"{word} retry limit")
    pipeline.drain()
    assert pipeline.memory_ids() == ["first", "second"]
    (term,) = lexicon.terms(word)
    assert pipeline.store.scope_view("acme", "s", (term,)).postings[term].df == 2
    # The detector was handed the first memory: it found it through the long word's posting.
    relations = pipeline.service.list_relations(CALLER, "s", "", None, None)["items"]
    assert [(r["from"], r["to"]) for r in relations] == [("second", "first")]
    assert f"term:{term}" in relations[0]["evidence_ids"]


# ---- AWS refuses the request --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "code"),
    [(validation_error, "ValidationException"), (cancelled_for_validation, "ValidationError")],
    ids=["ValidationException", "cancelled-ValidationError"],
)
def test_a_refused_apply_fails_the_write_at_once_with_the_real_reason_and_nothing_partial(
    pipeline: Pipeline, caplog: pytest.LogCaptureFixture, fault: Any, code: str
) -> None:
    body = pipeline.conflicting()
    with (
        failing(pipeline.env["dynamodb"], "before-call.dynamodb.TransactWriteItems", fault("TransactWriteItems")),
        caplog.at_level(logging.ERROR, logger="dovecote.memory.worker"),
    ):
        assert pipeline.worker.handle(body, receive_count=1) == "failed"  # the first receive, not the third

    status = pipeline.status("b")
    assert status["status"] == "failed"
    evidence = status["evidence"]
    assert evidence["code"] == WRITE_FAILED and evidence["write_ok"] is False
    assert evidence["error"]["code"] == code and evidence["error"]["code"] != "commit_unknown"
    assert evidence["error"]["message"].startswith("TransactWriteItems: ")
    assert "retry" not in evidence["error"]["message"].lower()
    (record,) = [r for r in caplog.records if r.getMessage() == "memory write refused by the store"]
    assert record.code == code and record.write == "b"  # type: ignore[attr-defined]
    assert evidence["error"]["message"] == record.error  # type: ignore[attr-defined]

    # Nothing partial: no memory, posting, relation or scope count for b; a stays as it was.
    assert pipeline.memory_ids() == ["a"]
    view = pipeline.store.scope_view("acme", "s", ("retry", "limit", "7"))
    assert view.memories == 1 and "7" not in view.postings and view.postings["retry"].df == 1
    assert pipeline.service.list_relations(CALLER, "s", "", None, None)["items"] == []
    # Kept for a redrive once the cause is fixed, and not retried meanwhile.
    assert pipeline.dead_bodies() == [body]
    assert pipeline.worker.handle(body, receive_count=2) == "duplicate"
    assert pipeline.service.redrive(ADMIN) == {"moved": 1, "writes": ["b"]}
    pipeline.drain()
    assert pipeline.status("b")["status"] == "complete" and pipeline.memory_ids() == ["a", "b"]


def test_a_refused_read_of_the_postings_fails_the_write_at_once_too(pipeline: Pipeline) -> None:
    # Real DynamoDB refuses an over-long key in TransactGetItems as well (moto does not check there).
    pipeline.submit("b", "the retry limit is 7")
    body = QueueMessage("acme", "b", "s").to_body()
    refused = validation_error("TransactGetItems")
    with failing(pipeline.env["dynamodb"], "before-call.dynamodb.TransactGetItems", refused):
        assert pipeline.worker.handle(body, receive_count=1) == "failed"
    error = pipeline.status("b")["evidence"]["error"]
    assert error == {"code": "ValidationException", "message": f"TransactGetItems: {VALIDATION}"}
    assert pipeline.memory_ids() == [] and pipeline.dead_bodies() == [body]


def test_any_other_aws_failure_is_still_retried_before_the_write_fails(pipeline: Pipeline) -> None:
    ddb = pipeline.env["dynamodb"]
    pipeline.submit("b", "the retry limit is 7")
    body = QueueMessage("acme", "b", "s").to_body()
    inject(ddb, "before-call.dynamodb.TransactWriteItems", server_error("TransactWriteItems"))
    with pytest.raises(Exception, match="retry"):
        pipeline.worker.handle(body, receive_count=1)
    assert pipeline.status("b")["status"] == "started"
    assert pipeline.worker.handle(body, receive_count=GIVE_UP_AT) == "failed"
    heal(ddb, "before-call.dynamodb.TransactWriteItems")
    assert pipeline.status("b")["evidence"]["error"]["code"] == "commit_unknown"


# ---- the port: both backends refuse an over-long key alike ---------------------------------------


def test_apply_with_a_posting_key_over_the_limit_is_refused_and_changes_nothing(harness: Harness) -> None:
    harness.submit("w", "fact")
    won, write = harness.store.start_write("acme", "w", "2026-01-01T00:00:00.000Z")
    assert won and write is not None
    memory = Memory("acme", "w", "s", 1, "fact", (), "2026-01-01T00:00:00.000Z")
    huge = "x" * 2100  # what the lexicon no longer makes
    application = Application(
        write,
        memory,
        Evidence(WRITE_COMPLETE, True),
        (),
        {"fact": (None, Posting(1, (1,))), huge: (None, Posting(1, (1,)))},
        0,
    )
    with pytest.raises(StoreRefused) as refused:
        harness.store.apply(application)
    assert refused.value.code == "ValidationException"
    assert harness.store.get_write("acme", "w").status == "started"  # type: ignore[union-attr]
    assert harness.store.memories("acme", "s", 0, 10) == []
    assert harness.store.scope_view("acme", "s", ("fact",)).memories == 0
    assert harness.store.scope_view("acme", "s", ("fact",)).postings == {}
