"""Each engine's vector tier (dovecote.recall.sqlite_vectors, dovecote.recall.opensearch_vectors) with the
hashing embedder: what is embedded, coverage under the search's filters, re-ingest and model change,
the fusion's page, one pass at a time; and sqlite-vec's cosine against numpy's (the SQLite fallback
when the extension cannot load). The OpenSearch engine runs on the real test node, whose k-NN plugin
holds the vectors in a knn_vector field (tests/opensearch_fixture.py)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import pytest

from dovecote.embedding.fakes import HashingEmbedder
from dovecote.recall.fusion import model_key
from dovecote.recall.model import Message, Session, Visibility
from dovecote.recall.ports import IndexQuery, SearchFilter, SemanticQuery, VectorTier
from dovecote.recall.query import parse_query
from dovecote.recall.sqlite import SqliteSearchIndex
from dovecote.recall.sqlite_vectors import Scope, SqliteVectors
from tests.support.opensearch_indices import pool_fixture, pooled_index

EMBEDDER = HashingEmbedder(dimension=64)
MODEL = model_key(EMBEDDER.info.model_id, EMBEDDER.info.dimension)


def message(session: str, i: int, text: str, kind: str = "text", role: str = "user") -> Message:
    return Message(
        uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session}/{i}")),
        role=role,
        kind=kind,
        text=text,
        timestamp=f"2025-01-{10 + i:02d}T00:00:00.000Z",
    )


def session(session_id: str, texts: list[str], project: str = "p") -> Session:
    return Session(session_id, "t", project, "", tuple(message(session_id, i, t) for i, t in enumerate(texts)))


def semantic_query(q: str, *, fusion: str = "rrf", limit: int = 8, project: str = "") -> IndexQuery:
    parsed = parse_query(q)
    assert parsed is not None
    vector = tuple(EMBEDDER.embed([q])[0])
    return IndexQuery(
        query=parsed,
        filter=SearchFilter(project=project, visibility=Visibility(thinking=True)),
        limit=limit,
        semantic=SemanticQuery(vector, MODEL, fusion, 0.7),
    )


def fill(index: Any) -> Any:
    index.replace_session("acme", session("s1", ["the lease fence check raced", "ok", "   "]), sha256="a")
    tool_rows = (message("s2", 0, "deploy the cache", kind="tool"), message("s2", 1, "cache warmed after deploy"))
    index.replace_session("acme", Session("s2", "t", "q", "", tool_rows), sha256="b")
    index.replace_session("other", session("s9", ["the lease fence check raced"]), sha256="c")
    return index


opensearch_pool = pool_fixture("vectors")


@pytest.fixture(params=["sqlite", "opensearch"])
def engine(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Either engine, holding s1 and s2 (acme) and s9 (other). OpenSearch: this test's own indices on
    the shared node (tests/support/opensearch_indices.pooled_index)."""
    if request.param == "sqlite":
        index = SqliteSearchIndex(":memory:")
        yield fill(index)
        index.close()
        return
    with pooled_index(request) as search:
        yield fill(search)


@pytest.fixture
def sqlite_engine() -> Iterator[SqliteSearchIndex]:
    index = fill(SqliteSearchIndex(":memory:"))
    yield index
    index.close()


def test_the_engine_is_a_vector_tier_and_embeds_conversation_rows_only(engine: Any) -> None:
    assert isinstance(engine, VectorTier)
    # s1: two non-blank text rows (the blank one has nothing to embed); s2: the text row, not the tool row.
    assert engine.pending_vectors(MODEL, "acme") == 3
    assert engine.pending_vectors(MODEL) == 4
    embedder = HashingEmbedder(dimension=64)
    assert engine.embed_pending(embedder, authority="acme") == 3
    assert engine.pending_vectors(MODEL, "acme") == 0
    assert engine.pending_vectors(MODEL, "other") == 1
    assert embedder.texts == 3
    assert engine.embed_pending(embedder, authority="acme") == 0  # nothing left: no call
    assert embedder.calls == 1


def test_a_reingest_finds_unchanged_texts_by_digest_and_embeds_only_the_new_one(engine: Any) -> None:
    embedder = HashingEmbedder(dimension=64)
    engine.embed_pending(embedder)
    before = embedder.texts
    engine.replace_session("acme", session("s1", ["the lease fence check raced", "ok", "a new line"]), sha256="d")
    assert engine.pending_vectors(MODEL, "acme") == 3  # new row ids: nothing mapped yet
    assert engine.embed_pending(embedder) == 3
    assert embedder.texts - before == 1  # only "a new line" went to the embedder
    assert engine.pending_vectors(MODEL) == 0


def test_a_change_of_model_makes_every_message_pending_and_reembeds(engine: Any) -> None:
    engine.embed_pending(HashingEmbedder(dimension=64))
    other = HashingEmbedder(dimension=32, model_id="dovecote.hashing-v2")
    other_key = model_key(other.info.model_id, other.info.dimension)
    assert engine.pending_vectors(other_key) == 4
    assert engine.embed_pending(other) == 4
    assert other.texts == 4
    assert engine.pending_vectors(other_key) == 0
    # SQLite keeps the old model's vectors beside (unused); an OpenSearch message holds one model's
    # vector, replaced: going back to the old model re-embeds there.
    assert engine.pending_vectors(MODEL) == (0 if isinstance(engine, SqliteSearchIndex) else 4)


