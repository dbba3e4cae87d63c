"""Recall's ports: the search index (one port, two engines), the transcript archive, the ingest ledger.

SearchIndex contract (held by tests/integration/test_recall_index_conformance.py and
test_recall_reads_conformance.py for every engine):

- Scope. Every call takes the authority; nothing reads or writes another authority's data, and an
  id from another authority resolves to nothing.
- replace_session is atomic: readers see the whole old session or the whole new one, never a mix.
  Re-ingesting replaces: rows the new version no longer holds stop matching at once. Topics whose
  start message survives the replacement are kept; the others go with it.
- search(q) returns ranked per-session hits (one per conversation), at most q.limit, plus:
  - total_sessions: the number of distinct sessions with a matching, visible, non-withheld message,
    independent of the limit; exact unless total_is_lower_bound, which is set only when the engine
    stopped scoring at q.max_candidates messages;
  - newest: the newest timestamp among matching messages (recency_skew needs it);
  - withheld: how many matching messages were dropped as the caller's live turn;
  - tier: "word" when the word index (stemmed: "reconciling" finds "reconciled") answered,
    "trigram" when it found nothing and the substring index was tried.
  Each hit carries what a result line prints: `ref`, the hit row's printed_ref, and `topic`, the
  label of the topic segment holding the row (the last of session_topics starting at or before
  it; '' when none). The engine reads them for the whole page at once (a search is a fixed number
  of round trips, not a few per hit).
  Candidates are the messages matching q.query, passing q.filter (SearchFilter.matches is the one
  definition of what it selects; an engine may push any part of it down), scored by the engine's
  relevance (bm25 or its equivalent; higher `score` is better). Ordering is then shared by every
  engine: ranking.rank_sessions (coverage re-sort, one hit per conversation, the ranker). Ties keep
  insertion order (a session's rows are inserted in file order).
- resolve_sessions(prefix) is literal and case-insensitive, segment by segment
  (model.session_prefix_matches); an id equal to the prefix wins outright. It returns up to
  AMBIGUITY_CANDIDATES ids, sorted, and the total. resolve_messages does the same for a uuid prefix
  within one session (the canonical dashed, lowercase uuid).
- printed_ref gives the shortest `<session>:<uuid>` (each part at least 8 characters, or whole) that
  resolves back to exactly that message, so every printed ref reads back.
- window(anchor, radius, around, visibility) returns displayable rows (Visibility.shows, plus the
  anchor whatever its kind) in file order: `radius` displayed rows each side of the centre, the centre
  being the anchor moved `around` displayed rows; with the counts of displayable rows left outside.
- outline returns the first/last `bookend` displayable rows among the first/last `scan` rows, without
  overlap, and the number of rows (shown or not) strictly between the two bookends (the
  reference's mid_count; with no start bookend from the session's first row, with no end bookend
  to its last).
- Topics: add_topic upserts the label of the segment starting at (session, uuid); search_topics ranks
  labels over the whole authority with one global limit (words OR-ed), and says whether anything at
  all is tagged.
- delete_authority removes every session, row and topic of the authority (before a rebuild).

Bytes: an engine keeps its own copy of every string it is given.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from dovecote.recall.model import (
    MAX_CANDIDATES,
    Row,
    Session,
    SessionInfo,
    Visibility,
)
from dovecote.recall.results import VectorCoverage

if TYPE_CHECKING:
    from dovecote.embedding.ports import Embedder
    from dovecote.recall.query import Query


@dataclass(frozen=True, slots=True)
class SearchFilter:
    role: str = ""
    since: str = ""  # UTC instant, inclusive, per message
    before: str = ""  # UTC instant, inclusive, per message
    min_messages: int = 0
    project: str = ""
    source: str = ""
    # The (project, working directory) places the path patterns selected (the service matches the
    # regexes against the authority's known places); None selects every place.
    places: frozenset[tuple[str, str]] | None = None
    visibility: Visibility = Visibility(thinking=True)
    subagents: bool = False  # subagent threads match only when asked for (SessionInfo.subagent)

    def matches(self, row: Row, session: SessionInfo) -> bool:
        """The single definition of what a search filter selects."""
        if not self.visibility.shows(row.kind, row.envelope):
            return False
        if self.role and row.role != self.role:
            return False
        if self.since and (not row.timestamp or row.timestamp < self.since):
            return False
        if self.before and (not row.timestamp or row.timestamp > self.before):
            return False
        if self.min_messages and session.message_count < self.min_messages:
            return False
        if self.project and session.project != self.project:
            return False
        if self.source and session.source != self.source:
            return False
        if not self.subagents and session.subagent:
            return False
        return self.places is None or (session.project, session.cwd) in self.places


@dataclass(frozen=True, slots=True)
class Withhold:
    """The caller's live turn: rows of `session_id` at or after `from_pos`."""

    session_id: str
    from_pos: int


