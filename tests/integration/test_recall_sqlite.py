"""SQLite engine specifics: the SQL reduction of the candidates ranks exactly like ranking every
match (hypothesis over generated corpora and queries), and the version check."""

from __future__ import annotations

import random
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dovecote.recall.model import RANKERS, Message, Session, Visibility
from dovecote.recall.ports import IndexQuery, SearchFilter, Withhold
from dovecote.recall.query import parse_query
from dovecote.recall.ranking import fuse_documents, rank_sessions, uses_documents
from dovecote.recall.sqlite import SqliteSearchIndex, check_sqlite
from tests.conftest import examples

WORDS = "alpha beta gamma delta lease fence token cache queue deploy retry timeout error config".split()


def random_messages(rng: random.Random, name: str) -> tuple[Message, ...]:
    """1 to 15 messages of WORDS, in random roles, kinds and dates; uuids derived from `name`."""
    return tuple(
        Message(
            uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{name}/{i}")),
            role=rng.choice(["user", "assistant"]),
            kind=rng.choice(["text", "text", "text", "thinking", "tool"]),
            text=" ".join(rng.choices(WORDS, k=rng.randint(1, 12))),
            timestamp=f"2025-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T00:00:00.000Z",
            human=i % 2 == 0,
        )
        for i in range(rng.randint(1, 15))
    )


def corpus(seed: int) -> SqliteSearchIndex:
    rng = random.Random(seed)
    engine = SqliteSearchIndex(":memory:")
    for s in range(rng.randint(3, 25)):
        messages = random_messages(rng, f"{seed}/{s}")
        engine.replace_session("acme", Session(f"s{s:02d}", "t", f"p{s % 3}", "", messages), sha256="x")
    return engine


@settings(max_examples=examples(60), deadline=None)
@given(
    seed=st.integers(0, 10_000),
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    ranker=st.sampled_from(RANKERS),
    sort=st.sampled_from(["", "newest", "oldest"]),
    limit=st.sampled_from([1, 3, 100]),
    tools=st.booleans(),
    ceiling=st.sampled_from([5, 40, 20_000]),
    withhold=st.booleans(),
)
def test_reduced_candidates_rank_like_all_candidates(
    seed: int, words: list[str], ranker: str, sort: str, limit: int, tools: bool, ceiling: int, withhold: bool
) -> None:
    engine = corpus(seed)
    query = parse_query(" ".join(words))
    assert query is not None
    index_query = IndexQuery(
        query=query,
        filter=SearchFilter(visibility=Visibility(tools=tools, thinking=True)),
        limit=limit,
        sort=sort,
        ranker=ranker,
        withhold=Withhold("s01", 3) if withhold else None,
        max_candidates=ceiling,
    )
    page = engine.search("acme", index_query)
    every = engine.reference_candidates("acme", index_query)
    expected = rank_sessions(every[:ceiling], ranker=ranker, sort=sort)
    if uses_documents(ranker, sort):  # `session-doc`: the documents reorder the same sessions
        expected = fuse_documents(expected, engine.document_order("acme", index_query))
    top = expected[:limit]
    assert [(h.session.session_id, h.row.pos) for h in page.hits] == [(r.best.session_id, r.best.pos) for r in top]
    assert [(h.coverage, h.score) for h in page.hits] == [(r.coverage, r.score) for r in top]
    assert page.total_sessions == len(expected)
    assert page.total_is_lower_bound == (len(every) > ceiling)
    assert page.newest == max((c.timestamp for c in every[:ceiling]), default="")


def test_a_database_made_before_the_session_documents_gets_them_on_open(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "recall.sqlite3"  # type: ignore[operator]
    engine = SqliteSearchIndex(path)
    for name, text in (("one", "wallaby tracks"), ("two", "a wallaby"), ("three", "emu")):
        message = Message(uuid=str(uuid.uuid4()), role="user", kind="text", text=text, timestamp="")
        engine.replace_session("acme", Session(name, "t", "p", "", (message,)), sha256="x")
    engine._db.executescript(  # noqa: SLF001 - the database as the version before them left it
        "DROP TRIGGER session_docs_ai; DROP TRIGGER session_docs_ad; DROP TABLE session_docs_fts; "
        "DROP TABLE session_docs;"
    )
    engine.close()
    again = SqliteSearchIndex(path)
    query = IndexQuery(query=parse_query("wallaby emu"), filter=SearchFilter(), limit=8, ranker="session-doc")  # type: ignore[arg-type]
    assert sorted(again.document_order("acme", query)) == ["one", "three", "two"]
    assert again.fill_session_docs() == 0  # every session has its document
    again.close()


def test_this_sqlite_has_fts5_and_trigram() -> None:
    check_sqlite()  # raises with the reason when it does not
    engine = SqliteSearchIndex(":memory:")
    assert engine.name == "sqlite-fts5"


def test_a_file_database_persists(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "recall.sqlite3"  # type: ignore[operator]
    engine = SqliteSearchIndex(path)
    message = Message(uuid=str(uuid.uuid4()), role="user", kind="text", text="persisted words", timestamp="")
    engine.replace_session("acme", Session("keep", "t", "p", "", (message,)), sha256="x")
    engine.close()
    again = SqliteSearchIndex(path)
    info = again.session("acme", "keep")
    assert info is not None and info.message_count == 1
