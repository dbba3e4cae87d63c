"""docs/design/recall.md, both lists, through RecallService over every SearchIndex engine.

The fixture `index_engine` yields a fresh, empty engine: SQLite FTS5 in memory, or OpenSearch (a real
2.19 node, with indices named for the test). Another engine joins by adding a param and a branch (it
must come up empty and isolated per test). Every test
asserts invariants (orders, counts, presence), never engine scores.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from dovecote.platform.errors import AmbiguousRef, InvalidArgument, NotFound
from dovecote.platform.principal import Principal
from dovecote.recall.memory import InMemoryArchive, InMemoryLedger
from dovecote.recall.model import (
    NEIGHBOUR_CHARS,
    OUTLINE_TEXT_CHARS,
    TRUNCATION_MARKER,
    gate_outline,
    gate_read,
    gate_search,
    gate_topic_label,
    gate_topics,
    utc_iso,
)
from dovecote.recall.ports import PendingUpload, SearchIndex
from dovecote.recall.results import SearchEnvelope
from dovecote.recall.service import STORE_NOTE_TRIGRAM, RecallService
from dovecote.recall.sqlite import SqliteSearchIndex
from tests.conftest import CI, DATA
from tests.support.opensearch_indices import pool_fixture, pooled_index

ACME = Principal("acme", "caller")
GLOBEX = Principal("globex", "caller")
NOW = datetime(2026, 1, 10, tzinfo=UTC)
T0 = datetime(2025, 6, 1, tzinfo=UTC)
SAMPLES = DATA / "transcripts"


opensearch_pool = pool_fixture("conformance")


@pytest.fixture(params=["sqlite", "opensearch"])
def index_engine(request: pytest.FixtureRequest) -> Iterator[SearchIndex]:
    if request.param == "sqlite":
        engine = SqliteSearchIndex(":memory:")
        yield engine
        engine.close()
    else:
        with pooled_index(request) as search:
            yield search


@pytest.fixture
def ledger() -> InMemoryLedger:
    return InMemoryLedger()


@pytest.fixture
def archive() -> InMemoryArchive:
    return InMemoryArchive()


@pytest.fixture
def recall(index_engine: SearchIndex, archive: InMemoryArchive, ledger: InMemoryLedger) -> RecallService:
    return RecallService(index_engine, archive, ledger, clock=lambda: NOW)


def mid(session_id: str, i: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session_id}/{i}"))


def stamp(minutes: float, base: datetime = T0) -> str:
    return utc_iso(datetime.fromtimestamp(base.timestamp() + minutes * 60, UTC))


def put(
    recall: RecallService,
    session_id: str,
    messages: list[Any],
    *,
    project: str = "alpha",
    source: str = "test",
    who: Principal = ACME,
    base: datetime = T0,
) -> Any:
    """messages: text, or (role, text), or (role, text, kind), or a full dict."""
    rows = []
    for i, spec in enumerate(messages):
        if isinstance(spec, dict):
            rows.append({"uuid": mid(session_id, i), "timestamp": stamp(i, base), **spec})
            continue
        if isinstance(spec, str):
            spec = ("user" if i % 2 == 0 else "assistant", spec)
        role, text, *kind = spec
        row = {"uuid": mid(session_id, i), "role": role, "text": text, "timestamp": stamp(i, base)}
        if kind:
            row["kind"] = kind[0]
        rows.append(row)
    body = {"source": source, "project": project, "session_id": session_id, "messages": rows}
    return recall.ingest(who, body)


def search(recall: RecallService, q: str, who: Principal = ACME, **params: Any) -> SearchEnvelope:
    return recall.search(who, gate_search(q=q, **params))


def sessions_of(envelope: SearchEnvelope) -> list[str]:
    return [r.session_id for r in envelope.results]


def codes(envelope: SearchEnvelope) -> list[str]:
    return [w.code for w in envelope.warnings]


def read_sample(recall: RecallService, folder: str, name: str, who: Principal = ACME) -> Any:
    fmt = "claude-code-jsonl" if folder == "claude-code" else "codex-jsonl"
    return recall.ingest(who, {"format": fmt, "jsonl": (SAMPLES / folder / name).read_text()})


# ---- ranking ----------------------------------------------------------------------------------------


def test_an_exact_phrase_in_one_session_outranks_scattered_terms(recall: RecallService) -> None:
    put(recall, "scattered", ["the blue paint dried", "a heron flew over", "the quarry was closed", "unrelated"])
    put(recall, "phrase", ["we saw a blue heron at the quarry lake", "nice"])
    for ranker in ("message", "top2", "session"):
        assert sessions_of(search(recall, "blue heron quarry", ranker=ranker))[0] == "phrase", ranker


def test_coverage_beats_one_term_repeated(recall: RecallService) -> None:
    put(recall, "repeat", ["ledger ledger ledger ledger ledger ledger"])
    put(recall, "cover", ["the ledger was reconciled with the invoice after a long day of accounting work"])
    assert sessions_of(search(recall, "ledger reconcile invoice")) == ["cover", "repeat"]


def test_stems_count_for_matching_and_coverage(recall: RecallService) -> None:
    # The reference dropped hits lacking the literal substring: "reconciling" missed "reconciled".
    put(recall, "stems", ["we reconciled the ledgers yesterday"])
    put(recall, "one-term", ["ledger ledger ledger ledger"])
    envelope = search(recall, "reconciling ledger")
    assert sessions_of(envelope) == ["stems", "one-term"]
    assert envelope.store_note == ""  # the word index answered


def test_one_hit_per_conversation(recall: RecallService) -> None:
    put(recall, "many", ["kubernetes upgrade", "kubernetes nodes", "kubernetes pods", "kubernetes again"])
    put(recall, "once", ["we ran kubernetes once"])
    envelope = search(recall, "kubernetes")
    assert sorted(sessions_of(envelope)) == ["many", "once"]
    assert envelope.total_matches == 2 and envelope.count == 2


def test_ties_keep_insertion_order(recall: RecallService) -> None:
    for name in ("first", "second", "third"):
        put(recall, name, ["identical words about the gateway timeout"])
    assert sessions_of(search(recall, "gateway timeout")) == ["first", "second", "third"]


def test_boolean_queries_select_exactly(recall: RecallService) -> None:
    put(recall, "both", ["deploy then rollback"])
    put(recall, "deploy-only", ["deploy to production"])
    put(recall, "rollback-only", ["rollback the release"])
    assert sessions_of(search(recall, "deploy NOT rollback")) == ["deploy-only"]
    assert sessions_of(search(recall, "deploy !rollback")) == ["deploy-only"]
    assert sessions_of(search(recall, "deploy && rollback")) == ["both"]
    assert sorted(sessions_of(search(recall, "deploy || rollback"))) == ["both", "deploy-only", "rollback-only"]
    # lowercase not is a stop word: an OR of the two words
    assert sorted(sessions_of(search(recall, "deploy not rollback"))) == ["both", "deploy-only", "rollback-only"]


def test_trigram_fallback_when_the_word_index_finds_nothing(recall: RecallService) -> None:
    put(recall, "config", ["we reconfigured the load balancer"])
    envelope = search(recall, "onfigur")
    assert sessions_of(envelope) == ["config"]
    assert envelope.store_note == STORE_NOTE_TRIGRAM
    assert "onfigur" in envelope.results[0].snippet.lower()


def test_default_limit_and_the_honest_lower_bound(recall: RecallService) -> None:
    for i in range(8):
        put(recall, f"s{i}", [f"the terraform plan number {i}"])
    exact = search(recall, "terraform")
    # Exactly 8 matches at limit 8: complete, nothing hidden, not "broad" (the reference said otherwise).
    assert exact.count == 8 and exact.total_matches == 8
    assert exact.complete and not exact.has_more and not exact.total_is_lower_bound and not exact.next_command
    assert "broad_query" not in codes(exact)
    put(recall, "s8", ["terraform again"])
    more = search(recall, "terraform")
    assert more.count == 8 and more.total_matches == 9 and more.has_more and not more.complete
    assert "--limit 32" in more.next_command  # max(4 × 8, 20)
    assert search(recall, "terraform", limit=2).total_matches == 9  # independent of the limit
    assert "--limit 20" in search(recall, "terraform", limit=2).next_command  # max(4 × 2, 20)


def test_total_is_a_lower_bound_only_past_the_candidate_ceiling(
    index_engine: SearchIndex, archive: InMemoryArchive, ledger: InMemoryLedger
) -> None:
    recall = RecallService(index_engine, archive, ledger, clock=lambda: NOW, max_candidates=5)
    for i in range(9):
        put(recall, f"s{i}", [f"vault secret rotation {i}"])
    envelope = search(recall, "vault")
    assert envelope.total_is_lower_bound and envelope.total_matches == 5 and envelope.has_more
    broad = next(w for w in envelope.warnings if w.code == "broad_query")
    assert broad.facts == {"matches": 5, "matches_is_lower_bound": True}


# ---- filters ----------------------------------------------------------------------------------------


def test_role_filter(recall: RecallService) -> None:
    put(recall, "roles", [("user", "postgres vacuum question"), ("assistant", "postgres vacuum answer")])
    envelope = search(recall, "postgres vacuum", role="assistant")
    assert envelope.results[0].snippet.endswith("answer")


def test_date_bounds_are_inclusive_per_message_and_compare_instants(recall: RecallService) -> None:
    put(
        recall,
        "dated",
        [
            {"role": "user", "text": "redis eviction early", "timestamp": "2025-03-01T00:30:00+02:00"},
            {"role": "user", "text": "redis eviction late", "timestamp": "2025-03-05T12:00:00Z"},
        ],
    )
    # 00:30+02:00 is 2025-02-28T22:30Z: the reference read it as the local date 2025-03-01.
    assert search(recall, "redis", since="2025-03-01").results[0].snippet.endswith("late")
    assert search(recall, "redis", before="2025-02-28").results[0].snippet.endswith("early")
    # inclusive on the exact instant, on both ends
    exact = search(recall, "redis", since="2025-03-05T12:00:00Z", before="2025-03-05T12:00:00Z")
    # An inverted range is not an error: it matches nothing.
    assert search(recall, "redis", since="2025-03-06", before="2025-03-05").results == []
    assert [r.iso for r in exact.results] == ["2025-03-05T12:00:00.000Z"]
    assert search(recall, "redis", since="2025-03-05T12:00:00.001Z").count == 0


def test_min_messages_project_source_and_paths(recall: RecallService) -> None:
    put(recall, "short", ["grafana alert"], project="web", source="claude-code")
    put(recall, "long", ["grafana dashboard", "b", "c", "d"], project="api", source="codex")
    assert sessions_of(search(recall, "grafana", min_messages=3)) == ["long"]
    assert sessions_of(search(recall, "grafana", project="web")) == ["short"]
    assert sessions_of(search(recall, "grafana", source="codex")) == ["long"]
    # no cwd in the generic form: the path patterns match the project name
    assert sessions_of(search(recall, "grafana", include_path="^ap")) == ["long"]
    assert sessions_of(search(recall, "grafana", exclude_path="ap")) == ["short"]


def test_path_patterns_match_the_working_directory(recall: RecallService) -> None:
    read_sample(recall, "claude-code", "lanegrid-agtrace__claude_session.jsonl")
    read_sample(recall, "claude-code", "obra-episodic-memory__tiny-conversation.jsonl")
    assert {r.project for r in search(recall, "python OR instructions", include_path="agent-sample$").results} == {
        "agent-sample"
    }
    assert "agent-sample" not in {r.project for r in search(recall, "python", exclude_path="test_user").results}


def test_unknown_project_and_empty_path_selection_are_complete_and_quiet(recall: RecallService) -> None:
    put(recall, "x", ["nginx config"])
    for envelope in (
        search(recall, "nginx", project="nope"),
        search(recall, "nginx", include_path="^/nowhere"),
        search(recall, "the of and"),
        search(recall, ""),
    ):
        assert envelope.results == [] and envelope.complete and envelope.warnings == []
        assert envelope.total_matches == 0 and not envelope.has_more


def test_tools_and_envelopes_only_with_include_tools(recall: RecallService) -> None:
    put(
        recall,
        "tools",
        [
            ("assistant", "Bash {'command': 'terraform apply'}", "tool"),
            ("user", "<system-reminder>terraform hint</system-reminder>"),
            ("user", "unrelated"),
        ],
    )
    assert search(recall, "terraform").count == 0
    found = search(recall, "terraform", include_tools=True)
    assert found.count == 1 and found.total_matches == 1


def test_thinking_is_searchable_and_the_ref_points_at_it(recall: RecallService) -> None:
    put(
        recall,
        "think",
        [("user", "go"), ("assistant", "pondering the idempotency keys", "thinking"), ("assistant", "ok")],
    )
    envelope = search(recall, "idempotency")
    assert envelope.count == 1
    read = recall.read(ACME, gate_read(envelope.results[0].read_ref))
    anchor = next(m for m in read.messages if m.uuid == read.anchor_uuid)
    assert anchor.kind == "thinking" and anchor.text == "pondering the idempotency keys"


def test_current_session_withholds_the_live_turn_only(recall: RecallService) -> None:
    session = "a1b2c3d4-live-session"
    put(
        recall,
        session,
        [
            ("user", "earlier we discussed sqlite locking"),
            ("assistant", "sqlite locking uses a write lock"),
            ("user", "now tell me about sqlite locking again"),  # the newest human turn starts here
            ("assistant", "sqlite locking, once more"),
        ],
    )
    plain = search(recall, "sqlite locking")
    withheld = search(recall, "sqlite locking", current_session="a1b2c3d4")
    assert plain.count == 1 and plain.excluded_current_turn == 0
    assert withheld.count == 1  # the earlier part of the session stays searchable
    assert withheld.excluded_current_turn == 2
    assert withheld.results[0].iso in (stamp(0), stamp(1))
    assert "current_turn_excluded" in codes(withheld)
    assert next(w for w in withheld.warnings if w.code == "current_turn_excluded").facts == {"excluded": 2}
    assert search(recall, "sqlite locking", current_session=session).excluded_current_turn == 2  # exact id
    assert search(recall, "sqlite locking", current_session="ffffffff").excluded_current_turn == 0  # unknown


def test_an_ambiguous_current_session_is_refused(recall: RecallService) -> None:
    put(recall, "abcdefgh-1", ["x marks"])
    put(recall, "abcdefgh-2", ["x marks"])
    with pytest.raises(AmbiguousRef) as caught:
        search(recall, "marks", current_session="abcdefgh")
    assert caught.value.details["candidates"] == ["abcdefgh-1", "abcdefgh-2"]


def test_the_fused_ranker_prefers_a_conversation_about_the_words(recall: RecallService) -> None:
    """`fused`: the message hits fused with the session's summed score, without the coverage key: a
    conversation that keeps returning to the question's words beats a single message naming them
    all in passing."""
    for i in range(20):  # the question's words are rare in the corpus, as they are in a real one
        put(recall, f"filler{i}", [f"unrelated chatter number {i}", "more unrelated words", "and a reply"])
    put(recall, "passing", ["the kelvar port and the zimbo listener came up once", "lunch plans"])
    put(
        recall,
        "about",
        [f"kelvar port step {i}: moved, restarted, checked" for i in range(10)],
    )
    assert sessions_of(search(recall, "kelvar zimbo port", ranker="message"))[0] == "passing"
    fused = search(recall, "kelvar zimbo port", ranker="fused")
    assert sessions_of(fused) == ["about", "passing"]
    assert fused.results[0].read_ref.startswith("about:")


def test_sort_oldest(recall: RecallService) -> None:
    """Issue 19 item 6: `sort=oldest` was a 400; the reference orders by each conversation's oldest
    match, oldest first."""
    put(recall, "mixed", ["filler", "celery early", "celery late"], base=datetime(2025, 2, 1, tzinfo=UTC))
    put(recall, "new", ["a celery mention"], base=datetime(2025, 3, 1, tzinfo=UTC))
    put(recall, "old", ["celery worker crashed"], base=datetime(2025, 1, 1, tzinfo=UTC))
    oldest = search(recall, "celery", sort="oldest")
    assert sessions_of(oldest) == ["old", "mixed", "new"]
    assert oldest.results[1].iso == stamp(1, datetime(2025, 2, 1, tzinfo=UTC))  # the oldest match of "mixed"
    assert "recency_skew" not in codes(oldest)
    assert "--sort oldest" in search(recall, "celery", sort="oldest", limit=1).next_command


def test_a_short_current_session_is_ignored(recall: RecallService) -> None:
    """Issue 19 item 6: a current_session under 8 characters was a 400; the reference ignores it."""
    put(recall, "a1b2c3d4-live", [("user", "sqlite locking question"), ("user", "sqlite locking again")])
    envelope = search(recall, "sqlite locking", current_session="a1b2")
    assert envelope.excluded_current_turn == 0 and sessions_of(envelope) == ["a1b2c3d4-live"]


def test_prefix_queries(recall: RecallService) -> None:
    """Issue 19 item 2: `zephyrc*` found nothing; it is FTS5's prefix operator, on both engines."""
    put(recall, "cast", ["the zephyrcast rollout stalled"])
    put(recall, "core", ["Zephyrcore engine restarted, deploy next", "then more"])
    put(recall, "cloud", ["moved to zephyrcloud"])
    put(recall, "plain", ["a zephyr breeze"])
    plain = search(recall, "zephyrc")
    assert sorted(sessions_of(plain)) == ["cast", "cloud", "core"] and plain.store_note  # the substring tier
    prefixed = search(recall, "zephyrc*")
    assert sorted(sessions_of(prefixed)) == ["cast", "cloud", "core"]
    assert prefixed.store_note == ""  # the word index answered
    assert sessions_of(search(recall, "zephyrc* AND deploy")) == ["core"]
    assert sessions_of(search(recall, "zephyrc* restarted"))[0] == "core"  # coverage counts the prefix
    assert search(recall, "zephyrq*").count == 0
    assert sorted(sessions_of(search(recall, "the*"))) == ["cast", "core"]  # a prefix is never a stop word


