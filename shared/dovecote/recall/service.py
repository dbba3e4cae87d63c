"""Recall service: the verbs behind the HTTP routes. Pure rules over three ports (SearchIndex,
TranscriptArchive, IngestLedger); no boto3, no SQL.

- ingest: parse → archive (the canonical copy) → replace each session in the index. A file whose
  SHA-256 matches what every one of its sessions was indexed from is skipped.
- search: one ranked hit per conversation, wrapped in the envelope that says how complete it is
  (scopes_report, total_matches and whether it is a lower bound, has_more + next_command, warnings as
  data in the reference's order).
- read: a window of displayed rows around a ref, with a character budget that keeps the anchor and
  trims outward, never silently.
- outline: a session's bookends, topics and subagent threads. topics: label segments, find them.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import uuid as uuidlib
from dataclasses import KW_ONLY, dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from dovecote.platform.clock import Clock, utc_now
from dovecote.platform.errors import (
    AmbiguousRef,
    DomainError,
    InvalidArgument,
    NotFound,
    PayloadTooLarge,
    Unavailable,
)
from dovecote.platform.principal import Principal
from dovecote.recall.digests import IngestedDigests, TranscriptCheck
from dovecote.recall.fusion import DEFAULT_FUSION, LEXICAL_SHARE, SEMANTIC_DEFAULT, model_key
from dovecote.recall.model import (
    BROAD_QUERY_MATCHES,
    FORMATS,
    LEVEL_SEPARATOR,
    MAX_CANDIDATES,
    MAX_PROJECT_CHARS,
    MAX_SEARCH_LIMIT,
    NEIGHBOUR_CHARS,
    OUTLINE_BOOKEND,
    OUTLINE_SCAN_ROWS,
    OUTLINE_TEXT_CHARS,
    PROJECT_SPREAD_SAMPLE,
    READ_WINDOW,
    RECENCY_SKEW,
    SCOPE_SEARCHED,
    SCOPE_STALE,
    WARN_BROAD_QUERY,
    WARN_CURRENT_TURN_EXCLUDED,
    WARN_PROJECT_SPREAD,
    WARN_RAW_HISTORY,
    WARN_RECENCY_SKEW,
    WARN_SCOPE_INCOMPLETE,
    WARN_VECTOR_GAP,
    WIDEN_FLOOR,
    IngestRequest,
    OutlineParams,
    ReadParams,
    ReadRef,
    Row,
    SearchParams,
    SessionInfo,
    TopicLabel,
    TopicsParams,
    Visibility,
    clean_text,
    gate_ingest,
    old_numeric_ref,
    parse_instant,
    search_visibility,
    utc_iso,
)
from dovecote.recall.ports import (
    ArchiveEntry,
    IndexQuery,
    IngestLedger,
    PendingUpload,
    Resolution,
    SearchFilter,
    SearchIndex,
    SemanticQuery,
    SessionDocuments,
    TopicEntry,
    TopicRow,
    TranscriptArchive,
    VectorTier,
    Withhold,
)
from dovecote.recall.results import (
    IngestedSession,
    IngestResult,
    MessageView,
    OutlineResult,
    ReadResult,
    ScopeReport,
    SearchEnvelope,
    SearchRef,
    SubagentInfo,
    TopicHit,
    TopicsResult,
    Upload,
    VectorCoverage,
    Warning,
    fit_budget,
)

if TYPE_CHECKING:
    from dovecote.embedding.ports import Embedder

STORE_NOTE_TRIGRAM = "the word index found nothing; these hits come from the substring (trigram) index"
STORE_NOTE_NOTHING = "neither the word index nor the substring (trigram) index found a match"
# A pending upload counts while its URL can still be used. After the URL expired it counts only if
# its bytes arrived (the indexer has not finished yet), and only for this long: an upload that landed
# in the URL's last second is indexed within seconds; a URL never used leaves the report at expiry.
UPLOAD_GRACE = timedelta(minutes=5)
CLI = "dovecote recall"

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def clean_oneline(text: str) -> str:
    """ANSI escapes and control characters out, whitespace collapsed: one plain line."""
    return " ".join(_CONTROL.sub(" ", _ANSI.sub("", text)).split())


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _view(row: Row, limit: int | None = None) -> MessageView:
    text = row.text if limit is None else _cut(row.text, limit)
    return MessageView(uuid=row.uuid, role=row.role, kind=row.kind, timestamp=row.timestamp, text=text)


def _command(*words: str, **options: Any) -> str:
    parts = [CLI, *(shlex.quote(w) for w in words)]
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            parts.append(flag)
        elif value not in (None, "", False, 0):
            parts += [flag, shlex.quote(str(value))]
    return " ".join(parts)


@dataclass(eq=False)
class RecallService:
    index: SearchIndex
    archive: TranscriptArchive
    ledger: IngestLedger
    _: KW_ONLY
    clock: Clock = utc_now
    presign_seconds: int = 900
    max_candidates: int = MAX_CANDIDATES
    digests: IngestedDigests | None = None
    # The semantic tier: an embedder (None: off), whether a search without `semantic` runs it, and
    # how it is fused (dovecote.recall.fusion; the defaults are the bench's verdict).
    embedder: Embedder | None = None
    semantic_default: bool = SEMANTIC_DEFAULT
    fusion: str = DEFAULT_FUSION
    lexical_share: float = LEXICAL_SHARE

    # ---- ingest -------------------------------------------------------------------------------------

    def ingest(self, principal: Principal, body: Any) -> IngestResult:
        principal.require("caller", "worker")
        request = gate_ingest(body)
        if request.format == "generic":
            raw = json.dumps(body, sort_keys=True, ensure_ascii=True).encode("ascii")
        else:
            raw = request.jsonl
        return self.ingest_file(principal.authority, request, raw)

    def ingest_file(self, authority: str, request: IngestRequest, raw: bytes) -> IngestResult:
        """Archive first, then index: the archive is canonical, so an index write that fails after it
        is repaired by the retry (or a rebuild); nothing is indexed that the archive lacks."""
        from dovecote.recall import formats  # the transcript parsers: only an ingest loads them

        parsed = formats.parse(request)
        details: dict[str, Any] = {
            "lines": parsed.lines,
            "malformed": parsed.malformed,
            "warnings": [{"code": w.code, "line": w.line, "message": w.message} for w in parsed.warnings],
        }
        if not parsed.sessions:
            raise InvalidArgument("the transcript holds no session that could be indexed", **details)
        sha = hashlib.sha256(raw).hexdigest()
        known = {s.session_id: self.index.session(authority, s.session_id) for s in parsed.sessions}
        unchanged = all(info is not None and info.sha256 == sha for info in known.values())
        if not unchanged:
            main = parsed.sessions[0]
            extension = "json" if request.format == "generic" else "jsonl"
            self.archive.put(
                authority,
                f"{main.session_id}.{extension}",
                raw,
                ArchiveEntry(
                    key="",
                    format=request.format,
                    project=request.project,
                    project_folder=request.project_folder,
                    sha256=sha,
                ),
            )
            for session in parsed.sessions:
                self.index.replace_session(authority, session, sha256=sha)
        if self.digests is not None:
            self.digests.record(authority, sha)  # archived and indexed: the check may call it known
        return IngestResult(
            session_id=parsed.sessions[0].session_id,
            messages_indexed=parsed.messages,
            sessions=[
                IngestedSession(s.session_id, len(s.messages), unchanged, s.parent_session) for s in parsed.sessions
            ],
            unchanged=unchanged,
            sha256=sha,
            lines=parsed.lines,
            malformed=parsed.malformed,
            skipped=parsed.skipped,
            warnings=details["warnings"],
        )

    def unknown_transcripts(self, principal: Principal, body: Any) -> list[str]:
        """`POST /v1/transcripts/check`: of the SHA-256 digests asked about, those this authority has
        not ingested (all of them when no digest ledger is wired)."""
        return TranscriptCheck(self.digests).unknown_transcripts(principal, body)

    def create_upload(self, principal: Principal, body: Any) -> Upload:
        principal.require("caller", "worker")
        if not isinstance(body, dict):
            raise InvalidArgument("the body must be a JSON object", field="")
        fmt = body.get("format")
        if fmt not in FORMATS:
            raise InvalidArgument(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}", field="format")
        values = {}
        for name in ("project", "project_folder"):
            value = body.get(name) or ""
            if not isinstance(value, str) or len(value) > MAX_PROJECT_CHARS:
                raise InvalidArgument(f"{name} must be a string of at most {MAX_PROJECT_CHARS} characters", field=name)
            values[name] = clean_text(value)
        now = self.clock()
        expires = now + timedelta(seconds=self.presign_seconds)
        upload = PendingUpload(
            upload_id=uuidlib.uuid4().hex,
            format=fmt,
            project=values["project"],
            project_folder=values["project_folder"],
            created_at=utc_iso(now),
            expires_at=utc_iso(expires),
        )
        # The ledger entry comes first: from the moment the URL exists, searches report the scope stale.
        self.ledger.add(principal.authority, upload)
        url = self.archive.presign_upload(principal.authority, upload.upload_id, self.presign_seconds)
        return Upload(upload_id=upload.upload_id, upload_url=url, expires_at=utc_iso(expires))

    def index_upload(self, authority: str, upload_id: str) -> IngestResult | None:
        """The indexer's one step, safe to repeat: an entry already cleared is done, and an unchanged
        file is skipped by its SHA-256. None when there was nothing (left) to index."""
        entry = self.ledger.get(authority, upload_id)
        if entry is None or entry.status != "pending":
            return None
        try:
            body = self.archive.read_upload(authority, upload_id)
        except NotFound:
            return None
        except PayloadTooLarge as exc:
            self.ledger.fail(authority, upload_id, exc.message)
            self.archive.delete_upload(authority, upload_id)
            return None
        request = IngestRequest(
            format=entry.format, project=entry.project, project_folder=entry.project_folder, jsonl=body
        )
        try:
            result = self.ingest_file(authority, request, body)
        except InvalidArgument as exc:  # an unreadable file: say so instead of retrying forever
            self.ledger.fail(authority, upload_id, exc.message)
            self.archive.delete_upload(authority, upload_id)
            return None
        self.ledger.clear(authority, upload_id)
        self.archive.delete_upload(authority, upload_id)
        return result

    # ---- search -------------------------------------------------------------------------------------

    def search(self, principal: Principal, p: SearchParams) -> SearchEnvelope:
        principal.require("caller", "worker")
        authority = principal.authority
        from dovecote.recall.query import parse_query  # its tokenizer's patterns: only a search compiles them

        query = parse_query(p.q)
        if query is None:
            return self._empty(p.q)
        scopes = [
            r
            for r in self.index.scopes(authority)
            if (not p.project or r.project == p.project) and _path_selected(p, r.cwd or r.project)
        ]
        pending = self._pending(authority, p.project)
        if not scopes and not pending:
            return self._empty(p.q)  # unknown project, or a path filter matching nothing
        places = frozenset((r.project, r.cwd) for r in scopes) if (p.include_path or p.exclude_path) else None
        page = self.index.search(
            authority,
            IndexQuery(
                query=query,
                filter=SearchFilter(
                    role=p.role,
                    since=p.since,
                    before=p.before,
                    min_messages=p.min_messages,
                    project=p.project,
                    source=p.source,
                    places=places,
                    visibility=search_visibility(p.include_tools),
                    subagents=p.include_subagents,
                ),
                limit=p.limit,
                sort=p.sort,
                ranker=p.ranker,
                withhold=self._withhold(authority, p.current_session),
                max_candidates=self.max_candidates,
                semantic=self._semantic(p),
            ),
        )
        results = [
            SearchRef(
                project=hit.session.project,
                session_id=hit.session.session_id,
                iso=hit.row.timestamp,
                snippet=hit.snippet,
                read_ref=hit.ref,
                topic=hit.topic,
            )
            for hit in page.hits
        ]
        reports = _scope_reports(scopes, pending)
        stale = [r for r in reports if r.status == SCOPE_STALE]
        has_more = page.total_sessions > len(results) or page.total_is_lower_bound
        widened = min(max(4 * p.limit, WIDEN_FLOOR), MAX_SEARCH_LIMIT)
        next_command = ""
        if has_more and widened > p.limit:
            next_command = _search_command(p, widened)
        coverage = page.vectors or VectorCoverage()
        warnings = self._warnings(p, page, results, reports, stale, pending, coverage)
        return SearchEnvelope(
            query=p.q,
            results=results,
            scopes_report=reports,
            complete=not has_more and not stale,
            count=len(results),
            total_matches=page.total_sessions,
            total_is_lower_bound=page.total_is_lower_bound,
            has_more=has_more,
            next_command=next_command,
            warnings=warnings,
            excluded_current_turn=page.withheld,
            store=self.index.name,
            store_note=(STORE_NOTE_TRIGRAM if page.hits else STORE_NOTE_NOTHING) if page.tier == "trigram" else "",
            vector_coverage=coverage,
        )

    def _semantic(self, p: SearchParams) -> SemanticQuery | None:
        """The tier's part of the query, or None when it does not run: no embedder, an engine without
        vectors, a sorted search (not a relevance order), `semantic=off` (or absent, when the default is
        off), or an embedder that fails now (the search still answers, lexically, and says the tier did
        not run)."""
        wanted = p.semantic == "on" or (not p.semantic and self.semantic_default)
        if not wanted or p.sort or self.embedder is None or not isinstance(self.index, VectorTier):
            return None
        info = self.embedder.info
        try:
            vector = self.embedder.embed([p.q])[0]
        except Unavailable:
            return None
        return SemanticQuery(tuple(vector), model_key(info.model_id, info.dimension), self.fusion, self.lexical_share)

    def embed_pending(self, authority: str | None = None, *, limit: int | None = None) -> int:
        """Off the request path (the transcript indexer): vectors for the messages that have none of
        the configured model, as VectorTier.embed_pending. 0 when the tier is off or the engine keeps no
        vectors."""
        if self.embedder is None or not isinstance(self.index, VectorTier):
            return 0
        return self.index.embed_pending(self.embedder, authority=authority, limit=limit)

    def fill_session_docs(self, authority: str | None = None, *, limit: int | None = None) -> int:
        """Off the request path (the transcript indexer's schedule): the migration to session
        documents, as SessionDocuments.fill_session_docs; 0 for an engine without them."""
        if not isinstance(self.index, SessionDocuments):
            return 0
        return self.index.fill_session_docs(authority, limit=limit)

    def _pending(self, authority: str, project: str) -> list[PendingUpload]:
        """Uploads the answer may be missing: a URL still usable, or one that expired in the last
        UPLOAD_GRACE whose bytes arrived and wait for the indexer (one HEAD each, so an unused URL
        costs nothing past its expiry plus the grace and leaves the report when it expires)."""
        now = self.clock()
        live = utc_iso(now)
        out = []
        for upload in self.ledger.pending(authority, utc_iso(now - UPLOAD_GRACE)):
            if project and upload.project != project:
                continue
            if upload.expires_at and upload.expires_at <= live:
                if not self.archive.upload_exists(authority, upload.upload_id):
                    continue
            out.append(upload)
        return out

    def _empty(self, q: str) -> SearchEnvelope:
        return SearchEnvelope.empty(q, self.index.name)

    def _withhold(self, authority: str, current: str) -> Withhold | None:
        """The caller's live turn: from the newest message a person typed in its session. The rest of
        the session stays searchable. An unknown session withholds nothing (it may not be indexed yet)."""
        if not current:
            return None
        found = self.index.resolve_sessions(authority, current)
        if found.total == 0:
            return None
        if found.total > 1:
            raise AmbiguousRef(
                f"current_session {current!r} matches {found.total} sessions; give more of the id",
                field="current_session",
                candidates=found.ids,
                total=found.total,
            )
        start = self.index.turn_start(authority, found.ids[0])
        return Withhold(found.ids[0], start) if start is not None else None

    def _warnings(
        self,
        p: SearchParams,
        page: Any,
        results: list[SearchRef],
        reports: list[ScopeReport],
        stale: list[ScopeReport],
        pending: list[PendingUpload],
        coverage: VectorCoverage,
    ) -> list[Warning]:
        out: list[Warning] = []
        if results and not p.sort and page.newest:
            top, newest = parse_instant(results[0].iso), parse_instant(page.newest)
            if top is not None and newest is not None and newest - top > RECENCY_SKEW:
                out.append(
                    Warning(
                        WARN_RECENCY_SKEW,
                        f"the top hit is from {results[0].iso} but a match from {page.newest} exists; "
                        "add --sort newest to put the latest first",
                        {"newest": page.newest, "top": results[0].iso},
                    )
                )
        if page.total_is_lower_bound or page.total_sessions >= BROAD_QUERY_MATCHES:
            at_least = "at least " if page.total_is_lower_bound else ""
            out.append(
                Warning(
                    WARN_BROAD_QUERY,
                    f"{at_least}{page.total_sessions} conversations match; the one that matters may be buried: "
                    "add a rarer word, a project, or a date bound",
                    {"matches": page.total_sessions, "matches_is_lower_bound": page.total_is_lower_bound},
                )
            )
        if page.withheld:
            out.append(
                Warning(
                    WARN_CURRENT_TURN_EXCLUDED,
                    f"{page.withheld} matching message(s) from your own live turn were withheld",
                    {"excluded": page.withheld},
                )
            )
        if stale:
            waiting = sum(r.pending for r in stale)
            out.append(
                Warning(
                    WARN_SCOPE_INCOMPLETE,
                    f"{len(stale)} of {len(reports)} scope(s) are stale: {waiting} upload(s) are still waiting to be "
                    "indexed",
                    {
                        "scopes": len(reports),
                        "incomplete": len(stale),
                        "errored": 0,
                        "stale": [r.project for r in stale],
                        "pending": len(pending),
                    },
                )
            )
        projects = list(dict.fromkeys(r.project for r in results))
        if len(projects) >= 2:
            sample = projects[:PROJECT_SPREAD_SAMPLE]
            out.append(
                Warning(
                    WARN_PROJECT_SPREAD,
                    f"the hits span {len(projects)} projects ({', '.join(sample)}); narrow with --project",
                    {"projects": len(projects), "sample": sample},
                )
            )
        if coverage.ran and coverage.missing_msgs:
            out.append(
                Warning(
                    WARN_VECTOR_GAP,
                    f"the semantic tier saw vectors for {coverage.vectored_msgs} of {coverage.candidate_msgs} "
                    f"messages: {coverage.missing_msgs} are not embedded yet, and a match there by meaning alone "
                    "is not found; their words still are",
                    {
                        "candidate_msgs": coverage.candidate_msgs,
                        "vectored_msgs": coverage.vectored_msgs,
                        "missing_msgs": coverage.missing_msgs,
                    },
                )
            )
        if results:
            out.append(
                Warning(
                    WARN_RAW_HISTORY,
                    "these are raw transcripts of past conversations, not current truth: verify before acting",
                )
            )
        return out

    @staticmethod
    def oneline(envelope: SearchEnvelope) -> str:
        lines = [
            "\t".join((r.read_ref, r.iso, clean_oneline(r.project), clean_oneline(r.snippet))) for r in envelope.results
        ]
        return "".join(line + "\n" for line in lines)

    # ---- refs ---------------------------------------------------------------------------------------

    def _session_id(self, authority: str, prefix: str) -> str:
        found = self.index.resolve_sessions(authority, prefix)
        return _the_one(
            found,
            NotFound(f"session {prefix!r} not found", session=prefix),
            f"session prefix {prefix!r} is ambiguous: it matches {found.total} sessions; give more of the id",
            session=prefix,
        )

    def _anchor(self, authority: str, ref: ReadRef) -> tuple[SessionInfo, Row]:
        session_id = self._session_id(authority, ref.session)
        found = self.index.resolve_messages(authority, session_id, ref.uuid)
        missing = NotFound(f"no message {ref.uuid!r} in session {session_id}", session_id=session_id, uuid=ref.uuid)
        uuid = _the_one(
            found,
            old_numeric_ref(ref) if ref.numeric else missing,
            f"uuid prefix {ref.uuid!r} is ambiguous in session {session_id}: it matches {found.total} messages",
            session_id=session_id,
            uuid=ref.uuid,
        )
        row = self.index.message(authority, session_id, uuid)
        info = self.index.session(authority, session_id)
        if row is None or info is None:  # replaced between the two reads
            raise NotFound(f"no message {ref.uuid!r} in session {session_id}", session_id=session_id)
        return info, row

    # ---- read ---------------------------------------------------------------------------------------

    def read(self, principal: Principal, p: ReadParams) -> ReadResult:
        principal.require("caller", "worker")
        authority = principal.authority
        info, anchor = self._anchor(authority, p.ref)
        window = self.index.window(
            authority, info.session_id, anchor.pos, radius=p.radius, around=p.around, visibility=p.visibility
        )
        rows = window.rows
        centre = next((i for i, r in enumerate(rows) if r.pos == anchor.pos), None)
        if centre is None:  # `around` moved the window past the anchor: its middle is the focus
            centre = len(rows) // 2
        # The anchor is shown whole; neighbours are cut at NEIGHBOUR_CHARS.
        texts = [r.text if r.pos == anchor.pos else _cut(r.text, NEIGHBOUR_CHARS) for r in rows]
        fitted = fit_budget(texts, centre, p.budget)
        messages = [
            MessageView(uuid=r.uuid, role=r.role, kind=r.kind, timestamp=r.timestamp, text=fitted.texts[i])
            for i, r in enumerate(rows)
            if i in fitted.texts
        ]
        canonical_ref = self.index.printed_ref(authority, info.session_id, anchor.uuid)
        truncated = fitted.trimmed_msgs > 0
        next_command = ""
        if truncated:
            needed = sum(len(t) for t in texts)
            next_command = _command(
                "read",
                canonical_ref,
                budget=needed,
                more=p.more,
                around=p.around,
                window=p.radius if p.radius != (p.more + 1) * READ_WINDOW else 0,
                include_tools=p.visibility.tools,
                include_thinking=p.visibility.thinking,
            )
        return ReadResult(
            project=info.project,
            session_id=info.session_id,
            read_ref=_as_asked(p.ref, info.session_id),
            canonical_ref=canonical_ref,
            anchor_uuid=anchor.uuid,
            messages=messages,
            char_budget=p.budget,
            window=p.radius,
            before=window.before,
            after=window.after,
            truncated=truncated,
            trimmed_chars=fitted.trimmed_chars,
            trimmed_msgs=fitted.trimmed_msgs,
            next_command=next_command,
        )

    # ---- outline ------------------------------------------------------------------------------------

    def outline(self, principal: Principal, p: OutlineParams) -> OutlineResult:
        principal.require("caller", "worker")
        authority = principal.authority
        session_id = self._session_id(authority, p.session)
        info = self.index.session(authority, session_id)
        if info is None:
            raise NotFound(f"session {p.session!r} not found", session=p.session)
        # Bookends are the conversation: tool rows and envelopes never show there, include_tools or
        # not (the reference reads them from user/assistant rows and strips tool runs).
        bookend_visibility = Visibility(tools=False, thinking=p.visibility.thinking)
        rows = self.index.outline(
            authority, session_id, visibility=bookend_visibility, scan=OUTLINE_SCAN_ROWS, bookend=OUTLINE_BOOKEND
        )
        subagents = []
        if p.include_subagents:
            subagents = [
                SubagentInfo(s.session_id, s.message_count, s.summary or (s.agent or ""))
                for s in self.index.subagents(authority, info)
            ]
        return OutlineResult(
            project=info.project,
            session_id=info.session_id,
            iso=info.last_at,
            started_at=info.started_at,
            message_count=info.message_count,
            start=[_view(r, OUTLINE_TEXT_CHARS) for r in rows.start],
            end=[_view(r, OUTLINE_TEXT_CHARS) for r in rows.end],
            mid_count=rows.between,
            topics=[t.label for t in self.index.session_topics(authority, session_id)],
            subagents=subagents,
            summary=info.summary,
            parent_session=info.parent_session,
        )

    # ---- topics -------------------------------------------------------------------------------------

    def label_topic(self, principal: Principal, label: TopicLabel) -> TopicHit:
        principal.require("caller", "worker")
        authority = principal.authority
        info, row = self._anchor(authority, label.ref)
        self.archive.put_topic(authority, TopicEntry(info.session_id, row.uuid, label.label))
        self.index.add_topic(authority, info.session_id, row.uuid, label.label)
        return TopicHit(
            topic=label.label,
            project=info.project,
            read_ref=self.index.printed_ref(authority, info.session_id, row.uuid),
            session_id=info.session_id,
        )

    def topics(self, principal: Principal, p: TopicsParams) -> TopicsResult:
        principal.require("caller", "worker")
        authority = principal.authority
        from dovecote.recall.query import parse_query  # its tokenizer's patterns: only a search compiles them

        query = parse_query(p.q) if p.q.strip() else None
        rows: list[TopicRow]
        if p.q.strip() and query is None:
            rows, tagged = [], self.index.search_topics(authority, None, limit=1, project="")[1]
        else:
            rows, tagged = self.index.search_topics(authority, query, limit=p.limit, project=p.project)
        hits = [
            TopicHit(
                topic=r.label,
                project=r.session.project,
                read_ref=self.index.printed_ref(authority, r.session.session_id, r.start_uuid),
                session_id=r.session.session_id,
            )
            for r in rows
        ]
        note = "" if tagged else "no topics tagged yet: label a segment with POST /v1/recall/topics {ref, label}"
        return TopicsResult(query=p.q, hits=hits, note=note)

    # ---- rebuild ------------------------------------------------------------------------------------

    def rebuild(self, principal: Principal) -> Any:
        principal.require("admin")
        from dovecote.recall.rebuild import rebuild_authority

        return rebuild_authority(self.index, self.archive, principal.authority)


def _as_asked(ref: ReadRef, session_id: str) -> str:
    """The ref as the caller gave it (the reference echoes it): each session segment at the length
    given, in the real id's spelling, and the uuid part as given (lowercase)."""
    asked = ref.session.split("/")
    have = session_id.split("/")
    session = LEVEL_SEPARATOR.join(h[: len(a)] for a, h in zip(asked, have, strict=False))
    return f"{session}:{ref.uuid}"


def _path_selected(p: SearchParams, directory: str) -> bool:
    if p.include_path is not None and not p.include_path.search(directory):
        return False
    return not (p.exclude_path is not None and p.exclude_path.search(directory))


def _scope_reports(scopes: list[Any], pending: list[PendingUpload]) -> list[ScopeReport]:
    sessions: dict[str, int] = {}
    for row in scopes:
        sessions[row.project] = sessions.get(row.project, 0) + row.sessions
    waiting: dict[str, int] = {}
    for upload in pending:
        waiting[upload.project] = waiting.get(upload.project, 0) + 1
    reports = []
    for project in sorted(set(sessions) | set(waiting)):
        count = waiting.get(project, 0)
        reports.append(
            ScopeReport(
                project=project,
                status=SCOPE_STALE if count else SCOPE_SEARCHED,
                sessions=sessions.get(project, 0),
                pending=count,
                detail=f"{count} upload(s) waiting to be indexed" if count else "",
            )
        )
    return reports


def _the_one(found: Resolution, missing: DomainError, ambiguous: str, **facts: Any) -> str:
    """The one id a prefix resolved to: `missing` raised when none, AmbiguousRef (the facts, then
    the first candidates and their total) when several."""
    if found.total == 0:
        raise missing
    if found.total > 1:
        raise AmbiguousRef(ambiguous, **facts, candidates=found.ids, total=found.total)
    return found.ids[0]


def _search_command(p: SearchParams, limit: int) -> str:
    """The search again as asked (`p.raw`: every option the gate read, in its order), with `limit`."""
    options = {name: value for name, value in p.raw.items() if name != "q"}
    options["limit"] = limit
    return _command("search", p.q, **options)
