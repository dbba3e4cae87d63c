"""Rules both SearchIndex engines apply the same way, so they live once: how many rows per session
each ranker reads, the topic a row falls in, which query leaves the substring (trigram) tier can match, the substring
tier's snippet, and how long a printed ref must be to read back uniquely."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from dovecote.recall.model import REF_PREFIX, printed_session
from dovecote.recall.ports import Resolution
from dovecote.recall.query import Term

# How many of a session's best rows each ranker reads (ranking.py); the engines keep no more.
# `passage` reads a stretch of rows: OpenSearch keeps 10 per session (exact for sessions with fewer
# candidates; SQLite ranks every candidate).
RANKER_ROWS = {"message": 1, "top2": 2, "session": 3, "fused": 2, "passage": 10, "session-doc": 3}
SNIPPET_CHARS = 240


def topic_at(starts: Iterable[tuple[int, str]], pos: int) -> str:
    """The label of the topic segment holding `pos`, from a session's (start position, label) pairs:
    the one starting last at or before it; '' when none does."""
    label, best = "", -1
    for start, name in starts:
        if best < start <= pos:
            label, best = name, start
    return label


def trigram_leaf(term: Term) -> bool:
    """A trigram index matches a term of three characters or more."""
    return len(term.text) >= 3


def substring_snippet(text: str, terms: Iterable[str], width: int = SNIPPET_CHARS) -> str:
    """A window of the text around the first term it holds (the trigram tier has no word snippet)."""
    lowered = text.lower()
    hits = [lowered.find(t.lower()) for t in terms]
    hits = [h for h in hits if h >= 0]
    if not hits:
        return text[:width] + ("…" if len(text) > width else "")
    start = max(0, min(hits) - width // 3)
    piece = text[start : start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def unique_length(value: str, neighbours: Iterable[str]) -> int:
    """The shortest prefix of `value` (at least REF_PREFIX, at most all of it) that none of its
    sort-order neighbours shares."""
    need = max((_common_prefix(value, n) + 1 for n in neighbours), default=0)
    return min(len(value), max(REF_PREFIX, need))


def nested_session_length(session_id: str, resolve: Callable[[str], Resolution]) -> int:
    """For a subagent thread (`<parent>/<agent>`): the shortest per-segment length whose printed
    prefix resolves to exactly this session."""
    longest = max(len(s) for s in session_id.split("/"))
    length = REF_PREFIX
    while length < longest:
        found = resolve(printed_session(session_id, length, "/"))
        if found.ids == [session_id] and found.total == 1:
            break
        length += 1
    return min(length, longest)