@dataclass(frozen=True, slots=True)
class SemanticQuery:
    """The semantic tier's part of a relevance search: the question's vector, the model key the
    stored vectors must carry (model_key), and how the two rankings are fused (dovecote.recall.fusion)."""

    vector: tuple[float, ...]
    model: str
    fusion: str
    weight: float  # the lexical share of a weighted fusion


@dataclass(frozen=True, slots=True)
class IndexQuery:
    query: Query
    filter: SearchFilter
    limit: int
    sort: str = ""  # "" (relevance) | "newest" | "oldest"
    ranker: str = "message"
    withhold: Withhold | None = None
    max_candidates: int = MAX_CANDIDATES
    semantic: SemanticQuery | None = None  # only an engine with a VectorTier reads it


@dataclass(frozen=True, slots=True)
class SessionHit:
    session: SessionInfo
    row: Row  # the message the ref points at
    snippet: str
    score: float
    coverage: int
    ref: str  # printed_ref(session, row.uuid)
    topic: str  # the label of the topic segment holding the row, '' when none


@dataclass(frozen=True, slots=True)
class SearchPage:
    hits: list[SessionHit]
    total_sessions: int
    total_is_lower_bound: bool
    newest: str = ""
    withheld: int = 0
    tier: str = "word"
    # The semantic tier's coverage when the engine ran it (None: it did not, as for an engine
    # without a VectorTier). tier is then "vector" when only the vectors found something.
    vectors: VectorCoverage | None = None


@dataclass(frozen=True, slots=True)
class Resolution:
    ids: list[str]  # up to AMBIGUITY_CANDIDATES, sorted
    total: int


@dataclass(frozen=True, slots=True)
class Window:
    rows: list[Row]  # file order
    before: int  # displayable rows before the first shown
    after: int  # displayable rows after the last shown


@dataclass(frozen=True, slots=True)
class OutlineRows:
    start: list[Row]
    end: list[Row]
    between: int  # every row strictly between the last start row and the first end row


@dataclass(frozen=True, slots=True)
class ScopeRow:
    project: str
    cwd: str
    sessions: int


@dataclass(frozen=True, slots=True)
class TopicRow:
    session: SessionInfo
    start_uuid: str
    start_pos: int
    label: str


def outline_rows(head: list[Row], tail: list[Row], visibility: Visibility, size: int) -> OutlineRows:
    """The outline from a session's first rows (file order) and last rows (reverse file order):
    `size` shown rows at each end, without overlap, the end in file order; and the rows between
    them, counted from positions (a session's rows are numbered 0..n-1 in file order)."""
    start = [r for r in head if visibility.shows(r.kind, r.envelope)][:size]
    taken = {r.pos for r in start}
    end = [r for r in tail if visibility.shows(r.kind, r.envelope) and r.pos not in taken][:size]
    end.reverse()
    if not tail:
        return OutlineRows(start, end, 0)
    low = start[-1].pos if start else -1
    high = end[0].pos if end else tail[0].pos + 1
    return OutlineRows(start, end, max(0, high - low - 1))


class SearchIndex(Protocol):
    name: str  # "sqlite-fts5", "opensearch"

    def replace_session(self, authority: str, session: Session, *, sha256: str) -> None: ...

    def session(self, authority: str, session_id: str) -> SessionInfo | None: ...

    def search(self, authority: str, query: IndexQuery) -> SearchPage: ...

    def resolve_sessions(self, authority: str, prefix: str) -> Resolution: ...

    def resolve_messages(self, authority: str, session_id: str, prefix: str) -> Resolution: ...

    def message(self, authority: str, session_id: str, uuid: str) -> Row | None: ...

    def printed_ref(self, authority: str, session_id: str, uuid: str) -> str: ...

    def turn_start(self, authority: str, session_id: str) -> int | None:
        """Position of the newest message a person typed in the session (None when there is none)."""
        ...

    def window(
        self, authority: str, session_id: str, anchor_pos: int, *, radius: int, around: int, visibility: Visibility
    ) -> Window: ...

    def outline(
        self, authority: str, session_id: str, *, visibility: Visibility, scan: int, bookend: int
    ) -> OutlineRows: ...

    def subagents(self, authority: str, session: SessionInfo) -> list[SessionInfo]:
        """Threads linked to the session: parent_session == its id, or spawn_key in its spawn_keys."""
        ...

    def scopes(self, authority: str) -> list[ScopeRow]:
        """Sessions per (project, working directory)."""
        ...

    def add_topic(self, authority: str, session_id: str, start_uuid: str, label: str) -> None: ...

    def session_topics(self, authority: str, session_id: str) -> list[TopicRow]:
        """The session's topics in file order of their start."""
        ...

    def search_topics(
        self, authority: str, query: Query | None, *, limit: int, project: str
    ) -> tuple[list[TopicRow], bool]:
        """Ranked topic rows, and whether the authority has any topic at all."""
        ...

    def delete_authority(self, authority: str) -> None: ...


