"""The semantic tier through RecallService (issue 20): `semantic=on|off`, `vector_coverage` and the
`vector_gap` warning as the reference has them, embedding off the request path, and the tier's honest
report where it does not run (no embedder, a sorted search, an engine without vectors, an embedder
that fails). The hashing fake stands in for a model here; tests/e2e/test_recall_semantic.py uses
the local model."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from dovecote.embedding.fakes import HashingEmbedder
from dovecote.platform.errors import InvalidArgument, Unavailable
from dovecote.platform.principal import Principal
from dovecote.recall.memory import InMemoryArchive, InMemoryLedger
from dovecote.recall.model import WARNING_ORDER, gate_search
from dovecote.recall.ports import SearchIndex
from dovecote.recall.service import RecallService
from dovecote.recall.sqlite import SqliteSearchIndex
from tests.support.transcripts import transcript

ACME = Principal("acme", "caller")


def body(session_id: str, texts: list[str], project: str = "alpha") -> dict[str, Any]:
    return transcript(session_id, texts, project, source="test")


class SynonymEmbedder(HashingEmbedder):
    """The hashing fake with a thesaurus ("automobile" embeds as "car"): a paraphrase the word index
    cannot match and the vectors can, deterministically."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return super().embed([t.replace("automobile", "car") for t in texts])


class FailingEmbedder(HashingEmbedder):
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise Unavailable("the embedder is down")


@pytest.fixture
def engine() -> Iterator[SqliteSearchIndex]:
    index = SqliteSearchIndex(":memory:")
    yield index
    index.close()


def service(index: SearchIndex, embedder: HashingEmbedder | None = None, **options: Any) -> RecallService:
    recall = RecallService(index, InMemoryArchive(), InMemoryLedger(), embedder=embedder, **options)
    recall.ingest(ACME, body("s-car", ["the car would not start this morning", "try the battery"]))
    recall.ingest(ACME, body("s-cache", ["the cache warmed after the deploy", "good"], project="beta"))
    return recall


def test_a_paraphrase_sharing_no_word_is_found_only_with_the_tier_on(engine: SqliteSearchIndex) -> None:
    recall = service(engine, SynonymEmbedder())
    assert recall.embed_pending() == 4
    off = recall.search(ACME, gate_search(q="automobile", semantic="off"))
    on = recall.search(ACME, gate_search(q="automobile", semantic="on"))
    assert off.results == []
    assert (off.vector_coverage.ran, off.vector_coverage.candidate_msgs) == (False, 0)
    assert [r.session_id for r in on.results] == ["s-car"]
    assert on.vector_coverage.ran
    assert (on.vector_coverage.candidate_msgs, on.vector_coverage.vectored_msgs) == (4, 4)
    assert on.vector_coverage.missing_msgs == 0
    assert "vector_gap" not in [w.code for w in on.warnings]
    assert on.store_note == ""  # not the trigram note: the vectors found it
    assert on.total_matches == 1


def test_partial_coverage_raises_vector_gap_with_its_facts_in_the_seeds_order(engine: SqliteSearchIndex) -> None:
    recall = service(engine, HashingEmbedder())
    engine.embed_pending(HashingEmbedder(), limit=1)
    envelope = recall.search(ACME, gate_search(q="car battery", semantic="on"))
    coverage = envelope.vector_coverage
    assert (coverage.ran, coverage.candidate_msgs, coverage.vectored_msgs, coverage.missing_msgs) == (True, 4, 1, 3)
    codes = [w.code for w in envelope.warnings]
    assert "vector_gap" in codes
    assert codes == sorted(codes, key=WARNING_ORDER.index)
    gap = next(w for w in envelope.warnings if w.code == "vector_gap")
    assert gap.facts == {"candidate_msgs": 4, "vectored_msgs": 1, "missing_msgs": 3}
    recall.embed_pending()
    complete = recall.search(ACME, gate_search(q="car battery", semantic="on"))
    assert complete.vector_coverage.missing_msgs == 0
    assert "vector_gap" not in [w.code for w in complete.warnings]


def test_coverage_is_of_the_searched_corpus(engine: SqliteSearchIndex) -> None:
    recall = service(engine, HashingEmbedder())
    recall.embed_pending()
    recall.ingest(ACME, body("s-new", ["a fresh message", "and its answer", "third"], project="beta"))
    narrowed = recall.search(ACME, gate_search(q="cache", semantic="on", project="alpha"))
    assert (narrowed.vector_coverage.candidate_msgs, narrowed.vector_coverage.missing_msgs) == (2, 0)
    everything = recall.search(ACME, gate_search(q="cache", semantic="on"))
    assert (everything.vector_coverage.candidate_msgs, everything.vector_coverage.missing_msgs) == (7, 3)


def test_the_default_is_the_services_and_an_explicit_switch_wins(engine: SqliteSearchIndex) -> None:
    default_on = service(engine, HashingEmbedder(), semantic_default=True)
    assert default_on.search(ACME, gate_search(q="cache")).vector_coverage.ran
    assert not default_on.search(ACME, gate_search(q="cache", semantic="off")).vector_coverage.ran
    other = SqliteSearchIndex(":memory:")
    default_off = service(other, HashingEmbedder(), semantic_default=False)
    assert not default_off.search(ACME, gate_search(q="cache")).vector_coverage.ran
    assert default_off.search(ACME, gate_search(q="cache", semantic="on")).vector_coverage.ran


@pytest.mark.parametrize(
    ("embedder", "options"),
    [(None, {}), (HashingEmbedder(), {"sort": "newest"}), (FailingEmbedder(), {})],
    ids=["no-embedder", "sorted", "embedder-down"],
)
def test_where_the_tier_does_not_run_the_envelope_says_so_and_the_words_still_answer(
    engine: SqliteSearchIndex, embedder: HashingEmbedder | None, options: dict[str, str]
) -> None:
    recall = service(engine, embedder)
    envelope = recall.search(ACME, gate_search(q="cache", semantic="on", **options))
    coverage = envelope.vector_coverage
    assert (coverage.ran, coverage.candidate_msgs, coverage.vectored_msgs, coverage.missing_msgs) == (False, 0, 0, 0)
    assert [r.session_id for r in envelope.results] == ["s-cache"]
    assert "vector_gap" not in [w.code for w in envelope.warnings]


def test_embedding_is_off_the_request_path(engine: SqliteSearchIndex) -> None:
    embedder = HashingEmbedder()
    recall = service(engine, embedder)
    assert embedder.texts == 0  # ingest wrote the lexical index only
    recall.search(ACME, gate_search(q="cache", semantic="on"))
    assert embedder.texts == 1  # the question, nothing else
    assert recall.embed_pending("acme") == 4


def test_no_embedder_embeds_nothing(engine: SqliteSearchIndex) -> None:
    assert service(engine, None).embed_pending() == 0


def test_next_command_keeps_the_switch(engine: SqliteSearchIndex) -> None:
    recall = service(engine, HashingEmbedder())
    for n in range(3):
        recall.ingest(ACME, body(f"s-more-{n}", ["the cache again", "ok"]))
    envelope = recall.search(ACME, gate_search(q="cache", semantic="on", limit=1))
    assert envelope.has_more
    assert "--semantic on" in envelope.next_command


@pytest.mark.parametrize("value", ["yes", "ON", 1])
def test_semantic_is_on_off_or_absent(value: Any) -> None:
    with pytest.raises(InvalidArgument) as caught:
        gate_search(q="x", semantic=value)
    assert caught.value.details["field"] == "semantic"
