"""The `passage` ranker (ranking.py): a conversation ranks by its best stretch of matching messages,
PASSAGE_SPAN positions long, each further matching turn of it adding PASSAGE_TURN_BONUS of the sum."""

from __future__ import annotations

from dovecote.recall.model import PASSAGE_SPAN, PASSAGE_TURN_BONUS
from dovecote.recall.ranking import Candidate, rank_sessions


def cand(rowid: int, session: str, pos: int, score: float, terms: set[int]) -> Candidate:
    return Candidate(rowid=rowid, session_id=session, pos=pos, timestamp="", score=score, terms=frozenset(terms))


def test_an_exchange_over_consecutive_turns_beats_one_passing_message() -> None:
    candidates = [
        cand(1, "passing", 4, 9.0, {0, 1, 2}),  # every word once, in passing
        cand(2, "passing", 40, 3.0, {0}),  # the subject again, far away
        cand(3, "exchange", 10, 6.0, {0, 1}),
        cand(4, "exchange", 11, 4.0, {0}),
    ]
    assert [r.best.session_id for r in rank_sessions(candidates, ranker="message")] == ["passing", "exchange"]
    ranked = rank_sessions(candidates, ranker="passage")
    assert [r.best.session_id for r in ranked] == ["exchange", "passing"]
    assert [r.score for r in ranked] == [round(10.0 * (1 + PASSAGE_TURN_BONUS), 6), 9.0]
    # The ref still points at the conversation's best message (coverage first, then score).
    assert ranked[0].best.rowid == 3


def test_a_stretch_is_the_span_after_a_matching_message() -> None:
    inside = [cand(1, "s", 0, 1.0, {0}), cand(2, "s", PASSAGE_SPAN, 2.0, {0}), cand(3, "s", PASSAGE_SPAN + 1, 4.0, {0})]
    # pos 0..SPAN holds rows 1 and 2 (3.0); from pos SPAN: rows 2 and 3 (6.0), two turns.
    assert rank_sessions(inside, ranker="passage")[0].score == round(6.0 * (1 + PASSAGE_TURN_BONUS), 6)
    apart = [cand(1, "s", 0, 1.0, {0}), cand(2, "s", PASSAGE_SPAN + 1, 2.0, {0})]
    assert rank_sessions(apart, ranker="passage")[0].score == 2.0


def test_scattered_mentions_do_not_add_up() -> None:
    # `fused` sums every matching message of a conversation; `passage` only a stretch's.
    long = [cand(i, "long", i * 10, 2.0, {0}) for i in range(1, 8)]
    focused = [cand(100, "focused", 5, 5.0, {0, 1}), cand(101, "focused", 6, 4.0, {0})]
    assert rank_sessions(long + focused, ranker="fused")[0].best.session_id == "long"
    assert rank_sessions(long + focused, ranker="passage")[0].best.session_id == "focused"


def test_more_matching_turns_beat_the_same_sum_in_fewer() -> None:
    one = [cand(1, "one", 0, 8.0, {0, 1})]
    three = [cand(2, "three", 0, 3.0, {0}), cand(3, "three", 1, 3.0, {1}), cand(4, "three", 2, 2.0, {0})]
    ranked = rank_sessions(one + three, ranker="passage")
    assert [r.best.session_id for r in ranked] == ["three", "one"]
    assert ranked[0].score == round(8.0 * (1 + 2 * PASSAGE_TURN_BONUS), 6)


def test_equal_stretches_keep_the_engine_order() -> None:
    candidates = [cand(1, "first", 0, 3.0, {0}), cand(2, "second", 0, 3.0, {0})]
    assert [r.best.session_id for r in rank_sessions(candidates, ranker="passage")] == ["first", "second"]
