"""What the recall verbs answer (the reference's JSON shapes; functions/recall_api/models.py mirrors
them for HTTP), and the read budget's rule: the anchor first, neighbours outward, never silent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dovecote.recall.model import TRUNCATION_MARKER

# ---- results ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Warning:
    code: str
    message: str
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SearchRef:
    project: str
    session_id: str
    iso: str
    snippet: str
    read_ref: str
    topic: str = ""


@dataclass(frozen=True, slots=True)
class ScopeReport:
    project: str
    status: str
    sessions: int
    pending: int = 0
    detail: str = ""


@dataclass(frozen=True, slots=True)
class VectorCoverage:
    """The semantic tier's coverage of the searched corpus (the reference's shape): the conversation
    messages the search's filters select (`candidate_msgs`), how many of them have a vector of the
    configured model, and whether the tier ran. When it did not run, nothing was measured: all zero."""

    ran: bool = False
    candidate_msgs: int = 0
    vectored_msgs: int = 0
    missing_msgs: int = 0


@dataclass(frozen=True, slots=True)
class SearchEnvelope:
    query: str
    results: list[SearchRef]
    scopes_report: list[ScopeReport]
    complete: bool
    count: int
    total_matches: int
    total_is_lower_bound: bool
    has_more: bool
    next_command: str
    warnings: list[Warning]
    excluded_current_turn: int
    store: str
    store_note: str = ""
    vector_coverage: VectorCoverage = field(default_factory=VectorCoverage)

    @staticmethod
    def empty(query: str, store: str) -> SearchEnvelope:
        """No results, and nothing missing: complete."""
        return SearchEnvelope(query, [], [], True, 0, 0, False, False, "", [], 0, store)


@dataclass(frozen=True, slots=True)
class MessageView:
    uuid: str
    role: str
    kind: str
    timestamp: str
    text: str


@dataclass(frozen=True, slots=True)
class SubagentInfo:
    session_id: str
    message_count: int
    title: str = ""


@dataclass(frozen=True, slots=True)
class ReadResult:
    project: str
    session_id: str
    read_ref: str  # the ref as asked (the reference echoes it)
    canonical_ref: str  # the shortest unique printed form, which reads back
    anchor_uuid: str
    messages: list[MessageView]
    char_budget: int | None
    window: int
    before: int  # displayable messages before the first shown
    after: int  # displayable messages after the last shown
    truncated: bool
    trimmed_chars: int = 0
    trimmed_msgs: int = 0
    next_command: str = ""


@dataclass(frozen=True, slots=True)
class OutlineResult:
    project: str
    session_id: str
    iso: str  # last activity, UTC `Z`
    started_at: str
    message_count: int
    start: list[MessageView]
    end: list[MessageView]
    mid_count: int
    topics: list[str]
    subagents: list[SubagentInfo]
    summary: str = ""
    parent_session: str | None = None


@dataclass(frozen=True, slots=True)
class TopicHit:
    topic: str
    project: str
    read_ref: str
    session_id: str


@dataclass(frozen=True, slots=True)
class TopicsResult:
    query: str
    hits: list[TopicHit]
    note: str = ""


@dataclass(frozen=True, slots=True)
class IngestedSession:
    session_id: str
    messages: int
    unchanged: bool
    parent_session: str | None = None


@dataclass(frozen=True, slots=True)
class IngestResult:
    session_id: str
    messages_indexed: int
    sessions: list[IngestedSession]
    unchanged: bool
    sha256: str
    lines: int = 0
    malformed: int = 0
    skipped: int = 0
    warnings: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Upload:
    upload_id: str
    upload_url: str
    expires_at: str


# ---- the budget --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fitted:
    texts: dict[int, str]  # index in the window → the text shown (absent: dropped)
    trimmed_chars: int
    trimmed_msgs: int


def outward(count: int, centre: int) -> list[int]:
    """The centre, then its neighbours by distance, the later one first at equal distance."""
    order = [centre]
    for distance in range(1, count):
        for index in (centre + distance, centre - distance):
            if 0 <= index < count:
                order.append(index)
    return order


def fit_budget(texts: list[str], centre: int, budget: int | None) -> Fitted:
    """Keep the centre first and add neighbours outward while they fit. The message that crosses the
    budget is cut and ends with the marker, which counts inside the budget; everything farther is
    dropped. Every message cut or dropped is counted (the reference started from the oldest message,
    could cut the anchor away, let the marker overshoot, and left the cut message out of the count)."""
    if budget is None:
        return Fitted(dict(enumerate(texts)), 0, 0)
    if budget < 0:  # the gate refuses these
        raise ValueError(f"budget {budget} is negative")
    remaining = budget
    shown: dict[int, str] = {}
    trimmed_chars = trimmed_msgs = 0
    crossed = False
    for index in outward(len(texts), centre):
        text = texts[index]
        if not crossed and len(text) <= remaining:
            shown[index] = text
            remaining -= len(text)
            continue
        trimmed_msgs += 1
        if crossed:
            trimmed_chars += len(text)
            continue
        crossed = True
        room = remaining - len(TRUNCATION_MARKER)
        if index == centre and room <= 0:
            # The anchor is never dropped: a budget too small for the marker cuts the anchor to the
            # budget and the marker overshoots it (the one case where it may); budget 0 shows no
            # text of it, as the reference's 0 shows none.
            room = budget
        if room > 0 or index == centre:
            shown[index] = text[:room] + TRUNCATION_MARKER
            trimmed_chars += len(text) - room
        else:
            trimmed_chars += len(text)
    return Fitted(shown, trimmed_chars, trimmed_msgs)
