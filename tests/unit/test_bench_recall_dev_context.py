"""bench/recall_dev_context.py: the features the new levers read (the index's stems, proximity,
bigrams and compounds, the project documents), the learned fusion's fit, and every lever run over
the self-written fixture through the real search path."""

from __future__ import annotations

import pytest

from bench.recall_dev import FIXTURE, Question, load
from bench.recall_dev_context import (
    Asked,
    Corpus,
    fit,
    fit_logistic,
    gather,
    lever_table,
    neighbours,
    project_prior,
    proximity,
    scorer,
    top_project,
)


def _body(project: str, sid: str, *texts: str) -> dict[str, object]:
    return {"project": project, "session_id": sid, "messages": [{"text": t, "role": "user"} for t in texts]}


BODIES = [
    _body("p1", "a", "Ana: we went on a road trip to the coast", "Ben: the trip was long"),
    _body("p1", "b", "Ana: my roadtrip photos are up", "Ben: road works everywhere"),
    _body("p2", "c", "Cy: the coast was cold", "Di: a trip to the road museum"),
]


def test_stems_are_the_index_stems_with_stop_words_as_gaps() -> None:
    corpus = Corpus(BODIES)
    # porter: "trips" -> "trip"; "did", "on", "a" and the possessive's "s" are gaps
    stems = corpus.stems("Did Ana's trips go on a road trip?")
    assert stems == [None, "ana", None, "trip", "go", None, None, "road", "trip"]
    assert corpus.messages["a"][1] == ["ben", "the", "trip", "wa", "long"]


def test_proximity_counts_bigrams_compounds_and_windows() -> None:
    corpus = Corpus(BODIES)
    stems = corpus.stems("road trip coast")
    a = proximity(corpus, "a", stems)
    assert a["bigrams"] == 1.0 and a["compounds"] == 0.0
    assert a["cover1"] == 1.0  # one message holds all three
    b = proximity(corpus, "b", stems)
    # "roadtrip" is the asked bigram written as one word; "road works" is not the bigram
    assert b["bigrams"] == 0.0 and b["compounds"] == 1.0
    assert b["cover1"] == pytest.approx(1 / 3) and b["cover2"] == pytest.approx(1 / 3)
    c = proximity(corpus, "c", stems)
    # every term, but "trip to the road" is not "road trip"; two messages needed for all three
    assert c["bigrams"] == 0.0 and c["cover1"] == pytest.approx(2 / 3) and c["cover2"] == 1.0
    # asked as one word, found written as two
    assert proximity(corpus, "a", corpus.stems("roadtrip"))["compounds"] == 1.0


def test_project_documents_rank_the_project_holding_the_words_first() -> None:
    corpus = Corpus(BODIES)
    assert corpus.project_documents("roadtrip photos")[0] == "p1"
    assert corpus.project_documents("museum")[:1] == ["p2"]
    assert corpus.project_documents("the") == []  # only a stop word: no query


def _asked(order: list[str], projects: list[str], target: str) -> Asked:
    q = Question("q", frozenset({target}), "conv-x", 1)
    return Asked(q, list(order), list(order), list(order), projects)


def test_the_project_rerankers_lift_the_best_matching_project() -> None:
    project_of = {"a": "p1", "b": "p1", "c": "p2", "d": "p2"}.__getitem__
    a = _asked(["c", "a", "b", "d"], ["p1", "p2"], "a")
    assert top_project(0.05, 10, project_of)(a)[:2] == ["a", "b"]
    assert top_project(0.0, 10, project_of)(a) == a.session_doc  # no weight, no change
    # at weight 1 one rank down in one list and one up in the other tie (the base order keeps c);
    # at weight 2 the project's rank outweighs the session's
    assert project_prior(10, 1.0, project_of)(a)[0] == "c"
    assert project_prior(10, 2.0, project_of)(a)[0] == "a"
    # neighbours: two of the top 3 are p1's, so p1's sessions rise over p2's
    b = _asked(["c", "a", "b", "d"], [], "a")
    assert neighbours(3, 2.0, 10, project_of)(b)[:2] == ["a", "b"]


def test_the_logistic_fit_weighs_the_informative_feature() -> None:
    rows = [[1.0, 0.3], [1.0, 0.7], [0.0, 0.4], [0.0, 0.6]] * 10
    labels = [1, 1, 0, 0] * 10
    w = fit_logistic(rows, labels)
    assert w[0] > 2.0 and abs(w[1]) < 0.5


def test_the_pairwise_fit_puts_the_marked_candidate_first() -> None:
    project_of = {"a": "p", "b": "p", "c": "p"}.__getitem__
    asked = []
    for target in ("a", "b", "c"):
        a = _asked(["a", "b", "c"], ["p"], target)
        a.features = {s: {"bigrams": float(s == target)} for s in "abc"}
        asked.append(a)
    names = ("sd", "bigrams")
    weights = fit(asked, names, project_of, pairwise=True)
    assert weights[1] > weights[0] > -1.0
    assert [scorer(weights, names, project_of)(a)[0] for a in asked] == ["a", "b", "c"]


def test_every_lever_runs_over_the_fixture_through_the_real_search_path() -> None:
    devset = load(FIXTURE)
    asked = gather(devset, cache=None)
    assert [a.question for a in asked] == devset.questions
    for a in asked:
        assert a.session_doc and set(a.features) == set(a.session_doc)
        assert set(a.local) <= set(a.session_doc) and set(a.documents) <= set(a.session_doc)
    table, fitted = lever_table(devset, asked)
    rows = table["dev"]["rankers"]
    assert rows["`session-doc` (shipped)"]["recall@1"] == 1.0  # the fixture's questions are easy
    assert len(rows) > 40 and all(0.0 <= r["mrr"] <= 1.0 for r in rows.values())
    assert all(len(f["weights"]) >= 2 for f in fitted.values())
