"""HTTP shapes of the recall routes (API.md § Recall), with the seed's JSON field names. Types only:
the rules live in dovecote.recall, so the request models stay permissive where the domain gate
decides (it gives the seed's messages)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TranscriptMessageBody(_Strict):
    uuid: StrictStr
    role: StrictStr
    text: StrictStr
    timestamp: StrictStr
    kind: StrictStr | None = None
    parent_uuid: StrictStr | None = None
    subagent: StrictStr | None = None


class TranscriptBody(_Strict):
    """Either the generic form {source, project, session_id, messages} or a JSONL file
    {format: claude-code-jsonl | codex-jsonl, project?, jsonl}."""

    format: StrictStr | None = None
    jsonl: StrictStr | None = Field(default=None, description="the whole transcript file (up to ~5 MB; else upload)")
    project: StrictStr | None = None
    project_folder: StrictStr | None = Field(
        default=None, description="a ~/.claude/projects/<folder> name, used when the file names no working directory"
    )
    source: StrictStr | None = None
    session_id: StrictStr | None = None
    messages: list[TranscriptMessageBody] | None = None


class IngestedSessionOut(BaseModel):
    session_id: str
    messages: int
    unchanged: bool
    parent_session: str | None = None


class ParseWarningOut(BaseModel):
    code: str
    line: int
    message: str


class IngestOut(BaseModel):
    session_id: str
    messages_indexed: int
    sessions: list[IngestedSessionOut]
    unchanged: bool
    sha256: str
    lines: int
    malformed: int
    skipped: int
    warnings: list[ParseWarningOut]


class UploadBody(_Strict):
    format: StrictStr
    project: StrictStr | None = None
    project_folder: StrictStr | None = None


class UploadOut(BaseModel):
    upload_id: str
    upload_url: str
    expires_at: str


class WarningOut(BaseModel):
    code: str
    message: str
    facts: dict[str, Any] = {}


class SearchRefOut(BaseModel):
    project: str
    session_id: str
    iso: str
    snippet: str
    read_ref: str
    topic: str = ""


class ScopeReportOut(BaseModel):
    project: str
    status: str
    sessions: int
    pending: int = 0
    detail: str = ""


class SearchEnvelopeOut(BaseModel):
    query: str
    results: list[SearchRefOut]
    scopes_report: list[ScopeReportOut]
    complete: bool
    count: int
    total_matches: int
    total_is_lower_bound: bool
    has_more: bool
    next_command: str
    warnings: list[WarningOut]
    excluded_current_turn: int
    store: str
    store_note: str = ""


class MessageOut(BaseModel):
    uuid: str
    role: str
    kind: str
    timestamp: str
    text: str


class ReadOut(BaseModel):
    project: str
    session_id: str
    read_ref: str
    anchor_uuid: str
    messages: list[MessageOut]
    char_budget: int | None
    window: int
    before: int
    after: int
    truncated: bool
    trimmed_chars: int
    trimmed_msgs: int
    next_command: str


class SubagentOut(BaseModel):
    session_id: str
    message_count: int
    title: str = ""


class OutlineOut(BaseModel):
    project: str
    session_id: str
    iso: str
    started_at: str
    message_count: int
    start: list[MessageOut]
    end: list[MessageOut]
    mid_count: int
    topics: list[str]
    subagents: list[SubagentOut]
    summary: str = ""
    parent_session: str | None = None


class TopicBody(_Strict):
    ref: StrictStr = Field(description="where the segment starts: <session8>:<uuid8>")
    label: StrictStr


class TopicHitOut(BaseModel):
    topic: str
    project: str
    read_ref: str
    session_id: str


class TopicsOut(BaseModel):
    query: str
    hits: list[TopicHitOut]
    note: str = ""


class RebuildOut(BaseModel):
    transcripts: int
    sessions: int
    messages: int
    topics: int
    failed: list[dict[str, str]]
