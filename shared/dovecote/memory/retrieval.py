"""Bounded candidate retrieval over an inverted term index. Pure: the stores keep the postings,
these functions decide what goes in them and which prior memories a new one is compared with.

The index holds one posting per (authority, scope, term): the term's document frequency `df` in
the scope and the seqs of the POSTING_RECENT most recent memories that contain it. A new memory:
1. reads the postings of its INDEX_TERMS terms (at most MAX_INDEX_TERMS, plus its subject term) and
   the scope's memory count, in one consistent read;
2. picks at most TOP_K prior memories: the latest one with the same subject, then the best by the
   summed IDF of shared terms, rarest terms first, skipping terms common to most of the scope;
3. fetches those few memories and hands them to the detector.
Every step is bounded by constants, never by the scope's size: detection costs the same with a
thousand prior memories as with fifty thousand. The price: a memory that shares only terms whose
posting window has moved on (very common terms) is not found; that is the point of the window.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dovecote.memory import lexicon
from dovecote.memory.model import SUBJECT_PREFIX, subject_of

MAX_INDEX_TERMS = 48
POSTING_RECENT = 32
TOP_K = 8
# A term in more than this share of a scope's memories is common there: it neither finds
# candidates nor counts as shared evidence. Judged only once a scope has MIN_MEMORIES_FOR_COMMON.
COMMON_FRACTION = 0.5
MIN_MEMORIES_FOR_COMMON = 8


@dataclass(frozen=True, slots=True)
class Posting:
    df: int
    recent: tuple[int, ...]  # seqs, oldest first, at most POSTING_RECENT

    def with_memory(self, seq: int) -> Posting:
        return Posting(self.df + 1, (*self.recent, seq)[-POSTING_RECENT:])


EMPTY = Posting(0, ())


def subject_term(tags: Sequence[str]) -> str:
    subject = subject_of(tuple(tags))
    return SUBJECT_PREFIX + subject if subject else ""


def index_terms(content: str, tags: Sequence[str]) -> tuple[str, ...]:
    """The terms a memory is indexed (and looked up) under: its first MAX_INDEX_TERMS distinct
    informative terms, and its subject term."""
    found = lexicon.terms(content)[:MAX_INDEX_TERMS]
    subject = subject_term(tags)
    return (*found, subject) if subject else tuple(found)


def build_postings(memories: Sequence[tuple[int, str, Sequence[str]]]) -> dict[str, Posting]:
    """The postings a scope would hold after applying these (seq, content, tags), in seq order:
    the same result as applying them one by one (bulk loads and benchmarks)."""
    postings: dict[str, Posting] = {}
    for seq, content, tags in sorted(memories, key=lambda m: m[0]):
        for term in index_terms(content, tags):
            postings[term] = postings.get(term, EMPTY).with_memory(seq)
    return postings


@dataclass(frozen=True, slots=True)
class TermStats:
    """What the detector knows about the scope: its memory count and the document frequency of
    the new memory's terms (a term it has no figure for is treated as rare)."""

    memories: int
    df: Mapping[str, int]

    def weight(self, term: str) -> float:
        return math.log(1.0 + max(self.memories, 1) / max(self.df.get(term, 1), 1))

    def is_common(self, term: str) -> bool:
        if self.memories < MIN_MEMORIES_FOR_COMMON:
            return False
        return self.df.get(term, 0) > COMMON_FRACTION * self.memories


@dataclass(frozen=True, slots=True)
class Pick:
    seq: int
    terms: tuple[str, ...]  # the terms that found it, rarest first
    by_subject: bool = False


def pick(terms: Sequence[str], postings: Mapping[str, Posting], memories: int, k: int = TOP_K) -> list[Pick]:
    """The prior memories worth comparing with: the latest on the same subject, then the top `k`
    by summed term weight (rarest terms first; ties go to the newer memory)."""
    stats = TermStats(memories, {t: p.df for t, p in postings.items()})
    picks: list[Pick] = []
    subject = next((t for t in terms if t.startswith(SUBJECT_PREFIX)), "")
    subject_seq = 0
    if subject and postings.get(subject, EMPTY).recent:
        subject_seq = postings[subject].recent[-1]
        picks.append(Pick(subject_seq, (subject,), by_subject=True))
    lexical = [
        t
        for t in terms
        if not t.startswith(SUBJECT_PREFIX) and postings.get(t, EMPTY).df > 0 and not stats.is_common(t)
    ]
    lexical.sort(key=lambda t: (postings[t].df, t))
    scores: dict[int, float] = defaultdict(float)
    found_by: dict[int, list[str]] = defaultdict(list)
    for term in lexical:
        weight = stats.weight(term)
        for seq in postings[term].recent:
            scores[seq] += weight
            found_by[seq].append(term)
    ranked = sorted(scores, key=lambda s: (-scores[s], -s))
    for seq in ranked[:k]:
        if seq == subject_seq:
            picks[0] = Pick(seq, (subject, *found_by[seq]), by_subject=True)
        else:
            picks.append(Pick(seq, tuple(found_by[seq])))
    return picks
