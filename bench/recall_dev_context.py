"""More levers for issue 34, on the development set of bench/recall_dev.py (LoCoMo, the same dev and
held-out slices): what the shipped `session-doc` order misses, tried as re-rankings of its 30
sessions (the candidates decide what matches, as with the session documents; a lever only reorders).

1. A project-level prior (hierarchical retrieval): one document per project (every conversation
   row of its sessions, its own bm25 statistics), so the sessions of the project that matches the
   question best are lifted: fused with `session-doc` by reciprocal rank, or by how many of the
   top N sessions share a session's project.
2. Proximity inside a session: the query's terms within a window of consecutive messages, and the
   query's bigrams (two adjacent words of the question, stop words breaking adjacency) found
   adjacent in a message, or written as one word ("road trip" / "roadtrip").
3. A small learned fusion: a logistic regression over a few rank features, fit on the dev slice's
   candidates only, scored on both.

Every feature reads FTS5 with the index's tokenizer (`porter unicode61`): positions come from an
fts5vocab `instance` table, so a stem here is the engine's stem. The two service orders per question
(`session`, `session-doc`, limit 30) are the only searches through the real path; they are cached in
.build/recall-dev/context-cache.json (derived from the data, git-ignored) so a rerun reuses them.

`python -m bench.recall_dev_context [--fresh]`: every lever's figures on both slices.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import write_results
from bench.recall_dev import CUTOFFS, SEARCH_LIMIT, DevSet, Question, dev_set_path, load, ranks_of, rrf, slices

CACHE = dev_set_path().parent / "context-cache.json"
_GAP = "qqgapqq"  # stands for a stop word in a question, so adjacency never spans one
_RAW_WORD = re.compile(r"\w+", re.UNICODE)


class Corpus:
    """In-memory FTS5 over the set: each message's stemmed tokens in order, the session documents
    and the project documents (each with its own bm25 statistics)."""

    def __init__(self, bodies: Sequence[dict[str, Any]]) -> None:
        db = sqlite3.connect(":memory:")
        self._db = db
        tok = "tokenize='porter unicode61'"
        db.execute(f"CREATE VIRTUAL TABLE msgs USING fts5(text, {tok})")
        db.execute(f"CREATE VIRTUAL TABLE sdocs USING fts5(text, {tok})")
        db.execute(f"CREATE VIRTUAL TABLE pdocs USING fts5(text, {tok})")
        db.execute(f"CREATE VIRTUAL TABLE scratch USING fts5(text, {tok})")
        db.execute("CREATE VIRTUAL TABLE msgs_i USING fts5vocab(msgs, instance)")
        db.execute("CREATE VIRTUAL TABLE scratch_i USING fts5vocab(scratch, instance)")
        self.sessions: list[str] = []
        self.project_of: dict[str, str] = {}
        self.projects: list[str] = []
        owner: list[tuple[str, int]] = []  # message rowid - 1 -> (session, position)
        texts: dict[str, list[str]] = {}
        for body in bodies:
            sid, project = body["session_id"], body["project"]
            self.sessions.append(sid)
            self.project_of[sid] = project
            if project not in texts:
                self.projects.append(project)
                texts[project] = []
            lines = [m["text"] for m in body["messages"]]
            for i, line in enumerate(lines):
                db.execute("INSERT INTO msgs(text) VALUES (?)", (line,))
                owner.append((sid, i))
            db.execute("INSERT INTO sdocs(text) VALUES (?)", ("\n".join(lines),))
            texts[project].extend(lines)
        for project in self.projects:
            db.execute("INSERT INTO pdocs(text) VALUES (?)", ("\n".join(texts[project]),))
        # Each project's session documents with the project's own statistics (a term every session of
        # the project says is worth little among them): one FTS5 table per project.
        self.local_ids: dict[str, list[str]] = {}
        for n, project in enumerate(self.projects):
            db.execute(f"CREATE VIRTUAL TABLE local{n} USING fts5(text, {tok})")
            self.local_ids[project] = []
        for body in bodies:
            n = self.projects.index(body["project"])
            self.local_ids[body["project"]].append(body["session_id"])
            db.execute(f"INSERT INTO local{n}(text) VALUES (?)", ("\n".join(m["text"] for m in body["messages"]),))  # noqa: S608
        # session -> its messages' stemmed tokens, in order
        self.messages: dict[str, list[list[str]]] = {sid: [] for sid in self.sessions}
        for sid, _ in owner:
            self.messages[sid].append([])
        for term, doc in db.execute("SELECT term, doc FROM msgs_i ORDER BY doc, offset"):
            sid, pos = owner[doc - 1]
            self.messages[sid][pos].append(term)

    def stems(self, text: str) -> list[str | None]:
        """The question's tokens as the index stems them, in order; None where a stop word was."""
        from dovecote.recall.query import STOP_WORDS

        words = [_GAP if w.lower() in STOP_WORDS or w.lower() == "s" else w for w in _RAW_WORD.findall(text)]
        self._db.execute("INSERT INTO scratch(rowid, text) VALUES (1, ?)", (" ".join(words),))
        rows = self._db.execute("SELECT term FROM scratch_i ORDER BY offset").fetchall()
        self._db.execute("DELETE FROM scratch")
        return [None if term == _GAP else term for (term,) in rows]

    def _ranked(self, table: str, text: str, ids: Sequence[str], limit: int) -> list[str]:
        from dovecote.recall.query import parse_query, to_fts5

        query = parse_query(text)
        expression = to_fts5(query.root) if query else None
        if not expression:
            return []
        rows = self._db.execute(
            f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY bm25({table}) LIMIT ?",  # noqa: S608
            (expression, limit),
        ).fetchall()
        return [ids[rowid - 1] for (rowid,) in rows]

    def local_documents(self, text: str) -> dict[str, float]:
        """Every session's bm25 within its own project's documents (lower is better), matching ones only."""
        from dovecote.recall.query import parse_query, to_fts5

        query = parse_query(text)
        expression = to_fts5(query.root) if query else None
        out: dict[str, float] = {}
        if not expression:
            return out
        for n, project in enumerate(self.projects):
            for rowid, score in self._db.execute(
                f"SELECT rowid, bm25(local{n}) FROM local{n} WHERE local{n} MATCH ?",  # noqa: S608
                (expression,),
            ):
                out[self.local_ids[project][rowid - 1]] = score
        return out

    def session_documents(self, text: str) -> list[str]:
        return self._ranked("sdocs", text, self.sessions, SEARCH_LIMIT)

    def document_scores(self, text: str) -> dict[str, float]:
        """Every matching session document's bm25 (FTS5's sign: lower is better)."""
        from dovecote.recall.query import parse_query, to_fts5

        query = parse_query(text)
        expression = to_fts5(query.root) if query else None
        if not expression:
            return {}
        rows = self._db.execute("SELECT rowid, bm25(sdocs) FROM sdocs WHERE sdocs MATCH ?", (expression,))
        return {self.sessions[rowid - 1]: score for rowid, score in rows}

    def project_documents(self, text: str) -> list[str]:
        return self._ranked("pdocs", text, self.projects, len(self.projects))


