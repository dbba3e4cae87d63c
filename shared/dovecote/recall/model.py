"""Recall: the pure rules. Messages and sessions, the constants of the protocol, the read-ref grammar,
what a caller may see (Visibility), and the one validation gate per input (ingest body, search
params, read params, outline params, topic label).

Every engine behind `ports.SearchIndex` and every handler calls these, so "what is a ref", "what a
filter selects" and "what a window shows" are each defined once.
"""

from __future__ import annotations

import re
import uuid as uuidlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from dovecote.platform.errors import InvalidArgument
from dovecote.recall.patterns import MAX_PATTERN_CHARS, PathPattern, compile_path_pattern

# ---- protocol constants (docs/design/recall.md) ------------------------------------------------------------

DEFAULT_SEARCH_LIMIT = 8
MAX_SEARCH_LIMIT = 100  # docs/design/recall.md#constants: over it is invalid_argument (the reference had no cap)
READ_WINDOW = 8  # ± displayed messages around the anchor
MAX_READ_RADIUS = 400  # a "more" ladder or window beyond this is refused, not silently clamped
OUTLINE_BOOKEND = 4  # displayable messages at each end of an outline
OUTLINE_SCAN_ROWS = 40  # bookends are looked for among the first and last 40 rows
OUTLINE_TEXT_CHARS = 300
NEIGHBOUR_CHARS = 200  # neighbours in a read are cut here; the anchor is shown whole
WIDEN_FLOOR = 20  # next_command widens the limit to max(4 × limit, 20)
BROAD_QUERY_MATCHES = 20
RECENCY_SKEW = timedelta(hours=24)
PROJECT_SPREAD_SAMPLE = 5
AMBIGUITY_CANDIDATES = 10
MIN_SESSION_PREFIX = 8  # current_session: the exact id, or a prefix at least this long
REF_PREFIX = 8  # printed refs start at <session8>:<uuid8> and lengthen until unique
TRUNCATION_MARKER = " …[truncated]"
MIN_READ_BUDGET = 0  # any budget >= 0 is a read; below the marker's length the anchor is still shown, cut
MAX_READ_BUDGET = 10_000_000
MAX_QUERY_CHARS = 1000
MAX_TOPIC_LABEL_CHARS = 200
DEFAULT_TOPICS_LIMIT = 20
MAX_TOPICS_LIMIT = 100
# Index-time caps: a transcript is indexed for recall, not mirrored; the archive keeps every byte.
TEXT_CAP = 8000
TOOL_INPUT_CAP = 500
TOOL_RESULT_CAP = 1000
# The engine ranks at most this many candidate messages per query (the best by bm25); past it the
# distinct-session total is reported as a lower bound, never as exact. bench/recall.py, SQLite at
# 100k messages, CPU ms per search (median / p95, 40 queries each, load 7.8-10 on the 2 cores),
# ceiling 2,000 -> 1,000 -> 500: 1 word 60 / 98 -> 41 / 49 -> 32 / 40; 2 words 32 / 79 -> 30 / 60 -> 22 /
# 44; 3 words 53 / 76 -> 38 / 57 -> 28 / 45 (what scales with it: reading, grouping and ranking the
# candidates; bm25 for every match does not). The labelled sets rank alike at 500 (the passage
# ranker's recall@1 on the unseen set 0.685 at 2,000, 0.690 at 500).
MAX_CANDIDATES = 500
MAX_SESSION_ID_CHARS = 200
MAX_PROJECT_CHARS = 200
MAX_SOURCE_CHARS = 64
MAX_GENERIC_MESSAGES = 50_000

