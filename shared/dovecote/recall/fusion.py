"""Fusing the lexical ranking of sessions with the semantic one (the vector tier): engine-agnostic.

Two methods, chosen by measurement (bench/recall.py; docs/benchmarks/notes.md#recall):
- `rrf`, the reference's reciprocal-rank fusion: score = Σ 1/(RRF_K + rank + 1) over the lists a
  session is in (rank from 0), k = 60;
- `weighted`: each list's scores min-max normalised to [0, 1] over the list (a session absent from
  a list scores 0 there), then LEXICAL_SHARE × lexical + (1 − LEXICAL_SHARE) × semantic.

Final order, as the reference: fused score desc, coverage desc, then the better of the session's ranks.
A session both lists hold is shown by its lexical row (it matched the question's words, and the
snippet shows them); a session only the vectors found, by its closest message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FUSIONS = ("rrf", "weighted")
RRF_K = 60
# The lexical share of a weighted fusion: 0.9, the best of 0.5-0.9 on the bench's seen sets (seed 11,
# with rivals: MRR 0.708; without: 0.988, tied with 0.8). bench/semantic.py, docs/benchmarks/notes.md.
LEXICAL_SHARE = 0.9
# The defaults the figures decided. Fusion: weighted, because RRF lost to the words alone on every set
# (unseen with rivals: MRR 0.654 against 0.688), as the held-out set found. The tier stays off
# unless asked for: on the unseen slice the weighted fusion gains MRR 0.016 (0.704 against 0.688, the
# same recall@1; one question in 40) and loses 0.012 on the set without rivals, while embedding each
# question with the local model costs hundreds of milliseconds here.
DEFAULT_FUSION = "weighted"
SEMANTIC_DEFAULT = False


def model_key(model_id: str, dimension: int) -> str:
    """What a stored vector is tagged with: another model, or the same model at another dimension
    (Titan V2 at 256/512/1024), is another key, and its vectors are stale."""
    return f"{model_id}#{dimension}"


@dataclass(frozen=True, slots=True)
class Ranked:
    """One session in one ranked list: the row that list would show, its score (higher is better)
    and, for the lexical list, the coverage of that row."""

    session: str
    row: Any
    score: float
    coverage: int = 0


@dataclass(frozen=True, slots=True)
class Fused:
    session: str
    row: Any
    score: float
    coverage: int


def _normalised(items: list[Ranked]) -> dict[str, float]:
    if not items:
        return {}
    low, high = min(r.score for r in items), max(r.score for r in items)
    if high <= low:
        return {r.session: 1.0 for r in items}
    return {r.session: (r.score - low) / (high - low) for r in items}


def fuse(lexical: list[Ranked], semantic: list[Ranked], *, method: str, lexical_share: float) -> list[Fused]:
    """The union of both lists (each best first), fused and ordered (see the module docstring)."""
    if method not in FUSIONS:
        raise ValueError(f"unknown fusion {method!r}")
    first: dict[str, Ranked] = {}
    for r in [*lexical, *semantic]:
        first.setdefault(r.session, r)  # lexical first: its row is the one shown
    rank: dict[str, int] = {}
    scores: dict[str, float] = dict.fromkeys(first, 0.0)
    if method == "rrf":
        for items in (lexical, semantic):
            for position, r in enumerate(items):
                scores[r.session] += 1.0 / (RRF_K + position + 1)
                rank[r.session] = min(rank.get(r.session, position), position)
    else:
        for items, share in ((lexical, lexical_share), (semantic, 1.0 - lexical_share)):
            for session, value in _normalised(items).items():
                scores[session] += share * value
            for position, r in enumerate(items):
                rank[r.session] = min(rank.get(r.session, position), position)
    ordered = sorted(first, key=lambda s: (-round(scores[s], 12), -first[s].coverage, rank[s]))
    return [Fused(s, first[s].row, scores[s], first[s].coverage) for s in ordered]


__all__ = [
    "DEFAULT_FUSION",
    "FUSIONS",
    "LEXICAL_SHARE",
    "RRF_K",
    "SEMANTIC_DEFAULT",
    "Fused",
    "Ranked",
    "fuse",
    "model_key",
]