@dataclass(slots=True)
class Asked:
    """One question's candidates (the `session-doc` top 30) and the evidence about each."""

    question: Question
    session_doc: list[str]
    session: list[str]
    documents: list[str]  # the session documents' order, reduced to the candidates
    projects: list[str]  # the project documents' order
    local: list[str] = field(default_factory=list)  # the candidates by their bm25 within their project
    features: dict[str, dict[str, float]] = field(default_factory=dict)


def _bigrams(stems: list[str | None]) -> set[tuple[str, str]]:
    return {(a, b) for a, b in zip(stems, stems[1:], strict=False) if a and b}


def proximity(corpus: Corpus, sid: str, stems: list[str | None]) -> dict[str, float]:
    """The question's terms within one message, within windows of 2 and 3 consecutive messages, the
    bigrams found adjacent in one message, and the compounds ("road trip" asked, "roadtrip"
    written, or the reverse)."""
    terms = {s for s in stems if s}
    pairs = _bigrams(stems)
    joined = {a + b: (a, b) for a, b in pairs}
    rows = corpus.messages[sid]
    present = [terms.intersection(row) for row in rows]
    out = {"cover1": max((len(p) for p in present), default=0) / max(1, len(terms))}
    for width in (2, 3):
        best = 0
        for i in range(len(rows)):
            best = max(best, len(set().union(*present[i : i + width])))
        out[f"cover{width}"] = best / max(1, len(terms))
    found: set[tuple[str, str]] = set()
    compounds = 0
    for row in rows:
        adjacent = set(zip(row, row[1:], strict=False))
        found |= pairs & adjacent
        asked_as_one = sum(1 for a, b in adjacent if (a, b) not in pairs and (a + b) in terms)
        compounds += sum(1 for t in row if t in joined) + asked_as_one
    out["coverall"] = len(set().union(*present)) / max(1, len(terms)) if present else 0.0
    out["length"] = math.log(1 + len(rows))
    out["bigrams"] = float(len(found))
    out["compounds"] = float(min(compounds, 3))
    return out


