"""From matching messages to one ranked hit per conversation. Shared by every engine, so two engines
that score messages alike order conversations alike.

1. Candidates arrive in the engine's relevance order (ties: insertion order).
2. A stable re-sort by coverage: the number of distinct query terms a message matches (stems count,
   because the engine's own term match decides). bm25 over OR-ed terms can prefer one rare word
   repeated over every word once; coverage puts the message that answers the whole question first.
3. One hit per conversation, ordered by the ranker:
   - `message` (the reference): a conversation ranks by its best single message;
   - `top2`: also counts the conversation's second-best message (score s1 + s2/2), so a
     conversation that keeps talking about the subject beats a passing mention;
   - `session` (the default): the conversation as one document: the terms matched by any of its messages, then
     the summed scores of its three best messages.
   These key first on the coverage of the conversation's best message, so an exact phrase in one
   conversation still outranks the same terms scattered over another.
   - `fused`: the message hits fused with a session-level score, FUSION_WEIGHT × top2 +
     (1 − FUSION_WEIGHT) × the summed scores of every matching message of the conversation (a
     session document's bm25, approximately), with no coverage key: a conversation that keeps
     talking about the question's words beats one message that names them all in passing. Tuned
     on bench/recall.py's labelled set (seed 11), checked on an unseen one (seed 29).
   - `passage`: the conversation's best stretch, term proximity at the message level:
     for each matching message, the summed scores of the k matching messages from its position to
     PASSAGE_SPAN positions after it, times 1 + PASSAGE_TURN_BONUS × (k − 1) (each further turn of
     the stretch that matches adds a tenth); the conversation ranks by its best stretch, with no
     coverage key. An exchange that states the answer over two or three turns beats one message
     that names every word in passing, and a long conversation's scattered mentions do not add up
     (as `fused`'s session sum lets them). Won bench/recall.py's synthetic set, lost on real
     conversations (issue 34), so it is no longer the default.
   - `session-doc`: `session`'s order fused with the session documents' (one document per
     conversation, its own bm25 statistics: `session_document`) by reciprocal rank, k = DOC_RRF_K,
     each list read DOC_DEPTH deep (`fuse_documents`). The document list is the engine's best
     DOC_DEPTH documents for the query's terms (OR-ed) among the sessions passing the session-level
     filters, of which those among the candidates keep their order. A conversation only the
     documents find is not added: the message candidates decide what matches (every per-message
     filter holds), the documents only reorder them.
   The hit's ref always points at the conversation's best message.
4. `sort=newest` instead picks each conversation's newest matching message and orders by its time,
   newest first (unknown times last); `sort=oldest` its oldest, oldest first (unknown times first,
   as the reference orders an empty time). Equal times keep the relevance order.

`fuse` is the reference's reciprocal-rank fusion (k = 60) for a second retrieval tier (vectors); no such
tier is wired yet, the function states the rule for whoever adds one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from dovecote.recall.model import FUSION_WEIGHT, PASSAGE_SPAN, PASSAGE_TURN_BONUS, RANKERS


@dataclass(frozen=True, slots=True)
class Candidate:
    rowid: int  # insertion order
    session_id: str
    pos: int
    timestamp: str
    score: float  # engine relevance, higher is better
    terms: frozenset[int]  # indexes into Query.terms
    # The terms matched anywhere in the candidate's session, when the engine passed only a session's
    # best rows (None: the union over the rows given).
    session_terms: frozenset[int] | None = None
    # The summed scores of every matching row of the session, likewise (None: the rows given).
    session_score: float | None = None


@dataclass(frozen=True, slots=True)
class Ranked:
    best: Candidate
    coverage: int
    score: float


def rank_sessions(candidates: list[Candidate], *, ranker: str = "message", sort: str = "") -> list[Ranked]:
    """Every conversation among the candidates, best first. The caller slices the limit; the length
    is the distinct-session total. `session-doc` ranks as `session` here; the engine then fuses the
    documents in (`fuse_documents`)."""
    if ranker not in RANKERS:
        raise ValueError(f"unknown ranker {ranker!r}")
    if ranker == DOCUMENT_RANKER:
        ranker = "session"
    # Python's sort is stable: coverage desc keeps the engine's order (and insertion order) inside.
    ordered = sorted(candidates, key=lambda c: -len(c.terms))
    per_session: dict[str, list[Candidate]] = {}
    for candidate in ordered:
        per_session.setdefault(candidate.session_id, []).append(candidate)
    if sort == "newest":
        picked = []
        for rows in per_session.values():
            newest = max(rows, key=lambda c: (c.timestamp, -c.rowid))
            picked.append(Ranked(newest, len(newest.terms), newest.score))
        # newest first (unknown times last); equal times keep the relevance order
        rank = {r.best.session_id: i for i, r in enumerate(_by_relevance(per_session, ranker))}
        return sorted(
            picked, key=lambda r: (not r.best.timestamp, _neg_time(r.best.timestamp), rank[r.best.session_id])
        )
    if sort == "oldest":
        picked = []
        for rows in per_session.values():
            oldest = min(rows, key=lambda c: (bool(c.timestamp), c.timestamp, c.rowid))
            picked.append(Ranked(oldest, len(oldest.terms), oldest.score))
        rank = {r.best.session_id: i for i, r in enumerate(_by_relevance(per_session, ranker))}
        return sorted(picked, key=lambda r: (bool(r.best.timestamp), r.best.timestamp, rank[r.best.session_id]))
    return _by_relevance(per_session, ranker)


def _by_relevance(per_session: dict[str, list[Candidate]], ranker: str) -> list[Ranked]:
    """Every ranker orders first by the coverage of the conversation's best message (the reference's
    re-sort: a message holding every term beats terms scattered over several), then by its own
    aggregate, then by the stream order (engine relevance, then insertion order)."""
    ranked: list[tuple[tuple[float, ...], Ranked]] = []
    for order, rows in enumerate(per_session.values()):
        best = rows[0]
        if ranker == "message":
            key: tuple[float, ...] = (-len(best.terms), order)
            entry = Ranked(best, len(best.terms), best.score)
        elif ranker == "top2":
            score = best.score + (rows[1].score / 2 if len(rows) > 1 else 0.0)
            key = (-len(best.terms), -score, order)
            entry = Ranked(best, len(best.terms), score)
        elif ranker == "passage":
            score = _best_passage(rows)
            key = (-score, order)
            entry = Ranked(best, len(best.terms), score)
        elif ranker == "fused":
            top2 = best.score + (rows[1].score / 2 if len(rows) > 1 else 0.0)
            total = best.session_score if best.session_score is not None else math.fsum(c.score for c in rows)
            # Rounded so that an engine summing in another order ranks alike.
            score = round(FUSION_WEIGHT * top2 + (1 - FUSION_WEIGHT) * total, 6)
            key = (-score, order)
            entry = Ranked(best, len(best.terms), score)
        else:
            union = len(
                best.session_terms if best.session_terms is not None else frozenset().union(*(c.terms for c in rows))
            )
            score = sum(c.score for c in rows[:3])
            key = (-len(best.terms), -union, -score, order)
            entry = Ranked(best, len(best.terms), score)
        ranked.append((key, entry))
    ranked.sort(key=lambda item: item[0])
    return [entry for _, entry in ranked]


def _best_passage(rows: list[Candidate]) -> float:
    """The best stretch: over the k matching messages at positions p … p + PASSAGE_SPAN (p a matching
    message's), their summed scores × (1 + PASSAGE_TURN_BONUS × (k − 1)); rounded, so that an engine
    summing in another order ranks alike."""
    by_pos = sorted(rows, key=lambda c: c.pos)
    best, end = 0.0, 0
    for start, first in enumerate(by_pos):
        while end < len(by_pos) and by_pos[end].pos <= first.pos + PASSAGE_SPAN:
            end += 1
        stretch = by_pos[start:end]
        best = max(best, math.fsum(c.score for c in stretch) * (1 + PASSAGE_TURN_BONUS * (len(stretch) - 1)))
    return round(best, 6)


def _neg_time(stamp: str) -> tuple[int, ...]:
    # Timestamps are UTC `Z` strings of one shape, so ordering the code points orders the instants.
    return tuple(-ord(ch) for ch in stamp)


# `session-doc` (issue 34): k and the depth both lists are read to. k = 10 was chosen on the
# development set's dev slice (k = 60 within 0.001 there); docs/benchmarks/recall-dev.md.
DOCUMENT_RANKER = "session-doc"
DOC_RRF_K = 10
DOC_DEPTH = 30


def uses_documents(ranker: str, sort: str) -> bool:
    """Whether a search reads the session documents: `session-doc` by relevance (a sort by time
    orders by time alone)."""
    return ranker == DOCUMENT_RANKER and sort not in ("newest", "oldest")


def session_document(rows: Iterable[tuple[str, bool, str]]) -> str:
    """A conversation's session document: the text of its conversation rows (kind, envelope, text:
    text and thinking, not tool rows, not injected envelopes), in file order, one row a line. What
    a default search shows is what the document holds, so a session's document never matches on
    text a search without include_tools would hide."""
    return "\n".join(text for kind, envelope, text in rows if kind in ("text", "thinking") and not envelope and text)


def fuse_documents(order: list[Ranked], documents: list[str]) -> list[Ranked]:
    """`session-doc`: reciprocal-rank fusion of the session ranker's order with the documents' (session
    ids, best first, as the engine found them); the sessions of `documents` outside `order` are
    dropped before ranks are counted. Score Σ 1/(DOC_RRF_K + rank + 1) over the first DOC_DEPTH of
    each list; ties, and every session neither list scores, keep `order`."""
    where = {r.best.session_id: i for i, r in enumerate(order)}
    score = dict.fromkeys(where, 0.0)
    for rank, entry in enumerate(order[:DOC_DEPTH]):
        score[entry.best.session_id] += 1.0 / (DOC_RRF_K + rank + 1)
    kept = [sid for sid in dict.fromkeys(documents) if sid in where]
    for rank, sid in enumerate(kept[:DOC_DEPTH]):
        score[sid] += 1.0 / (DOC_RRF_K + rank + 1)
    # Rounded, so that the sum's order of additions never decides a tie.
    return sorted(order, key=lambda r: (-round(score[r.best.session_id], 12), where[r.best.session_id]))


RRF_K = 60


@dataclass(frozen=True, slots=True)
class Fused:
    key: str
    score: float
    coverage: int
    rank: int  # best rank over the fused lists


def fuse(rankings: list[list[str]], coverage: dict[str, int] | None = None, k: int = RRF_K) -> list[Fused]:
    """Reciprocal-rank fusion: score = Σ 1/(k + rank + 1) over the lists a key appears in (rank from
    0). Final order: fused score desc, coverage desc, rank asc."""
    scores: dict[str, float] = {}
    best: dict[str, int] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank + 1)
            best[key] = min(best.get(key, rank), rank)
    cover = coverage or {}
    fused = [Fused(key, scores[key], cover.get(key, 0), best[key]) for key in scores]
    return sorted(fused, key=lambda f: (-f.score, -f.coverage, f.rank))