def test_rows_the_reference_hides_stay_hidden_in_read_and_outline(recall: RecallService) -> None:
    """Issue 19 item 4: system rows and `[Request interrupted by user]` rows were shown in read and
    outline; the reference hides them (include_tools shows them)."""
    put(
        recall,
        "hidden",
        [
            ("system", "you are a terse assistant"),
            ("user", "please fix the flaky quokka test"),
            ("user", "[Request interrupted by user]"),
            ("assistant", "fixed the quokka test"),
            ("user", "[Request interrupted by user for tool use]"),
            ("user", "thanks"),
        ],
    )
    hit = search(recall, "quokka").results[0]
    read = recall.read(ACME, gate_read(hit.read_ref))
    assert [m.text for m in read.messages] == ["please fix the flaky quokka test", "fixed the quokka test", "thanks"]
    outline = recall.outline(ACME, gate_outline("hidden"))
    assert [m.text for m in outline.start] == [m.text for m in read.messages]
    everything = recall.read(ACME, gate_read(hit.read_ref, include_tools=True))
    assert len(everything.messages) == 6
    assert search(recall, "interrupted").count == 0
    assert search(recall, "interrupted", include_tools=True).count == 1


def test_small_budgets_keep_the_anchor(recall: RecallService) -> None:
    """Issue 19 item 3: budgets 0 and 7 were refused."""
    put(recall, "tiny", ["hello", "world of wombats", "bye"])
    ref = search(recall, "wombats").results[0].read_ref
    for budget in (0, 7):
        read = recall.read(ACME, gate_read(ref, budget=budget))
        assert [m.text for m in read.messages] == ["world of wombats"[:budget] + " …[truncated]"]
        assert read.truncated and read.trimmed_msgs == 3 and read.char_budget == budget
        assert read.trimmed_chars == len("hello") + len("world of wombats") + len("bye") - budget