def gather(devset: DevSet, cache: Path | None = CACHE, fresh: bool = False) -> list[Asked]:
    """Every question's candidates through the real search path (kept in `cache` when given), and
    their features."""
    corpus = Corpus(devset.bodies)
    orders = _service_orders(devset, cache, fresh)
    asked = []
    for q in devset.questions:
        session_doc, session = orders[q.text]
        where = set(session_doc)
        documents = [s for s in corpus.session_documents(q.text) if s in where]
        a = Asked(q, session_doc, session, documents, corpus.project_documents(q.text))
        local = corpus.local_documents(q.text)
        a.local = sorted((s for s in session_doc if s in local), key=lambda s: local[s])
        stems = corpus.stems(q.text)
        scores = corpus.document_scores(q.text)
        best = min((scores.get(s, 0.0) for s in session_doc), default=0.0) or -1.0
        for sid in session_doc:
            a.features[sid] = proximity(corpus, sid, stems)
            a.features[sid]["docscore"] = scores.get(sid, 0.0) / best
        asked.append(a)
    return asked


def _service_orders(devset: DevSet, cache: Path | None, fresh: bool) -> dict[str, tuple[list[str], list[str]]]:
    if cache is not None and cache.exists() and not fresh:
        cached = json.loads(cache.read_text())
        if all(q.text in cached for q in devset.questions):
            return {k: (v[0], v[1]) for k, v in cached.items()}
    from bench.recall import _ingest_all, _service, search_index
    from bench.recall_dev import service_searcher
    from dovecote.platform.principal import Principal

    who = Principal("bench", "caller")
    with search_index("sqlite", refresh="true") as (index, _):
        service = _service(index)
        _ingest_all(service, who, devset.bodies, 1)
        by_doc = service_searcher(service, who, "session-doc")
        by_session = service_searcher(service, who, "session")
        orders = {q.text: (by_doc(q.text), by_session(q.text)) for q in devset.questions}
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(orders))
    return orders


# ---- the levers: each a re-ranking of an Asked's candidates -----------------------------------------

Reranker = Callable[[Asked], list[str]]


def _rank_of(order: Sequence[str]) -> dict[str, int]:
    return {sid: i for i, sid in enumerate(order)}


def project_prior(k: int, weight: float, corpus_of: Callable[[str], str]) -> Reranker:
    """`session-doc`'s own RRF order plus `weight` / (k + the project's rank + 1): every session of
    the best-matching project gets the same lift."""

    def rerank(a: Asked) -> list[str]:
        base, proj = _rank_of(a.session_doc), _rank_of(a.projects)
        score = {s: 1 / (k + base[s] + 1) + weight / (k + proj.get(corpus_of(s), len(proj)) + 1) for s in a.session_doc}
        return sorted(a.session_doc, key=lambda s: (-score[s], base[s]))

    return rerank


def project_list(k: int, weights: tuple[float, float], corpus_of: Callable[[str], str]) -> Reranker:
    """RRF of `session-doc` with the candidates ordered by their project's rank (then `session-doc`)."""

    def rerank(a: Asked) -> list[str]:
        proj, base = _rank_of(a.projects), _rank_of(a.session_doc)
        lifted = sorted(a.session_doc, key=lambda s: (proj.get(corpus_of(s), len(proj)), base[s]))
        return rrf([a.session_doc, lifted], k=k, weights=weights)

    return rerank


