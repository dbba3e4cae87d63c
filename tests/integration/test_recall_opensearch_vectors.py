"""The OpenSearch engine's vector tier on the real test node (k-NN plugin, Lucene engine): the exact
requests it sends for the domain (the knn_vector mapping, the filtered knn query, the coverage
count, the partial updates), what the node holds afterwards, and that both engines fuse the same
data to the same pages. The engine-level behaviour both engines share is in test_recall_vectors.py."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from dovecote.embedding.fakes import HashingEmbedder
from dovecote.recall.fusion import model_key
from dovecote.recall.model import Message, Session, Visibility
from dovecote.recall.opensearch import OpenSearchIndex
from dovecote.recall.opensearch_store import message_id
from dovecote.recall.ports import IndexQuery, SearchFilter, SemanticQuery, Withhold
from dovecote.recall.query import parse_query
from dovecote.recall.sqlite import SqliteSearchIndex
from tests.support.opensearch_indices import IndexPool, pool_fixture

EMBEDDER = HashingEmbedder(dimension=8)
MODEL = model_key(EMBEDDER.info.model_id, EMBEDDER.info.dimension)


def session(session_id: str, texts: list[str], project: str = "p") -> Session:
    messages = tuple(
        Message(
            uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session_id}/{i}")),
            role="user" if i % 2 == 0 else "assistant",
            kind="text",
            text=text,
            timestamp=f"2025-01-{10 + i:02d}T00:00:00.000Z",
        )
        for i, text in enumerate(texts)
    )
    return Session(session_id, "t", project, "", messages)


def query(q: str, *, fusion: str = "rrf", limit: int = 8, withhold: Withhold | None = None) -> IndexQuery:
    parsed = parse_query(q)
    assert parsed is not None
    vector = tuple(EMBEDDER.embed([q])[0])
    return IndexQuery(
        query=parsed,
        filter=SearchFilter(visibility=Visibility(thinking=True)),
        limit=limit,
        withhold=withhold,
        semantic=SemanticQuery(vector, MODEL, fusion, 0.7),
    )


opensearch_pool = pool_fixture("osvectors")


@pytest.fixture
def make_engine(opensearch_url: str, opensearch_pool: IndexPool) -> Iterator[Callable[..., OpenSearchIndex]]:
    from opensearchpy import OpenSearch

    made: list[tuple[OpenSearchIndex, str | None]] = []

    def make(*, fresh: bool = False, **options: Any) -> OpenSearchIndex:
        """An engine on indices of this test's own: from the pool, or (`fresh`) created by the engine
        itself with `options` (vector_dimension)."""
        prefix = f"osv-{uuid.uuid4().hex[:12]}" if fresh else opensearch_pool.take()
        client = OpenSearch(hosts=[opensearch_url], timeout=60)
        engine = OpenSearchIndex(client, index_prefix=prefix, refresh="true", **options)
        made.append((engine, None if fresh else prefix))
        return engine

    yield make
    for engine, pooled in made:
        if pooled is None:
            engine.drop_indices()
        engine.close()
        if pooled is not None:
            opensearch_pool.give_back(pooled)


@contextmanager
def recording(engine: OpenSearchIndex) -> Iterator[list[tuple[str, str, Any]]]:
    """Every request the engine sends, (method, path, body as sent), at the client's transport."""
    transport = engine.store.client.transport
    real = transport.perform_request
    sent: list[tuple[str, str, Any]] = []

    def perform(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        sent.append((method, url, kwargs.get("body")))
        return real(method, url, *args, **kwargs)

    transport.perform_request = perform  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        transport.perform_request = real  # type: ignore[method-assign]


def ndjson(body: Any) -> list[dict[str, Any]]:
    if isinstance(body, bytes):
        body = body.decode()
    if isinstance(body, str):
        return [json.loads(line) for line in body.splitlines() if line.strip()]
    return list(body)


LUCENE_COSINE = {
    "name": "hnsw",
    "engine": "lucene",
    "space_type": "cosinesimil",
    "parameters": {"m": 16, "ef_construction": 100},
}


def test_the_domains_mapping_has_a_lucene_cosine_knn_vector_of_the_configured_dimension(
    make_engine: Callable[..., OpenSearchIndex],
) -> None:
    engine = make_engine(fresh=True, vector_dimension=512)
    with recording(engine) as sent:
        engine.ensure_indices()
    created = [body for method, path, body in sent if method == "PUT" and path == f"/{engine.store.messages}"]
    assert len(created) == 1
    assert created[0]["settings"]["index"] == {"knn": True}
    properties = created[0]["mappings"]["properties"]
    assert properties["vector_512"] == {"type": "knn_vector", "dimension": 512, "method": LUCENE_COSINE}
    assert properties["digest"] == properties["vector_model"] == {"type": "keyword"}
    # What the node made of it: the k-NN plugin took the field.
    mapping = engine.store.client.indices.get_mapping(index=engine.store.messages)[engine.store.messages]["mappings"][
        "properties"
    ]
    assert mapping["vector_512"]["type"] == "knn_vector"
    assert mapping["vector_512"]["dimension"] == 512
    assert mapping["vector_512"]["method"]["engine"] == "lucene"
    assert mapping["vector_512"]["method"]["space_type"] == "cosinesimil"
    settings = engine.store.client.indices.get_settings(index=engine.store.messages)[engine.store.messages]["settings"]
    assert settings["index"]["knn"] == "true"


def test_without_an_embedder_setting_the_first_pass_adds_its_dimensions_field(
    make_engine: Callable[..., OpenSearchIndex],
) -> None:
    engine = make_engine()
    engine.replace_session("acme", session("s1", ["lease fence", "ok"]), sha256="a")
    with recording(engine) as sent:
        assert engine.embed_pending(EMBEDDER) == 2
    puts = [(path, body) for method, path, body in sent if method == "PUT" and path.endswith("/_mapping")]
    assert puts == [
        (
            f"/{engine.store.messages}/_mapping",
            {"properties": {"vector_8": {"type": "knn_vector", "dimension": 8, "method": LUCENE_COSINE}}},
        )
    ]
    updates = [ndjson(body) for method, path, body in sent if path == "/_bulk"]
    assert len(updates) == 1
    actions, docs = updates[0][0::2], updates[0][1::2]
    assert [a["update"]["routing"] for a in actions] == ["acme", "acme"]
    assert [sorted(d["doc"]) for d in docs] == [["vector_8", "vector_model"]] * 2
    assert {d["doc"]["vector_model"] for d in docs} == {MODEL}
    assert docs[0]["doc"]["vector_8"] == pytest.approx(EMBEDDER.embed(["lease fence"])[0])


def test_a_semantic_search_sends_one_filtered_knn_query_and_one_coverage_count(
    make_engine: Callable[..., OpenSearchIndex],
) -> None:
    engine = make_engine()
    engine.replace_session("acme", session("s1", ["lease fence raced", "ok"]), sha256="a")
    engine.replace_session("acme", session("s2", ["the fence again", "fine"]), sha256="b")
    engine.embed_pending(EMBEDDER)
    held = Withhold("s2", 1)
    with recording(engine) as sent:
        page = engine.search("acme", query("fence", limit=3, withhold=held))
    searches = [ndjson(body) for method, path, body in sent if path == "/_msearch"]
    knn = [lines[i + 1] for lines in searches for i in range(0, len(lines), 2) if "knn" in lines[i + 1]["query"]]
    assert len(knn) == 1
    body = knn[0]
    inner = body["query"]["knn"]["vector_8"]
    assert inner["vector"] == pytest.approx(EMBEDDER.embed(["fence"])[0])
    assert inner["k"] == 100  # at least KNN_MIN_MESSAGES, so a chatty session cannot crowd out the rest
    scope, in_model = inner["filter"]["bool"]["filter"]
    assert in_model == {"term": {"vector_model": MODEL}}
    filters = scope["bool"]["filter"]
    assert filters[0] == {"term": {"authority": "acme"}}
    assert {"exists": {"field": "digest"}} in filters  # conversation messages only
    held_clause = {"bool": {"filter": [{"term": {"session_id": "s2"}}, {"range": {"pos": {"gte": 1}}}]}}
    assert held_clause in scope["bool"]["must_not"]  # the caller's live turn is no anchor
    assert {k: v for k, v in body.items() if k != "query"} == {
        "size": 3,
        "collapse": {"field": "session_id"},
        "sort": [{"_score": "desc"}, {"rowid": "asc"}],
        "_source": False,
        "docvalue_fields": ["rowid", "pos"],
    }
    # The coverage count rides in the same msearch, over the same scope.
    coverage_lines = [line for lines in searches for line in lines if "vectored" in line.get("aggs", {})]
    assert coverage_lines == [
        {
            "query": scope,
            "size": 0,
            "track_total_hits": True,
            "aggs": {"vectored": {"filter": {"term": {"vector_model": MODEL}}}},
        }
    ]
    assert page.vectors is not None
    assert (page.vectors.candidate_msgs, page.vectors.vectored_msgs) == (3, 3)  # s2's row 1 is withheld


def test_a_reingest_reuses_the_stored_vectors_of_unchanged_texts(make_engine: Callable[..., OpenSearchIndex]) -> None:
    engine = make_engine()
    engine.replace_session("acme", session("s1", ["lease fence", "ok"]), sha256="a")
    first = HashingEmbedder(dimension=8)
    assert engine.embed_pending(first) == 2
    engine.replace_session("acme", session("s1", ["lease fence", "ok", "a new line"]), sha256="b")
    again = HashingEmbedder(dimension=8)
    assert engine.pending_vectors(MODEL, "acme") == 3  # a new generation: no vectors on its documents yet
    assert engine.embed_pending(again) == 3
    assert again.texts == 1  # only the new text went to the embedder
    assert engine.pending_vectors(MODEL, "acme") == 0


def test_without_an_authority_a_pass_walks_every_authority(make_engine: Callable[..., OpenSearchIndex]) -> None:
    engine = make_engine()
    for who in ("acme", "globex", "initech"):
        engine.replace_session(who, session("s1", [f"{who} lease", "ok"]), sha256=who)
    assert engine.pending_vectors(MODEL) == 6
    assert engine.embed_pending(EMBEDDER, limit=3) == 3
    assert engine.pending_vectors(MODEL) == 3
    assert engine.embed_pending(EMBEDDER) == 3
    assert engine.pending_vectors(MODEL) == 0


def test_a_vector_of_a_collected_generation_is_skipped_not_failed(make_engine: Callable[..., OpenSearchIndex]) -> None:
    """A pass that read a page, then lost its documents to a re-ingest's garbage collection, writes
    what still exists and fails nothing."""
    engine = make_engine()
    engine.replace_session("acme", session("s1", ["lease fence", "ok"]), sha256="a")
    kept, gone = message_id("acme", 1, 0), message_id("acme", 1, 1)  # the first generation is 1
    engine.store.client.delete(index=engine.store.messages, id=gone, routing="acme", refresh=True)
    written = engine.vectors.update_vectors("acme", [(kept, {"vector_model": MODEL}), (gone, {"vector_model": MODEL})])
    assert written == 1
    assert (
        engine.store.client.get(index=engine.store.messages, id=kept, routing="acme")["_source"]["vector_model"]
        == MODEL
    )


@pytest.mark.parametrize("fusion", ["rrf", "weighted"])
def test_both_engines_fuse_the_same_data_to_the_same_page(
    make_engine: Callable[..., OpenSearchIndex], fusion: str
) -> None:
    texts = {
        "a": ["the lease fence check raced", "we patched the fence"],
        "b": ["cache warmed after the deploy", "the lease was renewed"],
        "c": ["fence posts and a garden", "unrelated"],
        "d": ["nothing in common here", "still nothing"],
        "e": ["raced the check again", "lease fence lease fence"],
    }
    opensearch = make_engine()
    sqlite = SqliteSearchIndex(":memory:")
    try:
        for engine in (opensearch, sqlite):
            for sid, lines in texts.items():
                engine.replace_session("acme", session(sid, lines), sha256=sid)
            engine.embed_pending(HashingEmbedder(dimension=8))
        for q in ("lease fence", "raced", "garden posts", "renewed deploy"):
            pages = [e.search("acme", query(q, fusion=fusion, limit=4)) for e in (opensearch, sqlite)]
            ids = [[h.session.session_id for h in p.hits] for p in pages]
            assert pages[0].total_sessions == pages[1].total_sessions, q
            assert pages[0].vectors == pages[1].vectors, q
            if fusion == "rrf":  # ranks only: the same lists fuse to the same scores
                assert ids[0] == ids[1], q
                assert [round(h.score, 6) for h in pages[0].hits] == [round(h.score, 6) for h in pages[1].hits], q
            else:  # normalised relevance: Lucene's bm25 and FTS5's differ in scale, so may the order
                assert set(ids[0]) == set(ids[1]), q
                assert ids[0][0] == ids[1][0], q
    finally:
        sqlite.close()


def test_an_index_made_before_the_tier_says_it_cannot_hold_vectors_and_fails_nothing(
    make_engine: Callable[..., OpenSearchIndex],
) -> None:
    """An index without index.knn (made by an earlier version): embedding is `unavailable` (the
    indexer logs it and the upload stands), and a semantic search still answers, with the words."""
    from dovecote.platform.errors import Unavailable
    from dovecote.recall.opensearch_mapping import ANALYSIS, MESSAGE_MAPPING

    engine = make_engine(fresh=True)
    old = {"settings": {"analysis": ANALYSIS}, "mappings": MESSAGE_MAPPING}  # no index.knn
    engine.store.client.indices.create(index=engine.store.messages, body=old)
    engine.replace_session("acme", session("s1", ["lease fence", "ok"]), sha256="a")
    with pytest.raises(Unavailable, match="cannot hold vectors"):
        engine.embed_pending(EMBEDDER)
    page = engine.search("acme", query("lease"))
    assert [h.session.session_id for h in page.hits] == ["s1"]
    assert page.vectors is not None
    assert (page.vectors.candidate_msgs, page.vectors.vectored_msgs, page.vectors.missing_msgs) == (2, 0, 2)


def test_a_vector_write_the_node_does_not_answer_is_unavailable_and_the_next_pass_completes(
    make_engine: Callable[..., OpenSearchIndex],
) -> None:
    """The indexer treats `unavailable` as "try later" (the upload stands): a lost bulk of vectors,
    which may have landed, is reported so; the next pass writes whatever is still pending."""
    from opensearchpy.exceptions import ConnectionError as OSConnectionError

    from dovecote.platform.errors import Unavailable

    engine = make_engine()
    engine.replace_session("acme", session("s1", ["lease fence", "ok", "third"]), sha256="a")
    transport = engine.store.client.transport
    real = transport.perform_request

    def lose_the_bulk(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if url == "/_bulk":
            raise OSConnectionError("N/A", "injected fault", None)
        return real(method, url, *args, **kwargs)

    transport.perform_request = lose_the_bulk  # type: ignore[method-assign]
    try:
        with pytest.raises(Unavailable, match="did not take the vectors"):
            engine.embed_pending(EMBEDDER)
    finally:
        transport.perform_request = real  # type: ignore[method-assign]
    assert engine.pending_vectors(MODEL, "acme") == 3  # nothing was written
    assert engine.embed_pending(EMBEDDER) == 3
    assert engine.pending_vectors(MODEL, "acme") == 0