def test_result_iso_is_the_matched_message_and_sort_newest(recall: RecallService) -> None:
    put(recall, "old", ["celery worker crashed"], base=datetime(2025, 1, 1, tzinfo=UTC))
    put(
        recall,
        "mixed",
        ["celery worker celery worker celery", "filler", "celery again"],
        base=datetime(2025, 2, 1, tzinfo=UTC),
    )
    put(recall, "new", ["a celery mention"], base=datetime(2025, 3, 1, tzinfo=UTC))
    newest = search(recall, "celery", sort="newest")
    assert sessions_of(newest) == ["new", "mixed", "old"]
    assert newest.results[1].iso == stamp(2, datetime(2025, 2, 1, tzinfo=UTC))  # the newest match of "mixed"
    assert "recency_skew" not in codes(newest)


# ---- warnings and completeness ------------------------------------------------------------------------


def test_recency_skew(recall: RecallService) -> None:
    put(recall, "old", ["helm chart values helm chart values"], base=datetime(2025, 1, 1, tzinfo=UTC))
    put(recall, "new", ["helm mention"], base=datetime(2025, 1, 3, tzinfo=UTC))
    envelope = search(recall, "helm chart values")
    assert sessions_of(envelope)[0] == "old"
    skew = next(w for w in envelope.warnings if w.code == "recency_skew")
    assert skew.facts["newest"] == stamp(0, datetime(2025, 1, 3, tzinfo=UTC))
    put(recall, "new", ["helm mention"], base=datetime(2025, 1, 1, 12, tzinfo=UTC))  # within 24 h now
    assert "recency_skew" not in codes(search(recall, "helm chart values"))