def three_lists(k: int, corpus_of: Callable[[str], str]) -> Reranker:
    """One RRF over `session`, the session documents and the project-ordered list (instead of
    adding the projects to `session-doc`'s fused order)."""

    def rerank(a: Asked) -> list[str]:
        proj, base = _rank_of(a.projects), _rank_of(a.session_doc)
        lifted = sorted(a.session_doc, key=lambda s: (proj.get(corpus_of(s), len(proj)), base[s]))
        order = rrf([[s for s in a.session if s in base], a.documents, lifted], k=k)
        return order + [s for s in a.session_doc if s not in set(order)]

    return rerank


def neighbours(top: int, weight: float, k: int, corpus_of: Callable[[str], str]) -> Reranker:
    """A session's `session-doc` RRF score plus `weight` × (the share of the top `top` sessions in
    its project) / (k + 1): a project many of the best sessions belong to is lifted."""

    def rerank(a: Asked) -> list[str]:
        base = _rank_of(a.session_doc)
        counts: dict[str, int] = {}
        for s in a.session_doc[:top]:
            counts[corpus_of(s)] = counts.get(corpus_of(s), 0) + 1
        score = {s: 1 / (k + base[s] + 1) + weight * counts.get(corpus_of(s), 0) / top / (k + 1) for s in a.session_doc}
        return sorted(a.session_doc, key=lambda s: (-score[s], base[s]))

    return rerank


def top_project(weight: float, k: int, corpus_of: Callable[[str], str]) -> Reranker:
    """`session-doc`'s rank score plus `weight` for the sessions of the best-matching project."""

    def rerank(a: Asked) -> list[str]:
        base = _rank_of(a.session_doc)
        best = a.projects[0] if a.projects else None
        score = {s: 1 / (k + base[s] + 1) + (weight if corpus_of(s) == best else 0.0) for s in a.session_doc}
        return sorted(a.session_doc, key=lambda s: (-score[s], base[s]))

    return rerank


def local_documents(k: int, mode: str, corpus_of: Callable[[str], str]) -> Reranker:
    """The session documents scored within their project (its statistics): `add` fuses that order
    with `session-doc` by RRF; `replace` fuses `session` with it instead of the global documents;
    `three` fuses `session`, the global documents and it; `nested` fuses `session-doc` with the
    candidates ordered by (project rank, rank within the project)."""

    def rerank(a: Asked) -> list[str]:
        base = _rank_of(a.session_doc)
        session = [s for s in a.session if s in base]
        if mode == "add":
            order = rrf([a.session_doc, a.local], k=k)
        elif mode == "replace":
            order = rrf([session, a.local], k=k)
        elif mode == "three":
            order = rrf([session, a.documents, a.local], k=k)
        else:
            proj, local = _rank_of(a.projects), _rank_of(a.local)
            nested = sorted(a.session_doc, key=lambda s: (proj.get(corpus_of(s), 99), local.get(s, 99), base[s]))
            order = rrf([a.session_doc, nested], k=k)
        return order + [s for s in a.session_doc if s not in set(order)]

    return rerank


def by_feature(name: str, k: int, weights: tuple[float, float] = (0.5, 0.5)) -> Reranker:
    """RRF of `session-doc` with the candidates ordered by a feature (desc; ties `session-doc`)."""

    def rerank(a: Asked) -> list[str]:
        base = _rank_of(a.session_doc)
        ordered = sorted(a.session_doc, key=lambda s: (-a.features[s][name], base[s]))
        return rrf([a.session_doc, ordered], k=k, weights=weights)

    return rerank


def additive(name: str, weight: float, k: int = 10) -> Reranker:
    """`session-doc`'s rank score plus `weight` × the feature / (k + 1)."""

    def rerank(a: Asked) -> list[str]:
        base = _rank_of(a.session_doc)
        score = {s: 1 / (k + base[s] + 1) + weight * a.features[s][name] / (k + 1) for s in a.session_doc}
        return sorted(a.session_doc, key=lambda s: (-score[s], base[s]))

    return rerank


# ---- the learned fusion -------------------------------------------------------------------------------


