"""Long terms: every term fits a DynamoDB key, one form serves indexing, lookup and detection, and two
different long words stay two terms."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dovecote.memory import lexicon
from dovecote.memory.detector import LexicalDetector
from dovecote.memory.model import Memory
from dovecote.memory.retrieval import TermStats, index_terms
from tests.conftest import examples

LIMIT = lexicon.MAX_TERM_BYTES


def test_a_long_word_becomes_a_bounded_term_and_short_ones_are_untouched() -> None:
    (term,) = lexicon.terms("a" * 2048)
    assert len(term.encode()) <= LIMIT and term.startswith("a" * 40 + "~")
    assert lexicon.terms("a" * 2048) == [term]  # deterministic
    assert index_terms("a" * 2048, []) == (term,)
    assert lexicon.terms("cache " + "x" * LIMIT) == ["cache", "x" * LIMIT]  # at the limit: as it is
    # Same prefix, different words: different terms.
    assert lexicon.terms("a" * 3000) != lexicon.terms("a" * 2999 + "b")


@settings(max_examples=examples(200), deadline=None)
@given(st.text(alphabet=st.characters(categories=["L", "N"]), min_size=1, max_size=3000))
def test_every_term_fits_and_no_character_is_cut_in_half(word: str) -> None:
    for term in lexicon.terms(word * 2):
        encoded = term.encode("utf-8")  # never raises: no half character
        assert len(encoded) <= LIMIT
        assert "#" not in term  # keys stay injective


def test_the_detector_sees_a_long_term_as_the_index_does() -> None:
    word = "z" * 2048
    new = Memory("acme", "m2", "s", 2, f"{word} {word[:-1]}y cache", (), "2026-01-01T00:00:00Z")
    old = Memory("acme", "m1", "s", 1, f"{word} {word[:-1]}y cache", (), "2026-01-01T00:00:00Z")
    terms = index_terms(new.content, ())
    stats = TermStats(1, {t: 1 for t in terms})  # what the postings (keyed by index terms) report
    (candidate,) = LexicalDetector().detect(new, [old], stats)
    assert candidate.verb == "compatible"
    shared = {e.removeprefix("term:") for e in candidate.evidence_ids if e.startswith("term:")}
    assert shared == set(terms)  # the evidence names the terms the index holds
