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
    gate_outline,
    gate_read,
    gate_search,
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