def vector(a: Asked, sid: str, names: Sequence[str], corpus_of: Callable[[str], str]) -> list[float]:
    """A candidate's features: reciprocal ranks (k = 10) and the proximity figures."""
    rr = {
        "sd": a.session_doc,
        "s": a.session,
        "doc": a.documents,
        "proj": a.projects,
    }
    out = []
    for name in names:
        if name in rr:
            order = rr[name]
            key = corpus_of(sid) if name == "proj" else sid
            rank = order.index(key) if key in order else SEARCH_LIMIT
            out.append(10 / (10 + rank + 1))
        elif name == "share5":
            out.append(sum(1 for s in a.session_doc[:5] if corpus_of(s) == corpus_of(sid)) / 5)
        else:
            out.append(a.features[sid][name])
    return out


def fit_logistic(
    rows: list[list[float]], labels: list[int], l2: float = 1.0, steps: int = 3000, bias: bool = True
) -> list[float]:
    """Weights (bias last, when `bias`) of an L2-regularized logistic regression, by gradient
    descent (numpy; a few weights, so no library is added for it)."""
    import numpy as np

    x = np.array(rows, float)
    if bias:
        x = np.hstack([x, np.ones((len(rows), 1))])
    y = np.array(labels, float)
    w = np.zeros(x.shape[1])
    penalty = np.ones_like(w)
    if bias:
        penalty[-1] = 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(x @ w)))
        w -= 0.5 * (x.T @ (p - y) / len(y) + l2 * penalty * w / len(y))
    return [float(v) for v in w]


def fit(asked: Sequence[Asked], names: Sequence[str], corpus_of: Callable[[str], str], pairwise: bool) -> list[float]:
    """Pointwise: each candidate, positive when it is an evidence session. Pairwise (RankNet with a
    linear scorer): each (evidence, other) pair of a question's candidates, both orientations."""
    rows: list[list[float]] = []
    labels: list[int] = []
    for a in asked:
        vectors = {sid: vector(a, sid, names, corpus_of) for sid in a.session_doc}
        if not pairwise:
            for sid, v in vectors.items():
                rows.append(v)
                labels.append(int(sid in a.question.targets))
            continue
        good = [s for s in a.session_doc if s in a.question.targets]
        bad = [s for s in a.session_doc if s not in a.question.targets]
        for g in good:
            for b in bad:
                diff = [x - y for x, y in zip(vectors[g], vectors[b], strict=True)]
                rows += [diff, [-d for d in diff]]
                labels += [1, 0]
    if not rows:  # nothing to learn from (no evidence among the candidates): the features weigh nothing
        return [0.0] * len(names)
    weights = fit_logistic(rows, labels, bias=not pairwise)
    return weights if pairwise else weights[:-1]


def scorer(weights: Sequence[float], names: Sequence[str], corpus_of: Callable[[str], str]) -> Reranker:
    def rerank(a: Asked) -> list[str]:
        base = _rank_of(a.session_doc)
        score = {
            s: math.fsum(w * v for w, v in zip(weights, vector(a, s, names, corpus_of), strict=True))
            for s in a.session_doc
        }
        return sorted(a.session_doc, key=lambda s: (-score[s], base[s]))

    return rerank


def mrr(reranker: Reranker, asked: Sequence[Asked]) -> float:
    ranks = [next((i + 1 for i, s in enumerate(reranker(a)) if s in a.question.targets), None) for a in asked]
    return math.fsum(1 / r for r in ranks if r) / max(1, len(ranks))


def learned(
    asked: Sequence[Asked], names: Sequence[str], corpus_of: Callable[[str], str], pairwise: bool
) -> tuple[Reranker, list[float], float]:
    """Fit on the dev slice only; also its leave-one-conversation-out MRR on the dev slice (fit on
    four dev conversations, scored on the fifth), the figure a choice among fits may read."""
    from bench.recall_dev import HELD_OUT

    dev = [a for a in asked if a.question.conversation not in HELD_OUT]
    conversations = sorted({a.question.conversation for a in dev})
    folds = []
    for c in conversations:
        inside = [a for a in dev if a.question.conversation != c]
        outside = [a for a in dev if a.question.conversation == c]
        folds.append(mrr(scorer(fit(inside, names, corpus_of, pairwise), names, corpus_of), outside) * len(outside))
    weights = fit(dev, names, corpus_of, pairwise)
    return scorer(weights, names, corpus_of), weights, math.fsum(folds) / len(dev)


