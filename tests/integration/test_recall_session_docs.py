"""The session documents (ranking.py's `session-doc`, the default ranker) on every SearchIndex engine:
kept in step with replace and delete, scoped to the authority and the session-level filters, and
fused into the search's order. The engines are the conformance suite's (SQLite FTS5 in memory, a
real OpenSearch node); every test asserts orders and presence, never engine scores."""

from __future__ import annotations

from typing import Any

import pytest

from dovecote.recall.model import Visibility
from dovecote.recall.ports import IndexQuery, SearchFilter, SearchIndex
from dovecote.recall.query import parse_query
from dovecote.recall.service import RecallService
from tests.integration import test_recall_index_conformance as conformance

# The conformance suite's fixtures: an engine per parameter, the service over it.
from tests.integration.test_recall_index_conformance import (  # noqa: F401 - fixtures
    archive,
    index_engine,
    ledger,
    opensearch_pool,
    recall,
)


def documents(engine: SearchIndex, q: str, who: str = "acme", **filters: Any) -> list[str]:
    query = parse_query(q)
    assert query is not None
    f = SearchFilter(visibility=Visibility(thinking=True), **filters)
    return engine.document_order(who, IndexQuery(query=query, filter=f, limit=8, ranker="session-doc"))  # type: ignore[attr-defined]


def test_every_ingested_session_has_a_document(recall: RecallService, index_engine: SearchIndex) -> None:
    conformance.put(recall, "one", ["the heron nests by the quarry", "nice"])
    conformance.put(recall, "two", ["a quarry lake", "and a heron"])  # the words over two messages: one document
    conformance.put(recall, "other", ["nothing related"])
    assert sorted(documents(index_engine, "heron quarry")) == ["one", "two"]
    assert documents(index_engine, "related") == ["other"]


def test_a_document_follows_its_session_through_replace(recall: RecallService, index_engine: SearchIndex) -> None:
    conformance.put(recall, "r", ["alpha original wording", "beta second"])
    assert documents(index_engine, "alpha") == ["r"]
    conformance.put(recall, "r", ["gamma rewritten"])
    assert documents(index_engine, "alpha") == []  # the old version's words are gone from it
    assert documents(index_engine, "gamma") == ["r"]
    assert documents(index_engine, "gamma rewritten alpha") == ["r"]  # one document, not two versions


def test_documents_go_with_the_authority(recall: RecallService, index_engine: SearchIndex) -> None:
    conformance.put(recall, "shared-id", ["acme secret plan"], who=conformance.ACME)
    conformance.put(recall, "shared-id", ["globex other plan"], who=conformance.GLOBEX)
    assert documents(index_engine, "secret") == ["shared-id"]
    assert documents(index_engine, "secret", who="globex") == []
    index_engine.delete_authority("acme")
    assert documents(index_engine, "plan") == []
    assert documents(index_engine, "plan", who="globex") == ["shared-id"]


def test_documents_hold_what_a_default_search_shows(recall: RecallService, index_engine: SearchIndex) -> None:
    conformance.put(recall, "tooly", [("user", "run it"), ("assistant", "zanzibar output of a tool", "tool")])
    conformance.put(recall, "thinky", [("user", "hm"), ("assistant", "zanzibar pondered", "thinking")])
    # Tool rows are not in a document (a search without include_tools hides them); thinking is.
    assert documents(index_engine, "zanzibar") == ["thinky"]


def test_documents_keep_the_session_level_filters(recall: RecallService, index_engine: SearchIndex) -> None:
    conformance.put(recall, "a", ["kumquat tree"], project="alpha")
    conformance.put(recall, "b", ["kumquat jam", "and toast", "and tea"], project="beta", source="codex")
    assert sorted(documents(index_engine, "kumquat")) == ["a", "b"]
    assert documents(index_engine, "kumquat", project="beta") == ["b"]
    assert documents(index_engine, "kumquat", source="codex") == ["b"]
    assert documents(index_engine, "kumquat", min_messages=3) == ["b"]
    assert documents(index_engine, "kumquat", places=frozenset({("alpha", "")})) == ["a"]


def test_a_subagent_thread_has_a_document_found_only_when_asked(
    recall: RecallService, index_engine: SearchIndex
) -> None:
    conformance.read_sample(recall, "claude-code", "lanegrid-agtrace__claude_session.jsonl")
    conformance.read_sample(recall, "claude-code", "lanegrid-agtrace__claude_agent.jsonl")
    assert all("/" not in s for s in documents(index_engine, "codebase"))
    assert any(s.endswith("/0c4c3cf8") for s in documents(index_engine, "codebase", subagents=True))