def test_broad_query_at_twenty_matches(recall: RecallService) -> None:
    for i in range(20):
        put(recall, f"b{i}", ["docker compose up"])
    envelope = search(recall, "docker")
    assert "broad_query" in codes(envelope)
    assert next(w for w in envelope.warnings if w.code == "broad_query").facts == {
        "matches": 20,
        "matches_is_lower_bound": False,
    }


def test_project_spread_and_raw_history(recall: RecallService) -> None:
    for i in range(7):
        put(recall, f"p{i}", ["eslint rule"], project=f"proj{i}")
    envelope = search(recall, "eslint")
    spread = next(w for w in envelope.warnings if w.code == "project_spread")
    assert spread.facts["projects"] == 7 and len(spread.facts["sample"]) == 5
    assert codes(envelope)[-1] == "raw_history"
    single = search(recall, "eslint", project="proj0")
    assert codes(single) == ["raw_history"]


def test_pending_uploads_make_the_scope_stale(recall: RecallService, ledger: InMemoryLedger) -> None:
    put(recall, "known", ["jest snapshot"], project="web")
    put(recall, "other", ["jest snapshot"], project="api")
    ledger.add("acme", PendingUpload("u1", "codex-jsonl", project="web", expires_at="2099-01-01T00:00:00.000Z"))
    ledger.add("acme", PendingUpload("u2", "codex-jsonl", project="web", expires_at="2020-01-01T00:00:00.000Z"))
    envelope = search(recall, "jest")
    assert not envelope.complete and not envelope.has_more
    rows = {r.project: r for r in envelope.scopes_report}
    assert (rows["web"].status, rows["web"].sessions, rows["web"].pending) == ("stale", 1, 1)  # u2 expired
    assert (rows["api"].status, rows["api"].sessions, rows["api"].pending) == ("searched", 1, 0)
    incomplete = next(w for w in envelope.warnings if w.code == "scope_incomplete")
    assert incomplete.facts["stale"] == ["web"] and incomplete.facts["incomplete"] == 1
    assert search(recall, "jest", project="api").complete


def test_warnings_come_in_the_seed_order(recall: RecallService, ledger: InMemoryLedger) -> None:
    for i in range(20):
        put(recall, f"w{i}-filler", ["swagger"], project=f"p{i % 3}", base=datetime(2025, 1, 5, tzinfo=UTC))
    put(recall, "top", ["swagger openapi swagger openapi"], project="p0", base=datetime(2025, 1, 1, tzinfo=UTC))
    put(recall, "live-1234", [("user", "swagger openapi now")], project="p1")
    ledger.add("acme", PendingUpload("u", "codex-jsonl", project="p2", expires_at="2099-01-01T00:00:00.000Z"))
    envelope = search(recall, "swagger openapi", current_session="live-1234")
    assert codes(envelope) == [
        "recency_skew",
        "broad_query",
        "current_turn_excluded",
        "scope_incomplete",
        "project_spread",
        "raw_history",
    ]
    for warning in envelope.warnings:
        assert warning.message  # a human sentence built from the facts


def test_envelope_extras(recall: RecallService) -> None:
    put(recall, "a", ["pytest fixture"], project="one")
    put(recall, "b", ["pytest fixture"], project="one")
    put(recall, "c", ["pytest fixture"], project="two")
    envelope = search(recall, "pytest")
    assert envelope.store == recall.index.name and envelope.store_note == ""
    assert envelope.excluded_current_turn == 0
    assert [(r.project, r.sessions, r.status) for r in envelope.scopes_report] == [
        ("one", 2, "searched"),
        ("two", 1, "searched"),
    ]


# ---- re-ingest, isolation ---------------------------------------------------------------------------


def test_reingest_replaces_the_session(recall: RecallService) -> None:
    first = put(recall, "r", ["alpha original wording", "beta second"])
    assert not first.unchanged and first.messages_indexed == 2
    again = put(recall, "r", ["alpha original wording", "beta second"])
    assert again.unchanged  # the same bytes: skipped by SHA-256
    put(recall, "r", ["gamma rewritten"])
    assert search(recall, "alpha").count == 0  # the reference kept rewritten rows searchable
    assert search(recall, "gamma").count == 1
    with pytest.raises(NotFound):
        recall.read(ACME, gate_read(f"r:{mid('r', 1)}"))


def test_authorities_are_isolated(recall: RecallService) -> None:
    put(recall, "shared-id", ["acme secret plan"], who=ACME)
    put(recall, "shared-id", ["globex other plan"], who=GLOBEX)
    assert [r.snippet for r in search(recall, "plan", who=ACME).results] == ["acme secret plan"]
    assert search(recall, "secret", who=GLOBEX).count == 0
    put(recall, "acme-only", ["exclusive zebra words"], who=ACME)
    ref = search(recall, "zebra").results[0].read_ref
    with pytest.raises(NotFound):
        recall.read(GLOBEX, gate_read(ref))
    with pytest.raises(NotFound):
        recall.outline(GLOBEX, gate_outline("acme-only"))
    assert search(recall, "plan", who=GLOBEX).scopes_report[0].sessions == 1


# ---- refs -------------------------------------------------------------------------------------------


