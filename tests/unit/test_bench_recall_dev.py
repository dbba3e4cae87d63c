"""bench/recall_dev.py: the agreement measure (Kendall's τ against the held-out table's order), the
figures, LoCoMo's normalization, and the real search path over the self-written fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.recall_dev import (
    FIXTURE,
    HELD_OUT,
    HELD_OUT_ORDER,
    HELD_OUT_TABLE,
    agreement,
    kendall_tau,
    load,
    order_of,
    prepare,
    ranks_of,
    scores,
    service_searcher,
    tau_of_scores,
)
from dovecote.platform.principal import Principal
from dovecote.recall.memory import InMemoryArchive, InMemoryLedger
from dovecote.recall.service import RecallService
from dovecote.recall.sqlite import SqliteSearchIndex


def test_tau_is_one_for_the_same_order_and_minus_one_for_the_reverse() -> None:
    assert kendall_tau(HELD_OUT_ORDER, HELD_OUT_ORDER) == 1.0
    assert kendall_tau(HELD_OUT_ORDER[::-1], HELD_OUT_ORDER) == -1.0


def test_tau_counts_discordant_pairs() -> None:
    # One adjacent swap of five: 9 concordant pairs, 1 discordant, τ = 8 / 10.
    swapped = ("top2", "session", "message", "passage", "fused")
    assert kendall_tau(swapped, HELD_OUT_ORDER) == pytest.approx(0.8)
    # The last round's default first: passage above three it loses to is 3 discordant pairs.
    passage_first = ("passage", "session", "top2", "message", "fused")
    assert kendall_tau(passage_first, HELD_OUT_ORDER) == pytest.approx((7 - 3) / 10)


def test_tau_refuses_orderings_of_different_items() -> None:
    with pytest.raises(ValueError):
        kendall_tau(("session", "top2"), ("session", "message"))
    with pytest.raises(ValueError):
        kendall_tau(("session", "session"), ("session", "session"))


def test_the_held_out_table_agrees_with_itself() -> None:
    result = agreement(HELD_OUT_TABLE)
    assert result["order_by_mrr"] == list(HELD_OUT_ORDER)
    assert result["tau_mrr"] == 1.0 and result["tau_recall@1"] == 1.0


def test_tau_of_the_figures_matches_tau_of_the_order_without_ties() -> None:
    rows = {r: {"mrr": m} for r, m in zip(HELD_OUT_ORDER, (0.70, 0.75, 0.65, 0.60, 0.50), strict=True)}
    assert tau_of_scores(rows, "mrr") == pytest.approx(kendall_tau(order_of_mrr(rows), HELD_OUT_ORDER))
    assert tau_of_scores(rows, "mrr") == pytest.approx(0.8)


def order_of_mrr(rows: dict[str, dict[str, float]]) -> list[str]:
    return sorted(rows, key=lambda r: -rows[r]["mrr"])


def test_tied_figures_count_neither_way() -> None:
    # A set too easy to tell the rankers apart says nothing: τ 0, not an order drawn from the names.
    assert tau_of_scores({r: {"mrr": 1.0} for r in HELD_OUT_ORDER}, "mrr") == 0.0
    # Two tied, the rest in order: 9 concordant of 10 pairs, one tie: τ-b = 9 / sqrt(10 × 9).
    rows = {r: {"mrr": m} for r, m in zip(HELD_OUT_ORDER, (0.9, 0.9, 0.7, 0.6, 0.5), strict=True)}
    assert tau_of_scores(rows, "mrr") == pytest.approx(9 / (10 * 9) ** 0.5)
    # Against the order: every untied pair discordant.
    reverse = {r: {"mrr": m} for r, m in zip(HELD_OUT_ORDER, (0.1, 0.2, 0.3, 0.4, 0.5), strict=True)}
    assert tau_of_scores(reverse, "mrr") == -1.0


def test_order_breaks_mrr_ties_by_recall_at_1() -> None:
    rows = {"a": {"mrr": 0.5, "recall@1": 0.4}, "b": {"mrr": 0.5, "recall@1": 0.45}}
    assert order_of(rows) == ["b", "a"]


def test_scores_count_a_hit_within_k_and_a_miss_as_zero() -> None:
    got = scores([1, 2, 4, None])
    assert got["recall@1"] == 0.25
    assert got["recall@3"] == 0.5
    assert got["recall@5"] == 0.75
    assert got["recall@8"] == 0.75
    assert got["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 4) / 4)


def test_prepare_normalizes_a_locomo_conversation(tmp_path: Path) -> None:
    raw = {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely!", "blip_caption": "a photo of a cat"},
        ],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "The cat knocked over my plant."}],
        "session_3_date_time": "10:37 am on 28 June, 2023",  # a date with no turns is no session
        "qa": [
            {"question": "What did Ana adopt?", "answer": "a cat", "evidence": ["D1:1"], "category": 1},
            {"question": "What happened?", "answer": "x", "evidence": ["D1:2; D2:1"], "category": 3},
            {"question": "Did Ana adopt a dog?", "evidence": ["D1:1"], "category": 5},  # adversarial: not asked
            {"question": "No evidence?", "answer": "x", "evidence": [], "category": 1},  # not asked
        ],
    }
    (tmp_path / "77.json").write_text(json.dumps(raw))
    out = prepare(tmp_path, tmp_path / "set.json")
    devset = load(out, captions=True)
    assert [b["session_id"] for b in devset.bodies] == ["conv-77-s1", "conv-77-s2"]
    first = devset.bodies[0]["messages"]
    assert [m["role"] for m in first] == ["user", "assistant"]
    assert first[0]["timestamp"] == "2023-05-08T13:56:00Z"
    assert first[1]["text"] == "Ben: Lovely! [shares a photo of a cat]"
    assert [(q.text, sorted(q.targets)) for q in devset.questions] == [
        ("What did Ana adopt?", ["conv-77-s1"]),
        ("What happened?", ["conv-77-s1", "conv-77-s2"]),
    ]


def test_the_fixture_ranks_through_the_real_search_path() -> None:
    devset = load(FIXTURE)
    assert devset.slice(held_out=True) and devset.slice(held_out=False)
    assert {q.conversation for q in devset.slice(held_out=True)} <= HELD_OUT
    index = SqliteSearchIndex(":memory:")
    service = RecallService(index, InMemoryArchive(), InMemoryLedger())
    who = Principal("bench", "caller")
    for body in devset.bodies:
        service.ingest(who, body)
    ranks = ranks_of(service_searcher(service, who, "session"), devset.questions)
    assert ranks == [1] * len(devset.questions)
    # A question no session answers is a miss, not an error.
    assert service_searcher(service, who, "session")("zzzz qqqq") == []
    index.close()
