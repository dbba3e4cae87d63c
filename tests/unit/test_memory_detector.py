"""The default detector's verb rules as a table of memory pairs, and the bounded retrieval in
front of it. The table is the documentation: each row is an example the manual can quote."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dovecote.memory import lexicon
from dovecote.memory.detector import LexicalDetector
from dovecote.memory.model import Memory
from dovecote.memory.retrieval import (
    MAX_INDEX_TERMS,
    POSTING_RECENT,
    TOP_K,
    Posting,
    TermStats,
    index_terms,
    pick,
)
from tests.conftest import examples

SMALL = TermStats(1, {})

# (older memory, its tags, newer memory, its tags, expected verb or None)
PAIRS: list[tuple[str, tuple[str, ...], str, tuple[str, ...], str | None]] = [
    # contradictions
    ("The retry limit is 5", (), "The retry limit is 7", (), "conflicts_with"),
    ("The cache is enabled", (), "The cache isn't enabled", (), "conflicts_with"),
    ("Deploys happen on Fridays", (), "Deploys never happen on Fridays", (), "conflicts_with"),
    ("The API allows 100 requests per minute", (), "The API allows 200 requests per minute", (), "conflicts_with"),
    (
        "Deploy window: Friday",
        ("subject:deploy-window",),
        "Deploy window: Monday",
        ("subject:deploy-window",),
        "conflicts_with",
    ),
    # restatements and near-duplicates
    ("Retry limit = 5", (), "The retry limit is 5", (), "compatible"),
    ("Alice prefers dark mode in the editor", (), "Alice wants the editor in dark mode", (), "compatible"),
    (
        "The staging database runs Postgres 15 on a large instance",
        (),
        "Staging database: Postgres 15 on a large instance",
        (),
        "compatible",
    ),
    (
        "The on-call rotation changes every Monday",
        ("subject:oncall",),
        "The on-call rotation changes every Monday morning",
        ("subject:oncall",),
        "compatible",
    ),
    # same subject
    (
        "Deploy window moved to Thursday evenings",
        ("subject:deploy-window",),
        "Deploys happen Friday mornings",
        ("subject:deploy-window",),
        "supersedes",
    ),
    (
        "The billing service is owned by team red",
        ("subject:billing-owner",),
        "Team blue took over billing after the reorg",
        ("subject:billing-owner",),
        "supersedes",
    ),
    ("DB host is db1.internal", ("subject:db",), "DB port is 5432", ("subject:db",), "not_conflict"),
    # related
    ("We chose Postgres for the ledger service", (), "The ledger service stores balances in Postgres", (), "related"),
    ("The deploy pipeline runs on GitHub Actions", (), "GitHub Actions minutes are billed monthly", (), "related"),
    # unrelated, sharing only common words
    ("The team uses the new office on Monday", (), "The new build uses less memory", (), None),
    ("The build uses the blue cluster", (), "The lunch menu has blue plates", (), None),
    ("It is what it is", (), "This is it", (), None),
    ("We should always write tests first", (), "We should get lunch soon", (), None),
    ("The deploy is on Friday", (), "The invoice is overdue", (), None),
    # different subjects are not compared by subject
    (
        "Deploys happen Friday mornings",
        ("subject:deploy-window",),
        "Lunch happens Friday mornings",
        ("subject:lunch",),
        "related",
    ),
]


def memory(memory_id: str, seq: int, content: str, tags: tuple[str, ...] = ()) -> Memory:
    return Memory("acme", memory_id, "s", seq, content, tags, "2026-01-01T00:00:00.000Z")


@pytest.mark.parametrize(("older", "older_tags", "newer", "newer_tags", "verb"), PAIRS)
def test_verb_rules(
    older: str, older_tags: tuple[str, ...], newer: str, newer_tags: tuple[str, ...], verb: str | None
) -> None:
    new = memory("n", 2, newer, newer_tags)
    found = LexicalDetector().detect(new, [memory("o", 1, older, older_tags)], SMALL)
    assert [c.verb for c in found] == ([verb] if verb else [])
    for c in found:
        assert (c.from_id, c.to_id) == ("n", "o")
        assert c.evidence_ids[:2] == ("memory:n", "memory:o")
        assert any(e.startswith("rule:") for e in c.evidence_ids)
        assert c.note


def test_evidence_names_the_terms_and_the_attribute() -> None:
    new = memory("n", 2, "The retry limit is 7")
    (c,) = LexicalDetector().detect(new, [memory("o", 1, "The retry limit is 5")], SMALL)
    assert c.evidence_ids == (
        "memory:n",
        "memory:o",
        "rule:attribute_value",
        "attribute:limit retry",
        "term:limit",
        "term:retry",
    )
    assert "'7' now, '5' before" in c.note


def test_terms_common_to_a_scope_do_not_relate_memories() -> None:
    # In a scope of 100 memories where "ledger" and "service" are in 90 of them, sharing them (and
    # nothing rarer) is not evidence; in a small scope the same pair is related.
    older = memory("o", 1, "The ledger service has a new owner")
    new = memory("n", 2, "The ledger service dashboard is slow")
    assert [c.verb for c in LexicalDetector().detect(new, [older], SMALL)] == ["related"]
    busy = TermStats(100, {"ledger": 90, "service": 90, "dashboard": 1, "slow": 3})
    assert LexicalDetector().detect(new, [older], busy) == []


def test_the_new_memory_is_never_compared_with_itself() -> None:
    new = memory("n", 2, "The retry limit is 7")
    assert LexicalDetector().detect(new, [new], SMALL) == []


def test_lexicon_reads_statements() -> None:
    s = lexicon.read("The retry limit isn't 5.")
    assert s.attribute == ("limit", "retry") and s.value == frozenset({"5"}) and s.value_negated
    assert lexicon.read("First sentence is one. Second is two.").attribute == ()
    assert lexicon.read("Requests are throttled").attribute == ("request",)
    assert lexicon.terms("The Servers' CACHES use Postgres") == ["server", "cache", "postgre"]


# ---- retrieval -----------------------------------------------------------------------------------


def test_index_terms_are_bounded_and_carry_the_subject() -> None:
    content = " ".join(f"word{i}" for i in range(200))
    terms = index_terms(content, ["subject:Deploy-Window", "team:red"])
    assert len(terms) == MAX_INDEX_TERMS + 1 and terms[-1] == "subject:deploy-window"
    assert index_terms("the and of", []) == ()


def test_postings_keep_a_bounded_window_of_the_most_recent_memories() -> None:
    posting = Posting(0, ())
    for seq in range(1, 100):
        posting = posting.with_memory(seq)
    assert posting.df == 99 and posting.recent == tuple(range(100 - POSTING_RECENT, 100))


def test_pick_puts_the_latest_memory_on_the_subject_first_then_rarest_terms() -> None:
    postings = {
        "subject:db": Posting(3, (2, 5, 9)),
        "postgre": Posting(2, (4, 9)),
        "replica": Posting(1, (7,)),
        "database": Posting(60, tuple(range(69, 101))),  # common in a scope of 100: skipped
    }
    picks = pick(["postgre", "replica", "database", "subject:db"], postings, 100)
    assert picks[0].seq == 9 and picks[0].by_subject and picks[0].terms[0] == "subject:db"
    assert [p.seq for p in picks] == [9, 7, 4]
    assert picks[1].terms == ("replica",)


@settings(max_examples=examples(60), deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([f"t{i}" for i in range(60)]),
        st.tuples(st.integers(1, 10_000), st.lists(st.integers(1, 10_000), min_size=1, max_size=POSTING_RECENT)),
        max_size=60,
    ),
    st.integers(1, 10_000),
)
def test_pick_is_bounded_whatever_the_scope(raw: dict[str, tuple[int, list[int]]], memories: int) -> None:
    postings = {t: Posting(df, tuple(sorted(set(seqs)))) for t, (df, seqs) in raw.items()}
    picks = pick(list(postings), postings, memories)
    assert len(picks) <= TOP_K
    assert len({p.seq for p in picks}) == len(picks)
    window = {s for p in postings.values() for s in p.recent}
    assert all(p.seq in window for p in picks)  # only what the postings hold: no scan


@settings(max_examples=examples(80), deadline=None)
@given(st.text(max_size=200), st.text(max_size=200))
def test_the_detector_is_deterministic_and_only_points_backwards(a: str, b: str) -> None:
    new, old = memory("n", 2, b), memory("o", 1, a)
    first = LexicalDetector().detect(new, [old], SMALL)
    assert first == LexicalDetector().detect(new, [old], SMALL)
    assert all((c.from_id, c.to_id) == ("n", "o") for c in first) and len(first) <= 1