def test_every_printed_ref_reads_back(recall: RecallService) -> None:
    read_sample(recall, "claude-code", "obra-episodic-memory__skill-invocation-conversation.jsonl")
    put(recall, "2fa92c26-other", ["register twice"])  # a session sharing the first 8 characters
    envelope = search(recall, "register summarizer", limit=10)
    assert envelope.count == 2
    for result in envelope.results:
        read = recall.read(ACME, gate_read(result.read_ref))
        assert read.read_ref == result.read_ref and read.session_id == result.session_id
        assert read.anchor_uuid.startswith(result.read_ref.split(":")[1])
    skill = next(r for r in envelope.results if r.session_id.endswith("000000000002"))
    session_part, uuid_part = skill.read_ref.split(":")
    assert len(session_part) > 8 and len(uuid_part) > 8  # lengthened until unique


def test_a_page_of_hits_carries_each_ref_and_topic_as_the_single_reads_give_them(recall: RecallService) -> None:
    """The engine reads a page's refs and topics at once (SearchIndex.search fills SessionHit.ref
    and .topic): the same answers as printed_ref and session_topics one hit at a time, for
    lengthened session prefixes, a subagent thread, and hits before, inside and at a topic start."""
    read_sample(recall, "claude-code", "lanegrid-agtrace__claude_session.jsonl")
    read_sample(recall, "claude-code", "lanegrid-agtrace__claude_agent.jsonl")  # its thread: a nested ref
    zebra_at = [2, 3, 0, 3, 5]  # the one row of each session holding the word
    for i, at in enumerate(zebra_at):
        put(recall, f"shared-prefix-{i}", [("zebra crossing" if j == at else f"filler line {j}") for j in range(6)])
    # uuids sharing 35 characters: the uuid part of the ref is lengthened to the whole uuid
    twins = [f"aaaaaaaa-0000-4000-8000-00000000000{j}" for j in range(4)]
    put(
        recall,
        "twins",
        [{"uuid": u, "role": "user", "text": "zebra twins" if j == 2 else "other"} for j, u in enumerate(twins)],
    )
    labels = {
        1: [(1, "early"), (4, "late")],
        2: [(2, "after the hit")],
        3: [(3, "exact")],
        4: [(0, "whole"), (5, "end")],
    }
    for i, starts in labels.items():
        for at, label in starts:
            recall.label_topic(ACME, gate_topic_label(f"shared-prefix-{i}:{mid(f'shared-prefix-{i}', at)}", label))
    envelope = search(recall, "zebra OR codebase", include_subagents=True, limit=10)
    topics = {r.session_id: r.topic for r in envelope.results if r.session_id.startswith("shared-prefix-")}
    assert topics == {f"shared-prefix-{i}": t for i, t in enumerate(["", "early", "", "exact", "end"])}
    assert any("/" in r.session_id for r in envelope.results)  # the thread is on the page
    for result in envelope.results:
        anchor = recall.read(ACME, gate_read(result.read_ref)).anchor_uuid
        assert result.read_ref == recall.index.printed_ref("acme", result.session_id, anchor)
        pos = recall.index.message("acme", result.session_id, anchor).pos  # type: ignore[union-attr]
        single = [t.label for t in recall.index.session_topics("acme", result.session_id) if t.start_pos <= pos]
        assert result.topic == (single[-1] if single else "")
        if result.session_id.startswith("shared-prefix-"):
            assert result.read_ref.split(":")[0] == result.session_id  # lengthened until unique: whole
        # Each part is the shortest that resolves to exactly this message (REF_PREFIX at least).
        session_part, uuid_part = result.read_ref.split(":")
        assert recall.index.resolve_messages("acme", result.session_id, uuid_part).total == 1
        if len(uuid_part) > 8:
            assert recall.index.resolve_messages("acme", result.session_id, uuid_part[:-1]).total > 1
        if "~" not in session_part:
            assert recall.index.resolve_sessions("acme", session_part).total == 1
            if len(session_part) > 8:
                assert recall.index.resolve_sessions("acme", session_part[:-1]).total > 1
        if "/" in result.session_id:
            assert result.read_ref.startswith("7f2abd2d~0c4c3cf8:")
    assert next(r for r in envelope.results if r.session_id == "twins").read_ref == f"twins:{twins[2]}"


def test_full_dashed_uuid_and_ref_prefix(recall: RecallService) -> None:
    read_sample(recall, "claude-code", "lanegrid-agtrace__claude_session.jsonl")
    full = "ref=7f2abd2d:f370ce0f-84e8-42ab-a6c9-c5d925abd271"
    assert recall.read(ACME, gate_read(full)).anchor_uuid == "f370ce0f-84e8-42ab-a6c9-c5d925abd271"
    asked = recall.read(ACME, gate_read("7F2ABD2D:F370CE0F"))
    assert asked.read_ref == "7f2abd2d:f370ce0f" and asked.canonical_ref == "7f2abd2d:f370ce0f"


def test_read_echoes_the_ref_as_asked_beside_the_canonical_one(recall: RecallService) -> None:
    """Issue 19 item 8: the reference echoes the ref as asked (`784c95c8:2c02`); the canonical,
    shortest unique form goes beside it. The session part takes the real id's spelling."""
    read_sample(recall, "claude-code", "lanegrid-agtrace__claude_session.jsonl")
    short = recall.read(ACME, gate_read("ref=7F2ABD2D:f370"))
    assert short.read_ref == "7f2abd2d:f370" and short.canonical_ref == "7f2abd2d:f370ce0f"
    longer = recall.read(ACME, gate_read("7f2abd2d-7cfc:f370ce0f-84e8"))
    assert longer.read_ref == "7f2abd2d-7cfc:f370ce0f-84e8" and longer.canonical_ref == "7f2abd2d:f370ce0f"
    assert recall.read(ACME, gate_read(longer.canonical_ref)).anchor_uuid == longer.anchor_uuid


def test_all_digit_uuid_prefixes(recall: RecallService) -> None:
    put(
        recall,
        "digits",
        [
            {"uuid": "12345678-1234-4234-8234-123456789abc", "role": "user", "text": "numeric looking"},
            {"uuid": "abcdef01-1234-4234-8234-123456789abc", "role": "user", "text": "other"},
        ],
    )
    ref = search(recall, "numeric").results[0].read_ref
    assert ref == "digits:12345678"
    assert recall.read(ACME, gate_read(ref)).anchor_uuid.startswith("12345678")  # the reference refused it
    with pytest.raises(InvalidArgument) as caught:
        recall.read(ACME, gate_read("digits:87654321"))
    assert "old numeric ref" in caught.value.message


