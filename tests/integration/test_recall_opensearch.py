"""OpenSearch engine specifics, on a real 2.19 node (tests/opensearch_fixture.py).

- The same answers as SQLite FTS5 on one corpus for generated queries and filters: matched sessions,
  the distinct-session total, its lower-bound flag, the coverage of every hit, the tier, the withheld
  count and the newest match (hypothesis; bm25 differs between the engines, so the order inside one
  coverage may differ, and the suite does not compare it).
- The default refresh policy ("wait_for"): a replace that returned is searchable.
- Generations: a write that fails half way shows nothing of itself, the retry converges; a writer
  that dies before its flip is never shown, its late flip is refused, and its documents are
  collected; concurrent replaces of one session leave exactly one version, at every moment;
  replaced versions are deleted once the grace has passed; delete_authority is one step for readers.
- Isolation: two authorities with the same session id and message uuids never see each other in
  any read of the port.
- Requests per search: one search through the service costs a fixed number of requests, whatever
  the number of hits on its page and whether their sessions have topics.
Faults are injected at the client's transport: the chosen request raises before it is sent.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConflictError
from opensearchpy.exceptions import ConnectionError as OSConnectionError

from dovecote.platform.errors import CommitUnknown, Throttled
from dovecote.platform.principal import Principal
from dovecote.recall import opensearch_store as engine_module
from dovecote.recall.memory import InMemoryArchive, InMemoryLedger
from dovecote.recall.model import RANKERS, Message, Session, Visibility, gate_search, gate_topic_label
from dovecote.recall.opensearch import OpenSearchIndex
from dovecote.recall.opensearch_store import ABANDON_SECONDS, GRACE_SECONDS
from dovecote.recall.ports import IndexQuery, SearchFilter, SearchPage, Withhold
from dovecote.recall.query import parse_query
from dovecote.recall.service import RecallService
from dovecote.recall.sqlite import SqliteSearchIndex
from tests.conftest import examples
from tests.integration.test_recall_sqlite import WORDS, random_messages


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_engine(opensearch_url: str) -> Iterator[Callable[..., OpenSearchIndex]]:
    made: list[OpenSearchIndex] = []

    def make(**options: Any) -> OpenSearchIndex:
        engine = OpenSearchIndex(
            OpenSearch(hosts=[opensearch_url], timeout=60), index_prefix=f"os-{uuid.uuid4().hex[:12]}", **options
        )
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.drop_indices()
        engine.close()


def session(session_id: str, word: str, n: int = 12, project: str = "alpha", ids: str = "") -> Session:
    messages = tuple(
        Message(
            uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session_id}/{ids or word}/{i}")),
            role="user" if i % 2 == 0 else "assistant",
            kind="text",
            text=f"{word} line {i}",
            timestamp=f"2025-06-01T00:{i % 60:02d}:00.000Z",
            human=i % 2 == 0,
        )
        for i in range(n)
    )
    return Session(session_id, "test", project, f"/{project}", messages)


def find(engine: Any, authority: str, q: str, **options: Any) -> SearchPage:
    query = parse_query(q)
    assert query is not None
    return engine.search(  # type: ignore[no-any-return]
        authority,
        IndexQuery(query=query, filter=SearchFilter(visibility=Visibility(thinking=True)), limit=100, **options),
    )


def words_seen(engine: OpenSearchIndex, authority: str, session_id: str) -> tuple[set[str], int]:
    rows = engine.outline(authority, session_id, visibility=Visibility(), scan=400, bookend=400)
    return {r.text.split()[0] for r in rows.start + rows.end}, len(rows.start) + len(rows.end)


def stored(engine: OpenSearchIndex, authority: str) -> int:
    """Every message document of the authority, hidden generations included."""
    client = engine.store.client
    client.indices.refresh(index=engine.store.messages)
    return int(client.count(index=engine.store.messages, body={"query": {"term": {"authority": authority}}})["count"])


@contextmanager
def intercepting(engine: OpenSearchIndex, before: Callable[[str, str], None]) -> Iterator[None]:
    """`before(method, url)` runs ahead of every request the engine sends, at the client's transport."""
    transport = engine.store.client.transport
    real = transport.perform_request

    def perform(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        before(method, url)
        return real(method, url, *args, **kwargs)

    transport.perform_request = perform  # type: ignore[method-assign]
    try:
        yield
    finally:
        transport.perform_request = real  # type: ignore[method-assign]


@contextmanager
def failing(engine: OpenSearchIndex, path: str, nth: int, error: Exception | None = None) -> Iterator[list[str]]:
    """The nth request whose path contains `path` raises (a connection error by default) before it
    is sent."""
    seen: list[str] = []

    def fault(method: str, url: str) -> None:
        if path in url:
            seen.append(url)
            if len(seen) == nth:
                raise error or OSConnectionError("N/A", "injected fault", None)

    with intercepting(engine, fault):
        yield seen


@contextmanager
def counting(engine: OpenSearchIndex) -> Iterator[list[str]]:
    """Every request the engine sends, as `METHOD path`."""
    sent: list[str] = []
    with intercepting(engine, lambda method, url: sent.append(f"{method} {url}")):
        yield sent


# ---- refresh ------------------------------------------------------------------------------------------


def test_with_the_default_refresh_a_replace_that_returned_is_searchable(make_engine: Any) -> None:
    engine = make_engine()  # refresh="wait_for"
    for word in ("apple", "banana", "cherry"):
        engine.replace_session("acme", session("s1", word), sha256=word)
        page = find(engine, "acme", word)
        assert page.total_sessions == 1 and page.hits[0].row.text.startswith(word)
        assert find(engine, "acme", "apple OR banana OR cherry").total_sessions == 1  # the old version is gone


# ---- generations --------------------------------------------------------------------------------------


def test_replaced_versions_are_deleted_after_the_grace(make_engine: Any, clock: Clock) -> None:
    engine = make_engine(clock=clock, refresh="true")
    engine.replace_session("acme", session("s1", "apple"), sha256="1")
    engine.replace_session("acme", session("s1", "banana"), sha256="2")
    assert stored(engine, "acme") == 24  # the replaced version is hidden, not yet deleted
    assert find(engine, "acme", "apple").total_sessions == 0
    clock.now += GRACE_SECONDS + 1
    engine.replace_session("acme", session("s2", "cherry"), sha256="3")  # collects on the way out
    assert stored(engine, "acme") == 24
    assert words_seen(engine, "acme", "s1") == ({"banana"}, 12)
    assert engine.store.snapshot("acme").hidden == ()


def test_a_write_that_fails_half_way_shows_nothing_and_the_retry_converges(
    make_engine: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine(clock=clock, refresh="true")
    engine.replace_session("acme", session("s1", "apple", n=30), sha256="1")
    monkeypatch.setattr(engine_module, "BULK_DOCS", 10)  # several bulk requests per session
    with failing(engine, "/_bulk", 2) as seen, pytest.raises(CommitUnknown):
        engine.replace_session("acme", session("s1", "banana", n=30), sha256="2")
    assert len(seen) == 2
    assert stored(engine, "acme") > 30  # the first bulk landed ...
    assert words_seen(engine, "acme", "s1") == ({"apple"}, 30)  # ... and nothing of it shows
    assert find(engine, "acme", "banana").total_sessions == 0
    info = engine.session("acme", "s1")
    assert info is not None and info.sha256 == "1"
    engine.replace_session("acme", session("s1", "banana", n=30), sha256="2")  # the retry
    assert words_seen(engine, "acme", "s1") == ({"banana"}, 30)
    assert find(engine, "acme", "apple").total_sessions == 0
    clock.now += GRACE_SECONDS + 1
    engine.replace_session("acme", session("s2", "cherry", n=2), sha256="3")
    assert stored(engine, "acme") == 32  # the failed write and the replaced version are gone


def test_a_writer_that_dies_before_its_flip_is_never_shown(make_engine: Any, clock: Clock) -> None:
    engine = make_engine(clock=clock, refresh="true")
    engine.replace_session("acme", session("s1", "apple"), sha256="1")
    # Given a writer whose flip never reaches the engine (it wrote everything, then died)
    with failing(engine, "/_update/", 2), pytest.raises(CommitUnknown):
        engine.replace_session("acme", session("s1", "banana"), sha256="2")
    (orphan,) = engine.store.snapshot("acme").pending
    assert words_seen(engine, "acme", "s1") == ({"apple"}, 12)
    # When it is abandoned and then collected by later writes
    clock.now += ABANDON_SECONDS + 1
    engine.replace_session("acme", session("s2", "cherry"), sha256="3")
    assert engine.store.snapshot("acme").pending == {}
    assert words_seen(engine, "acme", "s1") == ({"apple"}, 12)
    clock.now += GRACE_SECONDS + 1
    engine.replace_session("acme", session("s3", "damson"), sha256="4")
    # Then its documents are gone, and its flip, arriving late, is refused
    assert stored(engine, "acme") == 36
    late = engine.store.update_state(
        "acme", engine_module._FLIP, {"sid": "s1", "gen": int(orphan), "prev": [], "now": int(clock.now * 1000)}
    )
    assert late["result"] == "noop"
    assert words_seen(engine, "acme", "s1") == ({"apple"}, 12)


def test_a_state_update_that_keeps_losing_the_race_is_throttled_and_changes_nothing(make_engine: Any) -> None:
    engine = make_engine(refresh="true")
    engine.replace_session("acme", session("s1", "apple"), sha256="1")
    conflict = ConflictError(409, "version_conflict_engine_exception", {})
    with failing(engine, "/_update/", 1, conflict), pytest.raises(Throttled):
        engine.replace_session("acme", session("s1", "banana"), sha256="2")
    assert words_seen(engine, "acme", "s1") == ({"apple"}, 12)
    assert engine.store.snapshot("acme").pending == {}  # the allocation itself was refused


def test_concurrent_replaces_of_one_session_leave_exactly_one_version(make_engine: Any) -> None:
    engine = make_engine(refresh="true")
    engine.replace_session("acme", session("s1", "w0"), sha256="start")
    words = ["w0", "w1", "w2", "w3"]
    start = threading.Barrier(len(words) + 2)
    writers_done = threading.Event()
    problems: list[str] = []
    errors: list[BaseException] = []

    def writer(word: str) -> None:
        start.wait()
        try:
            for i in range(4):
                engine.replace_session("acme", session("s1", word), sha256=f"{word}{i}")
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    def reader() -> None:
        start.wait()
        while not writers_done.is_set():
            seen, displayable = words_seen(engine, "acme", "s1")
            if len(seen) != 1 or displayable != 12:
                problems.append(f"outline saw {seen} / {displayable}")
            page = find(engine, "acme", " OR ".join(words))
            if page.total_sessions != 1:
                problems.append(f"search saw {page.total_sessions} sessions")

    writers = [threading.Thread(target=writer, args=(w,)) for w in words]
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for thread in writers + readers:
        thread.start()
    for thread in writers:
        thread.join(timeout=300)
    writers_done.set()
    for thread in readers:
        thread.join(timeout=60)
    assert errors == [] and problems == []
    seen, displayable = words_seen(engine, "acme", "s1")
    assert len(seen) == 1 and displayable == 12
    assert sum(find(engine, "acme", w).total_sessions for w in words) == 1
    info = engine.session("acme", "s1")
    assert info is not None and info.sha256 == f"{seen.pop()}3"  # the last flip wins, whole


def test_delete_authority_is_one_step_and_leaves_no_documents(make_engine: Any) -> None:
    engine = make_engine(refresh="true")
    for i in range(3):
        engine.replace_session("acme", session(f"s{i}", "apple"), sha256="1")
    engine.replace_session("globex", session("s0", "apple"), sha256="1")
    engine.add_topic("acme", "s0", session("s0", "apple").messages[0].uuid, "a topic")
    engine.delete_authority("acme")
    assert find(engine, "acme", "apple").total_sessions == 0 and engine.scopes("acme") == []
    assert engine.search_topics("acme", None, limit=10, project="") == ([], False)
    assert stored(engine, "acme") == 0
    assert find(engine, "globex", "apple").total_sessions == 1
    engine.replace_session("acme", session("s0", "banana"), sha256="2")  # generations go on
    assert words_seen(engine, "acme", "s0") == ({"banana"}, 12)


# ---- isolation ----------------------------------------------------------------------------------------


def test_two_authorities_with_the_same_ids_never_see_each_other(make_engine: Any) -> None:
    engine = make_engine(refresh="true")
    # The very same session id and message uuids, in two authorities.
    ours, theirs = session("same-id", "apricot", ids="x"), session("same-id", "quince", project="beta", ids="x")
    engine.replace_session("acme", ours, sha256="a")
    engine.replace_session("globex", theirs, sha256="g")
    uuid0 = ours.messages[0].uuid
    engine.add_topic("acme", "same-id", uuid0, "apricot topic")
    engine.add_topic("globex", "same-id", uuid0, "quince topic")
    for authority, word, project in (("acme", "apricot", "alpha"), ("globex", "quince", "beta")):
        info = engine.session(authority, "same-id")
        assert info is not None and info.project == project
        assert engine.resolve_sessions(authority, "same").total == 1
        assert engine.resolve_messages(authority, "same-id", uuid0[:8]).total == 1
        row = engine.message(authority, "same-id", uuid0)
        assert row is not None and row.text.startswith(word)
        window = engine.window(authority, "same-id", 5, radius=3, around=0, visibility=Visibility())
        assert {r.text.split()[0] for r in window.rows} == {word}
        assert words_seen(engine, authority, "same-id") == ({word}, 12)
        assert [(s.project, s.cwd, s.sessions) for s in engine.scopes(authority)] == [(project, f"/{project}", 1)]
        assert [t.label for t in engine.session_topics(authority, "same-id")] == [f"{word} topic"]
        topics, tagged = engine.search_topics(authority, parse_query("topic"), limit=10, project="")
        assert tagged and [t.label for t in topics] == [f"{word} topic"]
        assert find(engine, authority, "apricot OR quince").hits[0].row.text.startswith(word)
        assert find(engine, authority, "apricot OR quince").total_sessions == 1
        assert engine.turn_start(authority, "same-id") == 10
        assert engine.printed_ref(authority, "same-id", uuid0) == f"same-id:{uuid0[:8]}"


# ---- the same answers as SQLite FTS5 --------------------------------------------------------------------


def _corpus() -> list[Session]:
    rng = random.Random(5)
    sessions = []
    for s in range(24):
        messages = random_messages(rng, f"diff/{s}")
        sessions.append(Session(f"s{s:02d}", rng.choice(["claude-code", "codex"]), f"p{s % 3}", "", messages))
    return sessions


@pytest.fixture(scope="module")
def both_engines(opensearch_url: str) -> Iterator[tuple[SqliteSearchIndex, OpenSearchIndex]]:
    sqlite = SqliteSearchIndex(":memory:")
    search = OpenSearchIndex(
        OpenSearch(hosts=[opensearch_url], timeout=60), index_prefix=f"diff-{uuid.uuid4().hex[:12]}", refresh="true"
    )
    for item in _corpus():
        sqlite.replace_session("acme", item, sha256="x")
        search.replace_session("acme", item, sha256="x")
    yield sqlite, search
    search.drop_indices()
    search.close()
    sqlite.close()


_term = st.sampled_from(WORDS)
_query = st.one_of(
    st.lists(_term, min_size=1, max_size=4).map(" ".join),
    st.tuples(_term, _term).map(lambda p: f"{p[0]} && {p[1]}"),
    st.tuples(_term, _term).map(lambda p: f"{p[0]} NOT {p[1]}"),
    st.tuples(_term, _term, _term).map(lambda p: f"({p[0]} || {p[1]}) !{p[2]}"),
    st.tuples(_term, _term).map(lambda p: f'"{p[0]} {p[1]}" {p[0]}'),
    st.sampled_from(["onfi", "ploy", "eout", "ach", "xyz", "ken que"]),  # substrings: the trigram tier
)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    q=_query,
    ranker=st.sampled_from(RANKERS),
    sort=st.sampled_from(["", "newest"]),
    tools=st.booleans(),
    role=st.sampled_from(["", "user"]),
    since=st.sampled_from(["", "2025-05-01T00:00:00.000Z"]),
    project=st.sampled_from(["", "p1"]),
    min_messages=st.sampled_from([0, 8]),
    withhold=st.one_of(st.none(), st.tuples(st.integers(0, 23), st.integers(0, 10))),
    ceiling=st.sampled_from([5, 20_000]),
)
def test_the_same_answers_as_sqlite(
    both_engines: tuple[SqliteSearchIndex, OpenSearchIndex],
    q: str,
    ranker: str,
    sort: str,
    tools: bool,
    role: str,
    since: str,
    project: str,
    min_messages: int,
    withhold: tuple[int, int] | None,
    ceiling: int,
) -> None:
    query = parse_query(q)
    assert query is not None
    index_query = IndexQuery(
        query=query,
        filter=SearchFilter(
            role=role,
            since=since,
            project=project,
            min_messages=min_messages,
            visibility=Visibility(tools=tools, thinking=True),
        ),
        limit=100,
        sort=sort,
        ranker=ranker,
        withhold=Withhold(f"s{withhold[0]:02d}", withhold[1]) if withhold else None,
        max_candidates=ceiling,
    )
    sqlite, search = both_engines
    want, got = sqlite.search("acme", index_query), search.search("acme", index_query)
    assert (got.tier, got.withheld, got.total_is_lower_bound) == (want.tier, want.withheld, want.total_is_lower_bound)
    if want.total_is_lower_bound:
        # Which messages make the ceiling depends on each engine's bm25 (and SQLite takes `newest`
        # among those, OpenSearch among every match).
        return
    assert (got.total_sessions, got.newest) == (want.total_sessions, want.newest)
    # The same sessions, each with the coverage of its best message, in the same coverage order.
    covered = {h.session.session_id: h.coverage for h in want.hits}
    assert {h.session.session_id: h.coverage for h in got.hits} == covered
    if not sort:
        # `fused` and `passage` have no coverage key (ranking.py): their order is the engines' bm25,
        # which differ; `session-doc` fuses in the session documents' bm25 order, likewise (on
        # real-conversation-shaped text the engines agree: the fixture's test below).
        if ranker not in ("fused", "passage", "session-doc"):
            assert [h.coverage for h in got.hits] == [h.coverage for h in want.hits]
    else:  # sort=newest: each session's newest match (the same row in both), newest first
        assert {(h.session.session_id, h.row.uuid) for h in got.hits} == {
            (h.session.session_id, h.row.uuid) for h in want.hits
        }
        assert [h.row.timestamp for h in got.hits] == [h.row.timestamp for h in want.hits]


# ---- requests per search ------------------------------------------------------------------------------

# What one search through the service costs, whatever the number of hits on the page and whether
# their sessions have topics: the scopes (state GET + 1 search), then the engine's state GET, the
# candidates msearch, the page's rows + sessions + topics msearch, and the page's refs (+ topic
# starts) msearch. Before the page was read at once it was 30 (a state GET and two searches per hit).
SEARCH_REQUESTS = 6


def test_one_search_costs_a_fixed_number_of_requests_whatever_the_page(make_engine: Any) -> None:
    engine = make_engine(refresh="true")
    service = RecallService(engine, InMemoryArchive(), InMemoryLedger())
    who = Principal("acme", "caller")
    for i in range(12):
        rows = [
            {
                "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"count-{i}/{j}")),
                "role": "user",
                "text": text,
                "timestamp": f"2025-06-01T00:{i:02d}:{j:02d}.000Z",
            }
            for j, text in enumerate(["hello there", f"the zebra {i} crossing", "bye now"])
        ]
        service.ingest(who, {"source": "test", "project": "alpha", "session_id": f"count-{i}", "messages": rows})
    single = gate_search(q="zebra", project="alpha", limit=1)
    with counting(engine) as sent:
        one = service.search(who, single)
    assert one.count == 1 and len(sent) == SEARCH_REQUESTS, sent
    with counting(engine) as sent:
        page = service.search(who, gate_search(q="zebra"))
    assert page.count == 8 and page.total_matches == 12 and len(sent) == SEARCH_REQUESTS, sent
    for i in (0, 3, 5):  # topics on some hits' sessions: their starts join the refs msearch
        start = str(uuid.uuid5(uuid.NAMESPACE_URL, f"count-{i}/0"))
        service.label_topic(who, gate_topic_label(f"count-{i}:{start}", f"greeting {i}"))
    with counting(engine) as sent:
        tagged = service.search(who, gate_search(q="zebra"))
    assert len(sent) == SEARCH_REQUESTS, sent
    assert [r.session_id for r in tagged.results] == [r.session_id for r in page.results]
    assert {r.session_id: r.topic for r in tagged.results if r.topic} == {
        f"count-{i}": f"greeting {i}" for i in (0, 3, 5) if f"count-{i}" in {r.session_id for r in page.results}
    }
    assert [r.read_ref for r in tagged.results] == [r.read_ref for r in page.results]


# ---- the default ranker on real-conversation-shaped data ----------------------------------------------


def test_the_default_ranker_answers_alike_on_both_engines(make_engine: Any) -> None:
    """issue 34: the default (`session-doc`) on the development set's self-written fixture, through the
    service with no ranker given: the same sessions in the same order on both engines, each
    question's answer first."""
    from bench.recall_dev import FIXTURE, load

    devset = load(FIXTURE)
    who = Principal("bench", "caller")
    sqlite = RecallService(SqliteSearchIndex(":memory:"), InMemoryArchive(), InMemoryLedger())
    search = RecallService(make_engine(refresh="true"), InMemoryArchive(), InMemoryLedger())
    for body in devset.bodies:
        sqlite.ingest(who, body)
        search.ingest(who, body)
    for question in devset.questions:
        params = gate_search(q=question.text, limit=30)
        assert params.ranker == "session-doc"
        want = [(r.session_id, r.read_ref) for r in sqlite.search(who, params).results]
        got = [(r.session_id, r.read_ref) for r in search.search(who, params).results]
        assert got == want, question.text
        assert want[0][0] in question.targets, question.text


def test_an_index_made_before_the_session_documents_is_migrated_in_place(make_engine: Any) -> None:
    """A deployment whose indices predate the session documents (its sessions mapping is strict and
    lacks `documented`, and there is no documents index), with a session indexed by that version:
    the new engine adds the field and the index on first use, writes new sessions with their
    documents, and fill_session_docs writes the old session's, which the default ranker then reads."""
    from dovecote.recall.opensearch_mapping import ANALYSIS, SESSION_MAPPING

    engine = make_engine(refresh="true")
    store = engine.store
    old_sessions = {**SESSION_MAPPING, "properties": dict(SESSION_MAPPING["properties"])}
    del old_sessions["properties"]["documented"]
    store.client.indices.create(
        index=store.sessions, body={"settings": {"analysis": ANALYSIS}, "mappings": old_sessions}
    )
    engine.replace_session("acme", session("old", "zebra"), sha256="a")
    # What the old version left: no document, no flag (the documents index was not there).
    snap = store.snapshot("acme")
    visible = {"query": store.visible("acme", snap, {"term": {"session_id": "old"}})}
    (gen,) = [
        h["_source"]["gen"]
        for h in store.client.search(index=store.sessions, routing="acme", body=visible)["hits"]["hits"]
    ]
    store.client.delete(index=store.documents, id=f"acme|{gen}|d", routing="acme", refresh="true")
    store.client.update(
        index=store.sessions,
        id=f"acme|{gen}|s",
        routing="acme",
        refresh="true",
        body={"script": {"source": "ctx._source.remove('documented')"}},
    )
    mapping = store.client.indices.get_mapping(index=store.sessions)[store.sessions]["mappings"]["properties"]
    assert mapping["documented"] == {"type": "boolean"}  # added on first use
    engine.replace_session("acme", session("new", "zebra"), sha256="b")
    asked = IndexQuery(query=parse_query("zebra"), filter=SearchFilter(), limit=8, ranker="session-doc")  # type: ignore[arg-type]
    assert engine.document_order("acme", asked) == ["new"]
    assert engine.fill_session_docs() == 1
    assert sorted(engine.document_order("acme", asked)) == ["new", "old"]
    assert engine.fill_session_docs() == 0