def lever_table(devset: DevSet, asked: list[Asked]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    project_of = {b["session_id"]: b["project"] for b in devset.bodies}
    of = project_of.__getitem__
    rerankers: dict[str, Reranker] = {"`session-doc` (shipped)": lambda a: a.session_doc}
    for k in (10, 60):
        for w in (0.25, 0.5, 1.0):
            rerankers[f"project prior: sd + {w:g}/(k+project rank+1), k={k}"] = project_prior(k, w, of)
    for share in (0.5, 0.75):
        rerankers[f"project list: RRF(sd, by project rank) k=10, weights {share:g}/{1 - share:g}"] = project_list(
            10, (share, 1 - share), of
        )
    rerankers["project list: RRF(session, documents, by project rank) k=10"] = three_lists(10, of)
    for w in (0.005, 0.01, 0.02, 0.05):
        rerankers[f"top project: sd + {w:g} for the best-matching project's sessions"] = top_project(w, 10, of)
    for mode in ("add", "replace", "three", "nested"):
        rerankers[f"documents within their project: {mode}, RRF k=10"] = local_documents(10, mode, of)
    for top in (5, 10):
        for w in (0.5, 1.0, 2.0):
            rerankers[f"neighbours: sd + {w:g} x share of the top {top} in its project"] = neighbours(top, w, 10, of)
    for name in ("cover2", "cover3", "bigrams", "compounds"):
        for share in (0.5, 0.75):
            rerankers[f"{name}: RRF(sd, by {name}) k=10, weights {share:g}/{1 - share:g}"] = by_feature(
                name, 10, (share, 1 - share)
            )
        for w in (0.25, 0.5, 1.0):
            rerankers[f"{name}: sd + {w:g} x {name}/(k+1)"] = additive(name, w)
    fitted: dict[str, dict[str, Any]] = {}
    proximity_names = ("cover1", "cover3", "coverall", "bigrams", "compounds")
    both, pairwise_only = (False, True), (True,)
    for names, modes in (
        (("sd", "proj"), both),
        (("sd", "s", "doc", "proj", "share5"), both),
        (("sd", *proximity_names), both),
        (("sd", "s", "doc", "proj", "share5", *proximity_names), both),
        (("sd", "s", "doc", "proj", "share5", "docscore", "length", *proximity_names), both),
        # ablations of the last: without the project features, without proximity, without both
        (("sd", "s", "doc", "docscore", "length", *proximity_names), pairwise_only),
        (("sd", "s", "doc", "proj", "share5", "docscore", "length"), pairwise_only),
        (("sd", "s", "doc", "docscore", "length"), pairwise_only),
    ):
        for pairwise in modes:
            reranker, weights, cv = learned(asked, names, of, pairwise)
            label = f"learned ({'pairwise' if pairwise else 'pointwise'}, dev fit): {'+'.join(names)}"
            rerankers[label] = reranker
            fitted[label] = {"weights": weights, "dev_leave_one_conversation_out_mrr": cv}
    by_text = {a.question.text: a for a in asked}
    ranks = {label: ranks_of(lambda t, r=r: r(by_text[t]), devset.questions) for label, r in rerankers.items()}
    return slices(devset, ranks), fitted


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.recall_dev_context")
    parser.add_argument("--fresh", action="store_true", help="search again instead of reading the cache")
    args = parser.parse_args()
    devset = load(dev_set_path())
    asked = gather(devset, fresh=args.fresh)
    table, fitted = lever_table(devset, asked)
    for label in table["dev"]["rankers"]:
        dev, held = table["dev"]["rankers"][label], table["held-out"]["rankers"][label]
        figures = f"dev {dev['mrr']:.3f} / {dev['recall@1']:.3f}  held-out {held['mrr']:.3f} / {held['recall@1']:.3f}"
        print(f"{label:78} {figures}")
    for label, fit_ in fitted.items():
        print(
            f"{label}: dev LOCO MRR {fit_['dev_leave_one_conversation_out_mrr']:.3f}, weights "
            f"{[round(w, 3) for w in fit_['weights']]}"
        )
    write_results("recall_dev_context.json", {**table, "fitted": fitted, "cutoffs": list(CUTOFFS)})


if __name__ == "__main__":
    main()