def test_session_prefixes_resolve_literally(recall: RecallService) -> None:
    put(recall, "a_b12345", ["underscore session"])
    put(recall, "axb12345", ["x session"])
    assert recall.outline(ACME, gate_outline("a_b")).session_id == "a_b12345"  # `_` is not a wildcard
    assert recall.outline(ACME, gate_outline("A_B1")).session_id == "a_b12345"  # case-insensitive
    for bad in ("", "a%", "%"):
        with pytest.raises(InvalidArgument):
            recall.outline(ACME, gate_outline(bad))
    with pytest.raises(NotFound):
        recall.outline(ACME, gate_outline("zzz"))


def test_ambiguity_lists_up_to_ten_candidates_with_the_total(recall: RecallService) -> None:
    for i in range(12):
        put(recall, f"deadbeef-{i:02d}", ["x"])
    with pytest.raises(AmbiguousRef) as caught:
        recall.outline(ACME, gate_outline("deadbeef"))
    assert caught.value.details["total"] == 12 and len(caught.value.details["candidates"]) == 10
    assert caught.value.details["candidates"][0] == "deadbeef-00"


def test_an_ambiguous_uuid_prefix_lists_its_candidates(recall: RecallService) -> None:
    read_sample(recall, "claude-code", "obra-episodic-memory__skill-invocation-conversation.jsonl")
    with pytest.raises(AmbiguousRef) as caught:
        recall.read(ACME, gate_read("2fa92c26:b0000000"))
    assert caught.value.details["total"] == 8 and len(caught.value.details["candidates"]) == 8


def test_unknown_session_and_message_are_not_found(recall: RecallService) -> None:
    put(recall, "known123", ["x"])
    with pytest.raises(NotFound):
        recall.read(ACME, gate_read("unknown1:abcdef01"))
    with pytest.raises(NotFound):
        recall.read(ACME, gate_read("known123:abcdef01"))


# ---- read -------------------------------------------------------------------------------------------


def thirty(recall: RecallService, session: str = "long") -> None:
    put(recall, session, [f"message number {i} talks about topic{i}" for i in range(30)])


def test_read_window_is_plus_minus_eight(recall: RecallService) -> None:
    thirty(recall)
    read = recall.read(ACME, gate_read(f"long:{mid('long', 15)[:8]}"))
    assert [m.text.split()[2] for m in read.messages] == [str(i) for i in range(7, 24)]
    assert (read.before, read.after) == (7, 6) and read.anchor_uuid == mid("long", 15)
    assert not read.truncated


def test_more_ladder_and_around(recall: RecallService) -> None:
    thirty(recall)
    ref = f"long:{mid('long', 15)[:8]}"
    wider = recall.read(ACME, gate_read(ref, more=1))
    assert len(wider.messages) == 30 and wider.window == 16  # radius (1 + 1) × 8, clipped to the session
    moved = recall.read(ACME, gate_read(ref, around=10, window=2))
    assert [m.text.split()[2] for m in moved.messages] == ["23", "24", "25", "26", "27"]
    back = recall.read(ACME, gate_read(ref, around=-15, window=1))
    assert [m.text.split()[2] for m in back.messages] == ["0", "1"]


def test_the_window_counts_displayed_rows(recall: RecallService) -> None:
    rows: list[Any] = []
    for i in range(20):
        rows.append(("user", f"visible {i}"))
        rows.append(("assistant", f"Bash tool call {i}", "tool"))
    put(recall, "mixed", rows)
    read = recall.read(ACME, gate_read(f"mixed:{mid('mixed', 20)[:8]}"))  # "visible 10"
    assert [m.text for m in read.messages] == [f"visible {i}" for i in range(2, 19)]  # 8 text rows each side
    with_tools = recall.read(ACME, gate_read(f"mixed:{mid('mixed', 20)[:8]}", include_tools=True))
    assert len(with_tools.messages) == 17 and {m.kind for m in with_tools.messages} == {"text", "tool"}


def test_neighbours_are_cut_and_the_anchor_is_whole(recall: RecallService) -> None:
    put(recall, "wide", ["n" * 500, "ANCHOR " + "a" * 900, "m" * 500])
    read = recall.read(ACME, gate_read(f"wide:{mid('wide', 1)[:8]}"))
    before, anchor, after = read.messages
    assert len(anchor.text) == 907 and len(before.text) == NEIGHBOUR_CHARS and len(after.text) == NEIGHBOUR_CHARS
    assert not read.truncated  # the preview cut is not a budget trim


def test_budget_keeps_the_anchor_and_reports_the_trim(recall: RecallService) -> None:
    thirty(recall)
    ref = f"long:{mid('long', 15)[:8]}"
    whole = recall.read(ACME, gate_read(ref))
    total = sum(len(m.text) for m in whole.messages)
    read = recall.read(ACME, gate_read(ref, budget=120))
    assert sum(len(m.text) for m in read.messages) <= 120
    assert read.anchor_uuid in [m.uuid for m in read.messages]
    assert read.truncated and read.trimmed_msgs == 17 - sum(
        1 for m in read.messages if not m.text.endswith(TRUNCATION_MARKER)
    )
    assert read.trimmed_chars == total - sum(len(m.text.removesuffix(TRUNCATION_MARKER)) for m in read.messages)
    assert f"--budget {total}" in read.next_command and ref in read.next_command


def test_thinking_in_a_read_only_when_asked(recall: RecallService) -> None:
    put(recall, "t", [("user", "hello"), ("assistant", "hmm", "thinking"), ("assistant", "hi")])
    plain = recall.read(ACME, gate_read(f"t:{mid('t', 0)[:8]}"))
    assert [m.kind for m in plain.messages] == ["text", "text"]
    thinking = recall.read(ACME, gate_read(f"t:{mid('t', 0)[:8]}", include_thinking=True))
    assert [m.kind for m in thinking.messages] == ["text", "thinking", "text"]


# ---- outline ----------------------------------------------------------------------------------------


def test_outline_bookends(recall: RecallService) -> None:
    put(recall, "arc", [f"{'x' * 400} step {i}" for i in range(12)], base=datetime(2025, 5, 1, 1, 30, tzinfo=UTC))
    outline = recall.outline(ACME, gate_outline("arc"))
    assert [m.uuid for m in outline.start] == [mid("arc", i) for i in range(4)]
    assert [m.uuid for m in outline.end] == [mid("arc", i) for i in range(8, 12)]
    assert outline.mid_count == 4 and outline.message_count == 12
    assert all(len(m.text) == OUTLINE_TEXT_CHARS for m in outline.start + outline.end)
    assert outline.iso == "2025-05-01T01:41:00.000Z" and outline.started_at == "2025-05-01T01:30:00.000Z"
    short = put(recall, "short", ["a", "b", "c", "d", "e"])
    assert short.messages_indexed == 5
    small = recall.outline(ACME, gate_outline("short"))
    assert len(small.start) == 4 and len(small.end) == 1 and small.mid_count == 0  # no overlap


