"""The SQLite engine's two-step candidate read (sqlite_rank.ranked): the best matches by bm25 from the
word index alone, then the row lookups and the filter for those only, falling back to every match
when the filter keeps too few of them. Either way the page is the one ranking every match gives."""

from __future__ import annotations

import uuid

import pytest

from dovecote.recall import sqlite_rank
from dovecote.recall.model import Message, Session, Visibility
from dovecote.recall.ports import IndexQuery, SearchFilter
from dovecote.recall.query import parse_query
from dovecote.recall.ranking import rank_sessions
from dovecote.recall.sqlite import SqliteSearchIndex


def _message(session: str, i: int, text: str, kind: str = "text") -> Message:
    return Message(
        uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session}/{i}")),
        role="assistant",
        kind=kind,
        text=text,
        timestamp=f"2025-01-01T00:{i:02d}:00.000Z",
        human=False,
    )


@pytest.fixture
def engine() -> SqliteSearchIndex:
    """Tool rows (hidden by default) hold the best-scoring matches: short, the word repeated; the
    visible matches score lower and come later."""
    index = SqliteSearchIndex(":memory:")
    for s in range(6):
        rows = [_message(f"tools{s}", i, "lattice lattice lattice", "tool") for i in range(5)]
        index.replace_session("acme", Session(f"tools{s}", "t", "p", "", tuple(rows)), sha256="x")
    for s in range(4):
        rows = [_message(f"text{s}", i, f"a long message about the lattice number {i} and more") for i in range(3)]
        index.replace_session("acme", Session(f"text{s}", "t", "p", "", tuple(rows)), sha256="x")
    return index


@pytest.mark.parametrize("ceiling", [2, 5, 100])
@pytest.mark.parametrize("tools", [False, True])
def test_the_page_is_the_one_every_match_gives(
    engine: SqliteSearchIndex, ceiling: int, tools: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = parse_query("lattice")
    assert query is not None
    index_query = IndexQuery(
        query=query,
        filter=SearchFilter(visibility=Visibility(tools=tools)),
        limit=20,
        max_candidates=ceiling,
    )
    scans: list[str] = []
    real = engine._execute

    def spy(sql: str, params: list[object]) -> list[object]:
        scans.append("two-step" if sql.startswith("WITH top") else "every match")
        return real(sql, params)

    monkeypatch.setattr(engine, "_execute", spy)
    page = engine.search("acme", index_query)
    monkeypatch.setattr(engine, "_execute", real)
    every = engine.reference_candidates("acme", index_query)
    expected = rank_sessions(every[:ceiling], ranker=index_query.ranker)
    assert [(h.session.session_id, h.row.pos, h.score) for h in page.hits] == [
        (r.best.session_id, r.best.pos, r.score) for r in expected
    ]
    assert page.total_sessions == len(expected)
    assert page.total_is_lower_bound == (len(every) > ceiling)
    # 30 tool matches score best: hidden, the word index's best 2 × (ceiling + 1) are mostly dropped
    # by the filter and the read falls back to every match; shown, the first step is enough.
    if tools or ceiling == 100:
        assert scans == ["two-step"]
    else:
        assert scans == ["two-step", "every match"]


def test_a_narrow_filter_reads_every_match_at_once(engine: SqliteSearchIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    query = parse_query("lattice")
    assert query is not None
    monkeypatch.setattr(sqlite_rank, "SCAN_FACTOR", 1)
    statements: list[str] = []
    real = engine._execute
    monkeypatch.setattr(engine, "_execute", lambda sql, params: statements.append(sql) or real(sql, params))
    page = engine.search(
        "acme", IndexQuery(query=query, filter=SearchFilter(visibility=Visibility(), project="p"), limit=20)
    )
    assert {h.session.session_id for h in page.hits} == {f"text{s}" for s in range(4)}
    assert len(statements) == 1 and not statements[0].startswith("WITH top")