ROLES = ("user", "assistant", "system")
KINDS = ("text", "tool", "thinking")
FORMATS = ("claude-code-jsonl", "codex-jsonl")
SORTS = ("", "relevance", "newest", "oldest")
RANKERS = ("message", "top2", "session", "fused", "passage", "session-doc")
FUSION_WEIGHT = 0.3  # `fused`: the weight of the message hits (top2) against the session's summed score
PASSAGE_SPAN = 3  # `passage`: a stretch is a matching message and the PASSAGE_SPAN positions after it
PASSAGE_TURN_BONUS = 0.1  # `passage`: each further matching turn of a stretch adds this share of its sum
# bench/recall.py, 200 planted facts with rivals, on the unseen set (seed 29; FUSION_WEIGHT, PASSAGE_SPAN
# and PASSAGE_TURN_BONUS were chosen on seed 11): recall@1 / MRR passage 0.685 / 0.777, fused 0.490 /
# 0.646, session 0.375 / 0.541, top2 0.375 / 0.535, message 0.250 / 0.407. Without rivals passage finds
# 0.995 first (fused 0.965, top2 1.0). That synthetic set misled: on real multi-session conversations
# (issue 34's held-out table, 1,536 questions) the order is session > top2 > message > passage > fused
# (MRR 0.781 / 0.767 / 0.757 / 0.699 / 0.531), so the default was `session`; `session-doc` (`session`
# fused with the session documents, ranking.py) beat it on the development set's dev slice (MRR 0.781
# against 0.757; held out 0.779 against 0.763), so it is the default (docs/benchmarks/recall-dev.md).
DEFAULT_RANKER = "session-doc"

Role = Literal["user", "assistant", "system"]
Kind = Literal["text", "tool", "thinking"]

# Scope statuses and warning codes: the reference's strings, which agents branch on.
SCOPE_SEARCHED = "searched"
SCOPE_STALE = "stale"  # uploads for this scope are still waiting to be indexed
WARN_RECENCY_SKEW = "recency_skew"
WARN_BROAD_QUERY = "broad_query"
WARN_CURRENT_TURN_EXCLUDED = "current_turn_excluded"
WARN_SCOPE_INCOMPLETE = "scope_incomplete"
WARN_NOT_CONSOLIDATED = "not_consolidated"  # never raised: one index per authority
WARN_STORE_FALLBACK = "store_fallback"  # never raised: no second reader exists
WARN_PROJECT_SPREAD = "project_spread"
WARN_VECTOR_GAP = "vector_gap"  # the semantic tier ran with partial vector coverage (the reference's order)
WARN_RAW_HISTORY = "raw_history"
SEMANTIC_SWITCH = ("on", "off")  # search's `semantic`; absent: the deployment's default (fusion.py)
WARNING_ORDER = (
    WARN_RECENCY_SKEW,
    WARN_BROAD_QUERY,
    WARN_CURRENT_TURN_EXCLUDED,
    WARN_SCOPE_INCOMPLETE,
    WARN_NOT_CONSOLIDATED,
    WARN_STORE_FALLBACK,
    WARN_PROJECT_SPREAD,
    WARN_VECTOR_GAP,
    WARN_RAW_HISTORY,
)

