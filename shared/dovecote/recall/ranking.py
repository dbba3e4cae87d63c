"""From matching messages to one ranked hit per conversation. Shared by every engine, so two engines
that score messages alike order conversations alike.

1. Candidates arrive in the engine's relevance order (ties: insertion order).
2. A stable re-sort by coverage: the number of distinct query terms a message matches (stems count,
   because the engine's own term match decides). bm25 over OR-ed terms can prefer one rare word
   repeated over every word once; coverage puts the message that answers the whole question first.
3. One hit per conversation, ordered by the ranker:
   - `message` (the seed): a conversation ranks by its best single message;
   - `top2`: also counts the conversation's second-best message (coverage over both, score
     s1 + s2/2), so a conversation that keeps talking about the subject beats a passing mention;
   - `session`: the conversation as one document: coverage over every matching message, score the
     sum of its three best.
   The hit's ref always points at the conversation's best message.
4. `sort=newest` instead picks each conversation's newest matching message and orders by its time.
"""

from __future__ import annotations

from dataclasses import dataclass

from dovecote.recall.model import RANKERS


@dataclass(frozen=True, slots=True)
class Candidate:
    rowid: int  # insertion order
    session_id: str
    pos: int
    timestamp: str
    score: float  # engine relevance, higher is better
    terms: frozenset[int]  # indexes into Query.terms


@dataclass(frozen=True, slots=True)
class Ranked:
    best: Candidate
    coverage: int
    score: float


def rank_sessions(candidates: list[Candidate], *, ranker: str = "message", sort: str = "") -> list[Ranked]:
    """Every conversation among the candidates, best first. The caller slices the limit; the length
    is the distinct-session total."""
    if ranker not in RANKERS:
        raise ValueError(f"unknown ranker {ranker!r}")
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
    return _by_relevance(per_session, ranker)


def _by_relevance(per_session: dict[str, list[Candidate]], ranker: str) -> list[Ranked]:
    ranked: list[tuple[tuple[float, ...], int, Ranked]] = []
    for order, rows in enumerate(per_session.values()):
        best = rows[0]
        if ranker == "message":
            entry = Ranked(best, len(best.terms), best.score)
        elif ranker == "top2":
            top = rows[:2]
            terms = frozenset().union(*(c.terms for c in top))
            score = top[0].score + (top[1].score / 2 if len(top) > 1 else 0.0)
            entry = Ranked(best, len(terms), score)
        else:
            terms = frozenset().union(*(c.terms for c in rows))
            entry = Ranked(best, len(terms), sum(c.score for c in sorted(rows, key=lambda c: -c.score)[:3]))
        # `order` is the position of the session's best row in the coverage-sorted stream
        key: tuple[float, ...] = (-entry.coverage, order) if ranker == "message" else (-entry.coverage, -entry.score)
        ranked.append((key, order, entry))
    ranked.sort(key=lambda item: (item[0], item[1]))
    return [entry for _, _, entry in ranked]


def _neg_time(stamp: str) -> tuple[int, ...]:
    # Timestamps are UTC `Z` strings of one shape, so ordering the code points orders the instants.
    return tuple(-ord(ch) for ch in stamp)