def test_outline_bookends_are_looked_for_among_forty_rows(recall: RecallService) -> None:
    rows: list[Any] = [("assistant", f"tool {i}", "tool") for i in range(45)]
    rows += [("user", "late text")]
    rows += [("assistant", f"tool tail {i}", "tool") for i in range(45)]
    put(recall, "toolheavy", rows)
    outline = recall.outline(ACME, gate_outline("toolheavy"))
    # No bookend either side: mid_count is every row of the session, as the reference counts it.
    assert outline.start == [] and outline.end == [] and outline.mid_count == 91
    # Issue 19 item 7: bookends are the conversation; include_tools does not put tool rows there.
    assert recall.outline(ACME, gate_outline("toolheavy", include_tools=True)).start == []


def test_outline_mid_count_is_the_rows_between_the_bookends(recall: RecallService) -> None:
    """Issue 19 item 7: mid_count counted displayed rows (56 where the reference said 32); the
    reference counts every row strictly between the last start bookend and the first end one."""
    rows: list[Any] = []
    for i in range(10):
        rows += [("user", f"ask {i}"), ("assistant", f"call {i}", "tool"), ("assistant", f"answer {i}")]
    put(recall, "mixed", rows)
    outline = recall.outline(ACME, gate_outline("mixed"))
    assert [m.text for m in outline.start] == ["ask 0", "answer 0", "ask 1", "answer 1"]
    assert [m.text for m in outline.end] == ["ask 8", "answer 8", "ask 9", "answer 9"]
    assert outline.mid_count == 18  # rows 6..23, tool rows included, as the reference counts them
    with_tools = recall.outline(ACME, gate_outline("mixed", include_tools=True))
    assert all(m.kind != "tool" for m in with_tools.start + with_tools.end)
    assert with_tools.mid_count == outline.mid_count


def test_subagent_threads(recall: RecallService) -> None:
    read_sample(recall, "claude-code", "lanegrid-agtrace__claude_session.jsonl")
    read_sample(recall, "claude-code", "lanegrid-agtrace__claude_agent.jsonl")
    outline = recall.outline(ACME, gate_outline("7f2abd2d"))
    assert outline.session_id == "7f2abd2d-7cfc-4447-9ddd-3ca8d14e02e9"  # the parent, not its thread
    assert outline.subagents == []  # issue 19 item 7: listed only when asked for, as in the reference
    listed = recall.outline(ACME, gate_outline("7f2abd2d", include_subagents=True))
    assert [(s.session_id, s.message_count) for s in listed.subagents] == [
        ("7f2abd2d-7cfc-4447-9ddd-3ca8d14e02e9/0c4c3cf8", 2)
    ]
    # Issue 19 item 5: a thread is found only when asked for.
    assert all("/" not in r.session_id for r in search(recall, "codebase").results)
    thread = search(recall, "codebase", include_subagents=True)
    assert thread.results[0].read_ref.startswith("7f2abd2d~0c4c3cf8:")  # `~`: safe in a URL path
    assert recall.read(ACME, gate_read(thread.results[0].read_ref)).session_id.endswith("/0c4c3cf8")
    child = recall.outline(ACME, gate_outline("7f2abd2d~0c4c"))
    assert recall.outline(ACME, gate_outline("7f2abd2d/0c4c")).session_id == child.session_id
    assert child.parent_session == "7f2abd2d-7cfc-4447-9ddd-3ca8d14e02e9"
    read_sample(recall, "codex", "lanegrid-agtrace__rollout-parent-019b88e0.jsonl")
    read_sample(recall, "codex", "lanegrid-agtrace__rollout-subagent-019b88e5.jsonl")
    codex = recall.outline(ACME, gate_outline("019b88e0", include_subagents=True))
    assert [(s.session_id, s.title) for s in codex.subagents] == [("019b88e5-a2e4-7b90-8953-38fce393c653", "review")]


# ---- topics -----------------------------------------------------------------------------------------


def test_topics_rank_globally_with_one_limit(recall: RecallService) -> None:
    note = recall.topics(ACME, gate_topics(q="anything"))
    assert note.hits == [] and "no topics tagged yet" in note.note
    for i, project in enumerate(["web", "api", "web", "ops"]):
        put(recall, f"topic{i}", ["start here", "more"], project=project)
    labels = ["database migration plan", "migration rollback", "css grid layout", "database backup"]
    for i, label in enumerate(labels):
        hit = recall.label_topic(ACME, gate_topic_label(f"topic{i}:{mid(f'topic{i}', 0)[:8]}", label))
        assert hit.topic == label
    found = recall.topics(ACME, gate_topics(q="database migration"))
    assert found.hits[0].topic == "database migration plan"  # both words
    assert {h.topic for h in found.hits} == {"database migration plan", "migration rollback", "database backup"}
    assert found.note == ""
    assert len(recall.topics(ACME, gate_topics(q="database migration", limit=2)).hits) == 2  # one global limit
    scoped = recall.topics(ACME, gate_topics(q="css", project="api"))
    assert scoped.hits == [] and scoped.note == ""  # something is tagged elsewhere: no "none yet" note
    assert recall.outline(ACME, gate_outline("topic0")).topics == ["database migration plan"]
    assert recall.topics(GLOBEX, gate_topics(q="database")).hits == []
    with_topic = search(recall, "start", project="api")
    assert with_topic.results[0].topic == "migration rollback"


def test_topics_survive_reingest_and_rebuild(recall: RecallService) -> None:
    put(recall, "keep", ["first words", "second words"])
    recall.label_topic(ACME, gate_topic_label(f"keep:{mid('keep', 1)[:8]}", "the second part"))
    put(recall, "keep", ["first words", "second words", "third words"])
    assert recall.outline(ACME, gate_outline("keep")).topics == ["the second part"]
    put(recall, "keep", ["only one now"])
    assert recall.outline(ACME, gate_outline("keep")).topics == []


# ---- rebuild ----------------------------------------------------------------------------------------


def test_rebuild_recreates_the_index_from_the_archive(recall: RecallService) -> None:
    read_sample(recall, "claude-code", "lanegrid-agtrace__claude_session.jsonl")
    read_sample(recall, "codex", "lanegrid-agtrace__codex_session.jsonl")
    put(recall, "generic-1", ["rebuild me please"])
    recall.label_topic(ACME, gate_topic_label(f"generic-1:{mid('generic-1', 0)[:8]}", "rebuild topic"))
    put(recall, "globex-1", ["rebuild me please"], who=GLOBEX)
    # The same hits, compared as a set: Lucene's bm25 counts deleted documents until their segments
    # merge (an update, such as a message's vector, deletes the old version), so on OpenSearch a
    # rebuilt index's scores depend on a different history than the old one's, and two close sessions
    # may swap places under a score-summing ranker (`passage`). SQLite's statistics have no history.
    before = sorted((r.read_ref, r.iso) for r in search(recall, "python OR rebuild", limit=20).results)
    report = recall.rebuild(Principal("acme", "admin"))
    assert report.transcripts == 3 and report.sessions == 3 and report.topics == 1 and report.failed == []
    assert sorted((r.read_ref, r.iso) for r in search(recall, "python OR rebuild", limit=20).results) == before
    assert len(before) == 3
    assert recall.topics(ACME, gate_topics(q="rebuild")).hits[0].topic == "rebuild topic"
    assert search(recall, "rebuild", who=GLOBEX).count == 1  # another authority is untouched