def test_the_documents_reorder_the_sessions_the_messages_found(recall: RecallService) -> None:
    """Both sessions name both words in one message (the same coverage and union); one keeps
    talking about them over the session (its document is about them), the other names them once
    among much else. `session` keeps insertion order at equal keys and near-equal bm25; `session-doc`
    puts the conversation about the words first. A session only a document would find is never
    added: the message candidates decide what matches."""
    for i in range(12):  # the words are rare in the corpus, as in a real one
        conformance.put(recall, f"filler{i}", [f"unrelated chatter {i}", "weather and lunch", "see you"])
    conformance.put(
        recall, "once", ["the wombat burrow and the dingo fence", *[f"talk of other things {i}" for i in range(20)]]
    )
    conformance.put(
        recall,
        "about",
        ["the wombat burrow and the dingo fence", *[f"the wombat dug; the dingo {i}" for i in range(6)]],
    )
    fused = conformance.search(recall, "wombat dingo")
    assert fused.results[0].session_id == "about"
    assert sorted(conformance.sessions_of(fused)) == ["about", "once"]
    assert fused.results[0].read_ref.startswith("about:")
    # A filter a document cannot apply (per message) still selects: only the candidates are ranked.
    assert conformance.sessions_of(conformance.search(recall, "wombat dingo", role="assistant")) == ["about"]


def test_the_page_is_a_prefix_of_the_wider_page(recall: RecallService) -> None:
    """The fused order does not depend on the limit (next_command widens it)."""
    for i in range(14):
        conformance.put(recall, f"s{i:02d}", [f"marmot {'burrow ' * (i % 4)}note {i}", *(["marmot again"] * (i % 3))])
    wide = conformance.sessions_of(conformance.search(recall, "marmot burrow", limit=30))
    for limit in (1, 3, 8):
        assert conformance.sessions_of(conformance.search(recall, "marmot burrow", limit=limit)) == wide[:limit]


@pytest.mark.parametrize("sort", ["newest", "oldest"])
def test_a_sort_by_time_ignores_the_documents(recall: RecallService, sort: str) -> None:
    conformance.put(recall, "early", ["llama llama llama talk", "llama"], base=_day(1))
    conformance.put(recall, "late", ["a llama once"], base=_day(5))
    assert conformance.sessions_of(conformance.search(recall, "llama", sort=sort)) == (
        ["late", "early"] if sort == "newest" else ["early", "late"]
    )


def _day(n: int) -> Any:
    from datetime import UTC, datetime

    return datetime(2025, 6, n, tzinfo=UTC)


def test_the_backfill_writes_what_is_missing_and_only_that(recall: RecallService, index_engine: SearchIndex) -> None:
    """The migration for an index made before the documents: `fill_session_docs` writes the
    document of every session without one (here removed by hand, as an old index lacks them)."""
    conformance.put(recall, "old", ["pangolin scales", "more"])
    conformance.put(recall, "new", ["pangolin"])
    assert index_engine.fill_session_docs() == 0  # type: ignore[attr-defined]  # nothing missing
    _forget_document(index_engine, "acme", "old")
    assert documents(index_engine, "pangolin") == ["new"]
    assert index_engine.fill_session_docs() == 1  # type: ignore[attr-defined]
    assert sorted(documents(index_engine, "pangolin")) == ["new", "old"]
    assert index_engine.fill_session_docs() == 0  # type: ignore[attr-defined]


def _forget_document(engine: SearchIndex, authority: str, session_id: str) -> None:
    """What an index made before the documents looks like for one session."""
    from dovecote.recall.sqlite import SqliteSearchIndex

    if isinstance(engine, SqliteSearchIndex):
        engine._db.execute(  # noqa: SLF001 - the test plays the older version
            "DELETE FROM session_docs WHERE authority = ? AND session_id = ?", (authority, session_id)
        )
        return
    client = engine.store.client  # type: ignore[attr-defined]  # noqa: SLF001
    snap = engine.store.snapshot(authority)  # type: ignore[attr-defined]  # noqa: SLF001
    found = client.search(
        index=engine.store.sessions,  # type: ignore[attr-defined]
        routing=authority,
        body={"query": engine.store.visible(authority, snap, {"term": {"session_id": session_id}}), "_source": ["gen"]},  # type: ignore[attr-defined]  # noqa: SLF001
    )
    gen = found["hits"]["hits"][0]["_source"]["gen"]
    client.delete(index=engine.store.documents, id=f"{authority}|{gen}|d", routing=authority, refresh="true")  # type: ignore[attr-defined]
    client.update(
        index=engine.store.sessions,  # type: ignore[attr-defined]
        id=f"{authority}|{gen}|s",
        routing=authority,
        refresh="true",
        body={"script": {"source": "ctx._source.remove('documented')"}},
    )