@runtime_checkable
class VectorTier(Protocol):
    """An engine that keeps vectors beside its lexical index (both engines: sqlite_vectors.py,
    opensearch_vectors.py).

    - embed_pending embeds the conversation messages (text and thinking rows, not tool rows or
      envelopes, not blank) that have no vector of the embedder's model yet, in batches, outside the
      engine's lock; returns how many messages got one. A vector is stored with its model key, so a
      change of model makes every message pending again (re-embedding). Called off the request path.
    - search with IndexQuery.semantic set (and no sort) fuses the lexical ranking with the vector one
      and reports SearchPage.vectors."""

    def embed_pending(self, embedder: Embedder, *, authority: str | None = None, limit: int | None = None) -> int: ...

    def pending_vectors(self, model: str, authority: str | None = None) -> int: ...


@runtime_checkable
class SessionDocuments(Protocol):
    """An engine that keeps the session documents the `session-doc` ranker fuses (ranking.py; both
    engines). Written with their session by replace_session and deleted with it; for an index made
    before them, fill_session_docs writes the missing ones (the migration: safe to repeat and to run
    beside writers; returns how many it wrote). document_order is what a search fuses: the session
    ids of the query's best documents (DOC_DEPTH), among the sessions the session-level filters keep."""

    def fill_session_docs(self, authority: str | None = None, *, limit: int | None = None) -> int: ...

    def document_order(self, authority: str, query: IndexQuery) -> list[str]: ...


# ---- the archive (S3): canonical transcripts ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArchiveEntry:
    key: str
    format: str  # claude-code-jsonl | codex-jsonl | generic
    project: str = ""
    project_folder: str = ""
    sha256: str = ""


@dataclass(frozen=True, slots=True)
class TopicEntry:
    session_id: str
    start_uuid: str
    label: str


class TranscriptArchive(Protocol):
    """The canonical copy. Every transcript the index holds was first written here, byte for byte,
    under `transcripts/<authority>/`; the index is derived and `rebuild` re-creates it from this.
    A later put under the same name replaces the earlier object (re-ingest replaces). Topic labels
    are archived too: they are user data, not derived."""

    def put(self, authority: str, name: str, body: bytes, entry: ArchiveEntry) -> ArchiveEntry: ...

    def keys(self, authority: str) -> Iterator[str]:
        """Every archived transcript of the authority, in key order."""
        ...

    def get(self, authority: str, key: str) -> tuple[bytes, ArchiveEntry]:
        """The bytes and the metadata they were archived with. Raises NotFound."""
        ...

    def put_topic(self, authority: str, topic: TopicEntry) -> None: ...

    def topics(self, authority: str) -> Iterator[TopicEntry]: ...

    def presign_upload(self, authority: str, upload_id: str, expires_in: int) -> str: ...

    def read_upload(self, authority: str, upload_id: str) -> bytes:
        """Raises NotFound when nothing was uploaded."""
        ...

    def upload_exists(self, authority: str, upload_id: str) -> bool:
        """Whether a presigned upload's bytes arrived (and were not indexed and deleted yet)."""
        ...

    def delete_upload(self, authority: str, upload_id: str) -> None: ...


# ---- the ingest ledger (DynamoDB): uploads not yet indexed ------------------------------------------


@dataclass(frozen=True, slots=True)
class PendingUpload:
    upload_id: str
    format: str
    project: str = ""
    project_folder: str = ""
    created_at: str = ""
    # When the upload URL stops working: an upload that never arrived stops counting as pending then.
    expires_at: str = ""
    status: str = "pending"  # pending | failed
    error: str = ""
    details: dict[str, object] = field(default_factory=dict)


class IngestLedger(Protocol):
    """Uploads accepted but not yet indexed, so a search can say its answer is stale. An entry is
    written before the upload URL is handed out and cleared after the transcript is indexed."""

    def add(self, authority: str, upload: PendingUpload) -> None: ...

    def get(self, authority: str, upload_id: str) -> PendingUpload | None: ...

    def fail(self, authority: str, upload_id: str, error: str) -> None: ...

    def clear(self, authority: str, upload_id: str) -> None: ...

    def pending(self, authority: str, now: str) -> list[PendingUpload]:
        """Entries still pending at `now` (failed and expired ones are left out)."""
        ...