def test_coverage_follows_the_filters_and_counts_missing_vectors(engine: Any) -> None:
    page = engine.search("acme", semantic_query("lease"))
    assert page.vectors is not None
    assert (page.vectors.ran, page.vectors.candidate_msgs, page.vectors.vectored_msgs) == (True, 3, 0)
    assert page.vectors.missing_msgs == 3
    engine.embed_pending(HashingEmbedder(dimension=64), authority="acme", limit=2)
    page = engine.search("acme", semantic_query("lease"))
    assert page.vectors is not None
    assert (page.vectors.candidate_msgs, page.vectors.vectored_msgs, page.vectors.missing_msgs) == (3, 2, 1)
    narrowed = engine.search("acme", semantic_query("lease", project="q"))
    assert narrowed.vectors is not None
    assert (narrowed.vectors.candidate_msgs, narrowed.vectors.vectored_msgs) == (1, 0)


def test_the_tier_runs_only_when_asked_and_never_reads_another_authority(engine: Any) -> None:
    engine.embed_pending(HashingEmbedder(dimension=64))
    fused = engine.search("acme", semantic_query("raced"))
    lexical = engine.search("acme", replace(semantic_query("raced"), semantic=None))
    assert lexical.vectors is None  # no semantic part: the tier did not run
    assert fused.vectors is not None and fused.vectors.ran
    # s2 shares no word with the question (cosine 0 with the hashing fake: not near); s9 is another
    # authority's copy of s1's text.
    assert [h.session.session_id for h in fused.hits] == [h.session.session_id for h in lexical.hits] == ["s1"]
    assert fused.total_sessions == 1
    newest = engine.search("acme", replace(semantic_query("raced"), sort="newest"))
    assert newest.vectors is None  # a sorted search is not a relevance search: no fusion


class SynonymEmbedder(HashingEmbedder):
    """The hashing fake with a thesaurus: "automobile" embeds as "car". A paraphrase the word index
    cannot match, and a vector that can, deterministically."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return super().embed([t.replace("automobile", "car") for t in texts])


def test_only_the_vectors_find_a_question_with_no_indexed_word(engine: Any) -> None:
    embedder = SynonymEmbedder(dimension=64)
    engine.replace_session("acme", session("s3", ["the car would not start"]), sha256="e")
    engine.embed_pending(embedder)
    q = "automobile"
    parsed = parse_query(q)
    assert parsed is not None
    semantic = SemanticQuery(tuple(embedder.embed([q])[0]), MODEL, "rrf", 0.7)
    lexical = engine.search("acme", IndexQuery(query=parsed, filter=SearchFilter(), limit=8))
    assert lexical.hits == []
    page = engine.search("acme", IndexQuery(query=parsed, filter=SearchFilter(), limit=8, semantic=semantic))
    assert [h.session.session_id for h in page.hits] == ["s3"]  # the others share no word: cosine 0, not near
    assert page.tier == "vector"
    assert page.hits[0].snippet == "the car would not start"
    assert page.total_sessions == 1


@pytest.mark.parametrize("fusion", ["rrf", "weighted"])
def test_both_fusions_keep_one_hit_per_session_and_the_page_limit(engine: Any, fusion: str) -> None:
    for n in range(12):
        engine.replace_session("acme", session(f"x{n:02d}", [f"lease number {n} fence", "more"]), sha256=f"x{n}")
    engine.embed_pending(HashingEmbedder(dimension=64))
    page = engine.search("acme", semantic_query("lease fence", fusion=fusion, limit=5))
    ids = [h.session.session_id for h in page.hits]
    assert len(ids) == 5 == len(set(ids))
    assert [h.score for h in page.hits] == sorted((h.score for h in page.hits), reverse=True)
    assert page.total_sessions >= 13


def test_sqlite_vec_and_numpy_agree(sqlite_engine: SqliteSearchIndex) -> None:
    engine = sqlite_engine
    if not engine.vectors.sqlite_vec:
        pytest.skip(reason="sqlite-vec did not load in this environment (the numpy path is the one in use)")
    for n in range(20):
        engine.replace_session("acme", session(f"y{n:02d}", [f"cache {n} warm lease", "queue"]), sha256=f"y{n}")
    engine.embed_pending(HashingEmbedder(dimension=64))
    scope = Scope("", ["m.authority = ?"], ["acme"])
    vector = EMBEDDER.embed(["cache lease warm"])[0]
    with_vec = engine.vectors.nearest(scope, MODEL, vector, 10)
    numpy_only = SqliteVectors.__new__(SqliteVectors)
    numpy_only._db, numpy_only._lock, numpy_only.sqlite_vec = engine.vectors._db, threading.RLock(), ""
    without = numpy_only.nearest(scope, MODEL, vector, 10)
    assert [r.session for r in with_vec] == [r.session for r in without]
    assert [round(r.score, 5) for r in with_vec] == [round(r.score, 5) for r in without]


class GatedEmbedder(HashingEmbedder):
    """Holds its first batch until released: a pass that is running, for real threads to meet."""

    def __init__(self) -> None:
        super().__init__(dimension=64)
        self.entered = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.entered.set()
        assert self.release.wait(30)
        return super().embed(texts)


def test_a_second_pass_while_one_runs_returns_at_once_and_nothing_is_embedded_twice(
    engine: Any,
) -> None:
    embedder = GatedEmbedder()
    results: list[int] = []
    first = threading.Thread(target=lambda: results.append(engine.embed_pending(embedder)))
    first.start()
    assert embedder.entered.wait(30)
    assert engine.embed_pending(embedder) == 0  # the running pass owns the work
    assert engine.search("acme", semantic_query("lease")).hits  # searches are not blocked by the embedder
    embedder.release.set()
    first.join(30)
    assert results == [4]
    assert embedder.texts == 4  # each once (a text shared by two authorities is embedded for each: no sharing)
    assert engine.pending_vectors(MODEL) == 0