# ---- ingest -----------------------------------------------------------------------------------------


def test_bad_input_stores_nothing(recall: RecallService) -> None:
    with pytest.raises(InvalidArgument):
        recall.ingest(
            ACME,
            {
                "source": "t",
                "session_id": "bad",
                "messages": [
                    {"uuid": "1", "role": "user", "text": "ok", "timestamp": "2025-01-01T00:00:00Z"},
                    {"uuid": "2", "role": "user", "text": "ok", "timestamp": "not a time"},
                ],
            },
        )
    assert search(recall, "ok").count == 0
    with pytest.raises(InvalidArgument) as caught:
        recall.ingest(ACME, {"format": "claude-code-jsonl", "jsonl": "{broken\n[]\n"})
    assert caught.value.details["malformed"] == 2
    assert recall.index.scopes("acme") == []


def test_malformed_lines_are_counted_on_ingest(recall: RecallService) -> None:
    text = (SAMPLES / "claude-code" / "obra-episodic-memory__tiny-conversation.jsonl").read_text()
    result = recall.ingest(ACME, {"format": "claude-code-jsonl", "jsonl": text + "\n{oops\n"})
    assert result.malformed == 1 and result.messages_indexed == 7
    assert result.warnings[0]["code"] == "malformed_line"


def test_every_sample_indexes_and_its_refs_read_back(recall: RecallService) -> None:
    for folder in ("claude-code", "codex"):
        for path in sorted((SAMPLES / folder).glob("*.jsonl")):
            result = read_sample(recall, folder, path.name)
            for session in result.sessions:
                info = recall.index.session("acme", session.session_id)
                assert info is not None and info.message_count == session.messages
    words = "python OR file OR review OR redacted_text OR open OR warmup OR ls OR instructions OR summarize"
    envelope = search(recall, words, limit=100, include_tools=True, include_subagents=True)
    assert envelope.count == envelope.total_matches == 12  # every session of the twelve files
    assert search(recall, words, limit=100, include_tools=True).total_matches == 10  # less the two threads
    for result in envelope.results:
        assert recall.read(ACME, gate_read(result.read_ref)).read_ref == result.read_ref
    assert json.dumps([r.read_ref for r in envelope.results])  # printable


# ---- concurrency ------------------------------------------------------------------------------------


def test_replace_is_atomic_under_concurrent_readers(index_engine: SearchIndex) -> None:
    """Real threads: one writer flips a session between two versions while readers search and
    outline it. Every answer shows one version whole, never a mix."""
    import threading

    from dovecote.recall.model import Message, Session, Visibility
    from dovecote.recall.ports import IndexQuery, SearchFilter
    from dovecote.recall.query import parse_query

    def version(word: str) -> Session:
        messages = tuple(
            Message(uuid=mid(word, i), role="user", kind="text", text=f"{word} line {i}", timestamp=stamp(i))
            for i in range(12)
        )
        return Session("flip", "test", "alpha", "", messages)

    index_engine.replace_session("acme", version("apple"), sha256="a")
    query = parse_query("apple OR banana")
    assert query is not None
    start = threading.Barrier(4)
    stop = threading.Event()
    problems: list[str] = []
    flips = 60 if CI else 20  # a desk run samples fewer interleavings

    def writer() -> None:
        start.wait()
        for i in range(flips):
            index_engine.replace_session("acme", version("banana" if i % 2 == 0 else "apple"), sha256=str(i))
        stop.set()

    def reader() -> None:
        start.wait()
        while not stop.is_set():
            rows = index_engine.outline("acme", "flip", visibility=Visibility(), scan=40, bookend=4)
            words = {r.text.split()[0] for r in rows.start + rows.end}
            if len(words) != 1 or rows.between != 4:  # 12 rows: 4 + 4 bookends and 4 between
                problems.append(f"outline saw {words} / {rows.between}")
            page = index_engine.search(
                "acme", IndexQuery(query=query, filter=SearchFilter(visibility=Visibility(thinking=True)), limit=5)
            )
            if page.total_sessions != 1:
                problems.append(f"search saw {page.total_sessions} sessions")

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert problems == []
    final = index_engine.session("acme", "flip")
    assert final is not None and final.message_count == 12 and final.sha256 == str(flips - 1)


def test_concurrent_ingests_of_different_sessions_all_land(recall: RecallService) -> None:
    import threading

    barrier = threading.Barrier(6)
    errors: list[BaseException] = []

    def ingest(worker: int) -> None:
        barrier.wait()
        try:
            for j in range(5):
                put(recall, f"t{worker}-{j}", [f"parallel ingest marker {worker} {j}", "second line"])
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=ingest, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    envelope = search(recall, "parallel ingest marker", limit=50)
    assert envelope.total_matches == 30 and envelope.complete


def test_semantic_on_says_whether_the_tier_ran(
    index_engine: SearchIndex, archive: InMemoryArchive, ledger: InMemoryLedger
) -> None:
    """Every engine answers `semantic=on`: one with a vector tier runs it and reports its coverage;
    one without answers with the words and says the tier did not run (both engines have one now)."""
    from dovecote.embedding.fakes import HashingEmbedder
    from dovecote.recall.ports import VectorTier

    recall = RecallService(index_engine, archive, ledger, clock=lambda: NOW, embedder=HashingEmbedder())
    put(recall, "vec-1", ["the lease fence check raced", "patched it"])
    put(recall, "vec-2", ["an unrelated cache warmup", "fine"])
    recall.embed_pending()
    on = search(recall, "lease fence", semantic="on")
    off = search(recall, "lease fence", semantic="off")
    assert sessions_of(on)[0] == sessions_of(off)[0] == "vec-1"
    c = on.vector_coverage
    if isinstance(index_engine, VectorTier):
        assert (c.ran, c.candidate_msgs, c.vectored_msgs, c.missing_msgs) == (True, 4, 4, 0)
    else:
        assert (c.ran, c.candidate_msgs, c.vectored_msgs, c.missing_msgs) == (False, 0, 0, 0)
    assert not off.vector_coverage.ran
    assert "vector_gap" not in codes(on)
