"""dovecote.recall.fusion: the reference's RRF (k = 60) and the weighted fusion of normalised scores."""

from __future__ import annotations

import pytest

from dovecote.recall.fusion import RRF_K, Ranked, fuse, model_key


def test_rrf_sums_one_over_k_plus_rank_plus_one_and_shows_the_lexical_row() -> None:
    lexical = [Ranked("a", "a-word", 9.0, 2), Ranked("b", "b-word", 5.0, 1)]
    semantic = [Ranked("b", "b-vec", 0.9), Ranked("c", "c-vec", 0.8)]
    fused = fuse(lexical, semantic, method="rrf", lexical_share=0.5)
    scores = {f.session: f.score for f in fused}
    assert scores["a"] == pytest.approx(1 / (RRF_K + 1))
    assert scores["b"] == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 1))
    assert scores["c"] == pytest.approx(1 / (RRF_K + 2))
    assert [f.session for f in fused] == ["b", "a", "c"]
    assert [f.row for f in fused] == ["b-word", "a-word", "c-vec"]  # a session the words found shows their row


def test_rrf_ties_go_to_coverage_then_to_the_better_rank() -> None:
    lexical = [Ranked("a", 1, 3.0, 1), Ranked("b", 2, 2.0, 2)]
    semantic = [Ranked("b", 2, 0.9), Ranked("a", 1, 0.8)]
    assert [f.session for f in fuse(lexical, semantic, method="rrf", lexical_share=0.5)] == ["b", "a"]
    even = [Ranked("a", 1, 3.0, 1), Ranked("b", 2, 2.0, 1)]
    assert [f.session for f in fuse(even, semantic, method="rrf", lexical_share=0.5)] == ["a", "b"]


def test_weighted_normalises_each_list_and_weighs_the_lexical_share() -> None:
    lexical = [Ranked("a", 1, 20.0), Ranked("b", 2, 10.0), Ranked("c", 3, 0.0)]
    semantic = [Ranked("c", 3, 0.9), Ranked("b", 2, 0.5), Ranked("d", 4, 0.1)]
    fused = {f.session: f.score for f in fuse(lexical, semantic, method="weighted", lexical_share=0.75)}
    assert fused["a"] == pytest.approx(0.75 * 1.0)
    assert fused["b"] == pytest.approx(0.75 * 0.5 + 0.25 * 0.5)
    assert fused["c"] == pytest.approx(0.25 * 1.0)
    assert fused["d"] == pytest.approx(0.0)
    only_words = fuse(lexical, semantic, method="weighted", lexical_share=1.0)
    assert [f.session for f in only_words][:3] == ["a", "b", "c"]


def test_one_item_lists_and_an_unknown_method() -> None:
    assert fuse([], [Ranked("x", 1, 0.3)], method="weighted", lexical_share=0.9)[0].score == pytest.approx(0.1)
    with pytest.raises(ValueError, match="unknown fusion"):
        fuse([], [], method="borda", lexical_share=0.5)


def test_a_model_at_another_dimension_is_another_key() -> None:
    assert model_key("amazon.titan-embed-text-v2:0", 256) != model_key("amazon.titan-embed-text-v2:0", 1024)