# Synthesized uuids (formats without one, or with ids that are not uuids) are uuid5 in this
# namespace, so re-parsing the same file yields the same refs.
UUID_NAMESPACE = uuidlib.UUID("5d0b6c1e-8a43-4f7e-9a51-3c0f1e2d4b7a")
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
SESSION_SEGMENT = re.compile(r"[A-Za-z0-9._-]{1,200}")
# Levels of a session (`<parent>/<agent>`) are written `/` or `~` in refs and session arguments;
# printed refs use `~`, which survives a URL path segment (`/` does not).
_SESSION_PART = re.compile(r"[A-Za-z0-9._-]+(?:[/~][A-Za-z0-9._-]+)*")
LEVEL_SEPARATOR = "~"
_REF = re.compile(r"(?:ref=)?(?P<session>[^:\s]+):(?P<uuid>[^:\s]+)")
_HEX_PREFIX = re.compile(r"[0-9a-f][0-9a-f-]{0,35}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


# ---- text hygiene ---------------------------------------------------------------------------------


def clean_text(value: str) -> str:
    """Lone surrogates (valid in JSON, not in UTF-8) become U+FFFD; NUL is dropped. Everything that
    reaches an index passes through here, so no engine ever sees a string it cannot encode."""
    if "\x00" in value:
        value = value.replace("\x00", "")
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def cap(text: str, limit: int) -> str:
    """An index-time cap, as the reference applies it: the first `limit` characters (code points),
    nothing appended, so a capped message reads as exactly `limit` characters. The archive keeps
    the whole text (a rebuild re-derives it)."""
    return text if len(text) <= limit else text[:limit]


def canonical_uuid(raw: str) -> str | None:
    return raw.lower() if _CANONICAL_UUID.fullmatch(raw) else None


def derived_uuid(*parts: str) -> str:
    return str(uuidlib.uuid5(UUID_NAMESPACE, "\x00".join(parts)))


def message_uuid(session_id: str, raw: str | None, fallback: str) -> str:
    """A format's own uuid when it is one; otherwise a stable uuid5 of (session, raw id) or of
    (session, position), so every ref is hex and reads back after a re-ingest."""
    if raw:
        found = canonical_uuid(raw)
        if found:
            return found
        return derived_uuid(session_id, "id", raw)
    return derived_uuid(session_id, "at", fallback)


# ---- time -----------------------------------------------------------------------------------------


def utc_iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_instant(raw: str) -> datetime | None:
    """RFC 3339 (or ISO 8601 with an offset) as a UTC instant; a naive time is taken as UTC."""
    try:
        moment = datetime.fromisoformat(raw.strip())
    except (ValueError, TypeError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except (OverflowError, ValueError):
        return None


def normalize_timestamp(raw: Any) -> str:
    """A stored timestamp is UTC with milliseconds and `Z`, so string order is instant order
    (the reference compared the first 10 raw characters and misdated offsets)."""
    if not isinstance(raw, str) or not raw:
        return ""
    moment = parse_instant(raw)
    return utc_iso(moment) if moment else ""


# ---- messages and sessions ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Message:
    uuid: str  # canonical lowercase dashed uuid
    role: str  # user | assistant | system
    kind: str  # text | tool | thinking
    text: str  # never empty: empty messages are not indexed and have no ref
    timestamp: str  # UTC `Z` with ms, or "" when the format gave none
    parent_uuid: str | None = None
    # An injected envelope (<system-reminder>, <command-…>, isMeta, Codex environment context):
    # hidden unless include_tools.
    envelope: bool = False
    # Typed by a person: opens a turn (current_session withholds from the newest one).
    human: bool = False


@dataclass(frozen=True, slots=True)
class Session:
    session_id: str  # `<parent>/<agent>` for a subagent thread
    source: str  # claude-code | codex | the generic form's source
    project: str
    cwd: str
    messages: tuple[Message, ...]
    parent_session: str | None = None
    agent: str | None = None
    summary: str = ""
    # Codex review subagents carry no parent id: the parent records `review@<instant>` when it
    # enters review mode and the child starts at that instant, so the two link by key.
    spawn_key: str | None = None
    spawn_keys: tuple[str, ...] = ()

    @property
    def started_at(self) -> str:
        stamps = [m.timestamp for m in self.messages if m.timestamp]
        return min(stamps) if stamps else ""

    @property
    def last_at(self) -> str:
        stamps = [m.timestamp for m in self.messages if m.timestamp]
        return max(stamps) if stamps else ""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What an index knows of a session without reading its rows."""

    session_id: str
    source: str
    project: str
    cwd: str
    message_count: int
    started_at: str
    last_at: str
    parent_session: str | None = None
    agent: str | None = None
    summary: str = ""
    sha256: str = ""
    spawn_key: str | None = None
    spawn_keys: tuple[str, ...] = ()

    @property
    def subagent(self) -> bool:
        """A subagent thread (Claude sidechain, Codex subagent, generic `subagent`): searched only
        when asked for, as in the reference."""
        return self.agent is not None or self.parent_session is not None


@dataclass(frozen=True, slots=True)
class Row:
    """One indexed message as an engine returns it: its position is file order in the session."""

    session_id: str
    pos: int
    uuid: str
    role: str
    kind: str
    text: str
    timestamp: str
    envelope: bool = False
    human: bool = False


@dataclass(frozen=True, slots=True)
class Visibility:
    """The one definition of what a caller sees. Text is always shown; tools and injected envelopes
    only with include_tools; thinking only with include_thinking. Search passes thinking=True:
    thinking is searchable by default, and the ref then points at the thinking message."""

    tools: bool = False
    thinking: bool = False

    def shows(self, kind: str, envelope: bool) -> bool:
        if envelope or kind == "tool":
            return self.tools
        if kind == "thinking":
            return self.thinking
        return True


def search_visibility(include_tools: bool) -> Visibility:
    return Visibility(tools=include_tools, thinking=True)


# ---- refs -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReadRef:
    """A parsed `<session8>:<uuid8>`. Both parts are literal, case-insensitive prefixes; the session
    part has one segment per level (`<parent8>~<agent8>` for a subagent thread, kept here as `/`)."""

    session: str
    uuid: str  # lowercase; a prefix of the canonical dashed form
    numeric: bool = False  # all digits: either a real hex prefix or an old numeric ref

    def __str__(self) -> str:
        return f"{self.session.replace('/', LEVEL_SEPARATOR)}:{self.uuid}"


def parse_ref(raw: str) -> ReadRef:
    """The ref grammar, with the reference's three errors. A leading `ref=` and a full dashed uuid are
    accepted. An all-digit uuid part is kept: it is a valid hex prefix, and the "old numeric ref"
    error is raised only when it matches no real message (see RecallService)."""
    value = raw.strip() if isinstance(raw, str) else ""
    found = _REF.fullmatch(value)
    if not found or not _SESSION_PART.fullmatch(found["session"]):
        raise InvalidArgument(
            f"bad ref {raw!r}: expected <session8>:<uuid8> (as printed by search)",
            field="ref",
            ref=raw,
            expected="<session8>:<uuid8>",
        )
    session, part = found["session"].replace("~", "/"), found["uuid"].lower()
    if part.isdigit():
        return ReadRef(session, part, numeric=True)
    if not _HEX_PREFIX.fullmatch(part):
        raise InvalidArgument(
            f"bad ref {raw!r}: the uuid part {found['uuid']!r} must be hex", field="ref", ref=raw, uuid=found["uuid"]
        )
    return ReadRef(session, part)


def old_numeric_ref(ref: ReadRef) -> InvalidArgument:
    return InvalidArgument(
        f"bad ref {str(ref)!r}: {ref.uuid!r} is an old numeric ref, not a message uuid; search again for a "
        "current <session8>:<uuid8> ref",
        field="ref",
        ref=str(ref),
    )


def session_prefix_matches(prefix: str, session_id: str) -> bool:
    """Literal, case-insensitive, segment by segment: `7f2abd2d` names a top-level session,
    `7f2abd2d/0c4c` one of its subagent threads. An empty segment matches nothing."""
    want = prefix.lower().split("/")
    have = session_id.lower().split("/")
    return len(want) == len(have) and all(w and h.startswith(w) for w, h in zip(want, have, strict=True))


def printed_session(session_id: str, length: int, separator: str = LEVEL_SEPARATOR) -> str:
    return separator.join(segment[:length] for segment in session_id.split("/"))


def format_ref(session_id: str, message_uuid: str, session_len: int = REF_PREFIX, uuid_len: int = REF_PREFIX) -> str:
    return f"{printed_session(session_id, session_len)}:{message_uuid[:uuid_len]}"


def check_session_id(value: Any, field_name: str = "session_id") -> str:
    if not isinstance(value, str) or not SESSION_SEGMENT.fullmatch(value):
        raise InvalidArgument(
            f"{field_name} must be 1 to {MAX_SESSION_ID_CHARS} characters of [A-Za-z0-9._-]",
            field=field_name,
        )
    return value


def check_session_arg(value: Any, field_name: str = "session") -> str:
    """A session named on a route: a full id or a prefix (with `/` between levels); `ref=` and a
    pasted `<session>:<uuid>` resolve through their session half."""
    raw = value.strip() if isinstance(value, str) else ""
    raw = raw.removeprefix("ref=")
    if ":" in raw:
        raw = raw.split(":", 1)[0]
    if not raw or not _SESSION_PART.fullmatch(raw):
        raise InvalidArgument(
            f"bad session {value!r}: expected a session id or prefix (<session8>)", field=field_name, session=value
        )
    return raw.replace("~", "/")


# ---- one gate per input ---------------------------------------------------------------------------


def _text_arg(value: Any, field_name: str, limit: int) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidArgument(f"{field_name} must be a string", field=field_name)
    if len(value) > limit:
        raise InvalidArgument(f"{field_name} is longer than {limit} characters", field=field_name, limit=limit)
    if any((ord(ch) < 32 and ch != "\t") or ch == "\x7f" for ch in value):
        raise InvalidArgument(f"{field_name} must not contain control characters", field=field_name)
    return clean_text(value)


def _bound(value: str, field_name: str, *, end_of_day: bool) -> str:
    if not value:
        return ""
    if _DATE.fullmatch(value):
        moment = parse_instant(value + "T00:00:00+00:00")
        if moment is not None and end_of_day:
            moment += timedelta(days=1) - timedelta(milliseconds=1)
    else:
        moment = parse_instant(value)
    if moment is None:
        raise InvalidArgument(
            f"{field_name} must be a date (YYYY-MM-DD) or an RFC 3339 time, got {value!r}", field=field_name
        )
    return utc_iso(moment)


def _limit(value: int | None, *, default: int, maximum: int, field_name: str = "limit") -> int:
    if value is None or value == 0:
        return default
    if value < 0 or value > maximum:
        raise InvalidArgument(
            f"{field_name} must be between 0 and {maximum}, got {value}", field=field_name, limit=value, maximum=maximum
        )
    return value


@dataclass(frozen=True, slots=True)
class SearchParams:
    q: str = ""
    limit: int = DEFAULT_SEARCH_LIMIT
    role: str = ""
    sort: str = ""
    since: str = ""  # UTC instant, inclusive
    before: str = ""  # UTC instant, inclusive
    min_messages: int = 0
    project: str = ""
    source: str = ""
    include_path: PathPattern | None = None  # RE2 (patterns.py)
    exclude_path: PathPattern | None = None
    current_session: str = ""
    include_tools: bool = False
    include_subagents: bool = False
    oneline: bool = False
    ranker: str = DEFAULT_RANKER
    semantic: str = ""  # on | off | "" (the deployment's default)
    # The caller's own spelling of each argument, for next_command.
    raw: dict[str, Any] = field(default_factory=dict)


def gate_search(
    *,
    q: Any = "",
    limit: int | None = None,
    role: Any = "",
    sort: Any = "",
    since: Any = "",
    before: Any = "",
    min_messages: int | None = None,
    project: Any = "",
    source: Any = "",
    include_path: Any = "",
    exclude_path: Any = "",
    current_session: Any = "",
    include_tools: bool = False,
    include_subagents: bool = False,
    format: Any = "",  # noqa: A002 - the API's parameter name
    ranker: Any = "",
    semantic: Any = "",
) -> SearchParams:
    """The one gate for search parameters."""
    query = _text_arg(q, "q", MAX_QUERY_CHARS)
    size = _limit(limit, default=DEFAULT_SEARCH_LIMIT, maximum=MAX_SEARCH_LIMIT)
    role_ = _text_arg(role, "role", 16)
    if role_ and role_ not in ROLES:
        raise InvalidArgument(f"role must be one of {', '.join(ROLES)}, got {role_!r}", field="role")
    sort_ = _text_arg(sort, "sort", 16)
    if sort_ not in SORTS:
        raise InvalidArgument(f"sort must be 'newest', 'oldest' or absent, got {sort_!r}", field="sort")
    since_ = _bound(_text_arg(since, "since", 64), "since", end_of_day=False)
    before_ = _bound(_text_arg(before, "before", 64), "before", end_of_day=True)
    # since after before is an empty range, not an error: it matches nothing (every well-formed pair
    # of bounds is a valid request, as the published schema promises).
    if min_messages is not None and min_messages < 0:
        raise InvalidArgument("min_messages must be >= 0", field="min_messages")
    if min_messages is not None and min_messages > 10**9:
        raise InvalidArgument("min_messages is too large", field="min_messages")
    current = _text_arg(current_session, "current_session", MAX_SESSION_ID_CHARS * 2)
    if len(current) < MIN_SESSION_PREFIX:
        current = ""  # the reference ignores a prefix this short (it would name too many sessions)
    if current and not _SESSION_PART.fullmatch(current):
        raise InvalidArgument(
            f"current_session must be the session id or a prefix of at least {MIN_SESSION_PREFIX} characters",
            field="current_session",
        )
    fmt = _text_arg(format, "format", 16)
    if fmt not in ("", "json", "oneline"):
        raise InvalidArgument(f"format must be 'json' or 'oneline', got {fmt!r}", field="format")
    ranker_ = _text_arg(ranker, "ranker", 16) or DEFAULT_RANKER
    if ranker_ not in RANKERS:
        raise InvalidArgument(f"ranker must be one of {', '.join(RANKERS)}", field="ranker")
    semantic_ = _text_arg(semantic, "semantic", 8)
    if semantic_ and semantic_ not in SEMANTIC_SWITCH:
        raise InvalidArgument(f"semantic must be 'on', 'off' or absent, got {semantic_!r}", field="semantic")
    raw = {
        "q": query,
        "limit": limit or None,
        "role": role_,
        "sort": sort_,
        "since": since or "",
        "before": before or "",
        "min_messages": min_messages or None,
        "project": project or "",
        "source": source or "",
        "include_path": include_path or "",
        "exclude_path": exclude_path or "",
        "current_session": current,
        "include_tools": include_tools,
        "include_subagents": include_subagents,
        "semantic": semantic_,
    }
    return SearchParams(
        q=query,
        limit=size,
        role=role_,
        sort=sort_,
        since=since_,
        before=before_,
        min_messages=min_messages or 0,
        project=_text_arg(project, "project", MAX_PROJECT_CHARS),
        source=_text_arg(source, "source", MAX_SOURCE_CHARS),
        include_path=compile_path_pattern(_text_arg(include_path, "include_path", MAX_PATTERN_CHARS), "include_path"),
        exclude_path=compile_path_pattern(_text_arg(exclude_path, "exclude_path", MAX_PATTERN_CHARS), "exclude_path"),
        current_session=current.replace("~", "/"),
        include_tools=bool(include_tools),
        include_subagents=bool(include_subagents),
        oneline=fmt == "oneline",
        ranker=ranker_,
        semantic=semantic_,
        raw=raw,
    )


@dataclass(frozen=True, slots=True)
class ReadParams:
    ref: ReadRef
    budget: int | None = None  # characters; None means no cap
    radius: int = READ_WINDOW
    more: int = 0
    around: int = 0
    visibility: Visibility = Visibility()


def gate_read(
    ref: Any,
    *,
    budget: int | None = None,
    more: int | None = None,
    around: int | None = None,
    window: int | None = None,
    include_tools: bool = False,
    include_thinking: bool = False,
) -> ReadParams:
    """The one gate for a read: the ref grammar, the budget, the expand-in-place ladder."""
    parsed = parse_ref(ref)
    if budget is not None and not 0 <= budget <= MAX_READ_BUDGET:
        raise InvalidArgument(
            f"budget must be between {MIN_READ_BUDGET} and {MAX_READ_BUDGET} characters, got {budget}",
            field="budget",
            minimum=MIN_READ_BUDGET,
        )
    level = more or 0
    if level < 0:
        raise InvalidArgument("more must be >= 0", field="more")
    if window is not None and window < 0:
        raise InvalidArgument("window must be >= 0", field="window")
    radius = window if window else (level + 1) * READ_WINDOW
    if radius > MAX_READ_RADIUS:
        raise InvalidArgument(
            f"the window radius is limited to {MAX_READ_RADIUS} messages, got {radius}",
            field="window" if window else "more",
            maximum=MAX_READ_RADIUS,
        )
    shift = around or 0
    if abs(shift) > 10**9:
        raise InvalidArgument("around is out of range", field="around")
    return ReadParams(
        ref=parsed,
        budget=budget,
        radius=radius,
        more=level,
        around=shift,
        visibility=Visibility(tools=include_tools, thinking=include_thinking),
    )


@dataclass(frozen=True, slots=True)
class OutlineParams:
    session: str
    visibility: Visibility = Visibility()
    include_subagents: bool = False  # the reference lists subagent threads only when asked


def gate_outline(
    session: Any, *, include_tools: bool = False, include_thinking: bool = False, include_subagents: bool = False
) -> OutlineParams:
    return OutlineParams(
        session=check_session_arg(session),
        visibility=Visibility(tools=include_tools, thinking=include_thinking),
        include_subagents=include_subagents,
    )


@dataclass(frozen=True, slots=True)
class TopicsParams:
    q: str
    limit: int
    project: str


def gate_topics(*, q: Any = "", limit: int | None = None, project: Any = "") -> TopicsParams:
    return TopicsParams(
        q=_text_arg(q, "q", MAX_QUERY_CHARS),
        limit=_limit(limit, default=DEFAULT_TOPICS_LIMIT, maximum=MAX_TOPICS_LIMIT),
        project=_text_arg(project, "project", MAX_PROJECT_CHARS),
    )


@dataclass(frozen=True, slots=True)
class TopicLabel:
    ref: ReadRef
    label: str


def gate_topic_label(ref: Any, label: Any) -> TopicLabel:
    """A topic labels a segment: the session and the message where it starts, and a short label."""
    parsed = parse_ref(ref)
    if not isinstance(label, str):
        raise InvalidArgument("label must be a string", field="label")
    text = " ".join(clean_text(label).split())
    if not text:
        raise InvalidArgument("label must not be empty", field="label")
    if len(text) > MAX_TOPIC_LABEL_CHARS:
        raise InvalidArgument(f"label is longer than {MAX_TOPIC_LABEL_CHARS} characters", field="label")
    return TopicLabel(parsed, text)


@dataclass(frozen=True, slots=True)
class GenericMessage:
    uuid: str
    role: str
    text: str
    timestamp: str
    kind: str = "text"
    parent_uuid: str | None = None
    subagent: str | None = None


@dataclass(frozen=True, slots=True)
class IngestRequest:
    """Either the generic JSON form (source, session_id, messages) or a JSONL file in a known format."""

    format: str  # "generic" | one of FORMATS
    project: str = ""
    project_folder: str = ""  # a ~/.claude/projects/<folder> name: the project when no cwd is known
    source: str = ""
    session_id: str = ""
    messages: tuple[GenericMessage, ...] = ()
    jsonl: bytes = b""


def _field_str(raw: dict[str, Any], name: str, where: str, *, required: bool, limit: int) -> str:
    value = raw.get(name)
    if value is None:
        if required:
            raise InvalidArgument(f"{where}{name} is required", field=f"{where}{name}")
        return ""
    if not isinstance(value, str):
        raise InvalidArgument(f"{where}{name} must be a string", field=f"{where}{name}")
    if len(value) > limit:
        raise InvalidArgument(f"{where}{name} is longer than {limit} characters", field=f"{where}{name}")
    return clean_text(value)


def gate_ingest(body: Any) -> IngestRequest:
    """The one gate for POST /v1/transcripts: the generic form is checked message by message (a bad
    message refuses the whole body and stores nothing); a JSONL body is checked for its format here
    and line by line by the parser, which skips and counts malformed lines."""
    if not isinstance(body, dict):
        raise InvalidArgument("the body must be a JSON object", field="")
    project = _field_str(body, "project", "", required=False, limit=MAX_PROJECT_CHARS)
    folder = _field_str(body, "project_folder", "", required=False, limit=MAX_PROJECT_CHARS)
    if "format" in body or "jsonl" in body:
        fmt = body.get("format")
        if fmt not in FORMATS:
            raise InvalidArgument(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}", field="format")
        extra = set(body) - {"format", "project", "project_folder", "jsonl"}
        if extra:
            raise InvalidArgument(f"unknown field {sorted(extra)[0]!r}", field=sorted(extra)[0])
        jsonl = body.get("jsonl")
        if not isinstance(jsonl, str):
            raise InvalidArgument("jsonl must be a string holding the transcript file", field="jsonl")
        return IngestRequest(
            format=fmt,
            project=project,
            project_folder=folder,
            jsonl=jsonl.encode("utf-8", "surrogatepass"),
        )
    extra = set(body) - {"source", "project", "session_id", "messages"}
    if extra:
        raise InvalidArgument(f"unknown field {sorted(extra)[0]!r}", field=sorted(extra)[0])
    source = _field_str(body, "source", "", required=True, limit=MAX_SOURCE_CHARS)
    if not source.strip():
        raise InvalidArgument("source must not be empty", field="source")
    session_id = check_session_id(body.get("session_id"))
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list):
        raise InvalidArgument("messages must be a list", field="messages")
    if len(raw_messages) > MAX_GENERIC_MESSAGES:
        raise InvalidArgument(f"at most {MAX_GENERIC_MESSAGES} messages per session", field="messages")
    messages = []
    for i, raw in enumerate(raw_messages):
        where = f"messages[{i}]."
        if not isinstance(raw, dict):
            raise InvalidArgument(f"messages[{i}] must be an object", field=f"messages[{i}]")
        unknown = set(raw) - {"uuid", "role", "text", "timestamp", "kind", "parent_uuid", "subagent"}
        if unknown:
            raise InvalidArgument(
                f"{where}{sorted(unknown)[0]} is not a message field", field=where + sorted(unknown)[0]
            )
        message_id = _field_str(raw, "uuid", where, required=True, limit=200)
        if not message_id:
            raise InvalidArgument(f"{where}uuid must not be empty", field=where + "uuid")
        role = _field_str(raw, "role", where, required=True, limit=16)
        if role not in ROLES:
            raise InvalidArgument(f"{where}role must be one of {', '.join(ROLES)}", field=where + "role")
        kind = _field_str(raw, "kind", where, required=False, limit=16) or "text"
        if kind not in KINDS:
            raise InvalidArgument(f"{where}kind must be one of {', '.join(KINDS)}", field=where + "kind")
        text = raw.get("text")
        if not isinstance(text, str):
            raise InvalidArgument(f"{where}text must be a string", field=where + "text")
        stamp = _field_str(raw, "timestamp", where, required=True, limit=64)
        if not normalize_timestamp(stamp):
            raise InvalidArgument(f"{where}timestamp must be an RFC 3339 time", field=where + "timestamp")
        subagent = raw.get("subagent")
        if subagent is not None:
            check_session_id(subagent, where + "subagent")
        parent = _field_str(raw, "parent_uuid", where, required=False, limit=200) or None
        messages.append(
            GenericMessage(
                uuid=message_id,
                role=role,
                text=clean_text(text),
                timestamp=stamp,
                kind=kind,
                parent_uuid=parent,
                subagent=subagent,
            )
        )
    return IngestRequest(
        format="generic",
        project=project,
        source=source,
        session_id=session_id,
        messages=tuple(messages),
    )
