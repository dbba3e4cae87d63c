"""HTTP shapes of the recall routes (docs/services/recall.md), with the reference's JSON field names. Types only:
the rules live in dovecote.recall, so the request models stay permissive where the domain gate
decides (it gives the reference's messages)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field, StrictStr

from dovecote.platform.schema import EdgeModel, RequestModel, instant_pattern, one_of, with_schema
from dovecote.recall.digests import MAX_CHECK_DIGESTS
from dovecote.recall.model import (
    FORMATS,
    KINDS,
    MAX_GENERIC_MESSAGES,
    MAX_PROJECT_CHARS,
    MAX_SOURCE_CHARS,
    MAX_TOPIC_LABEL_CHARS,
    ROLES,
)


class _Strict(RequestModel):
    pass


TEXT_LINE: dict[str, Any] = {"pattern": r"^[^\x00-\x08\x0a-\x1f]*$"}
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f]")


def _one_line(value: str) -> str:
    """What TEXT_LINE declares, enforced for the project fields: a project name is one line of
    text (the recall gate keeps what it is given; a newline in it would forge lines wherever it is
    printed, as in the oneline search format)."""
    found = _CONTROL.search(value)
    if found:
        raise ValueError(f"must not contain control characters other than tab (found {found.group()!r})")
    return value


# A project or project folder name as the body gives it.
ProjectText = Annotated[StrictStr, AfterValidator(_one_line)]
INSTANT: dict[str, Any] = {"pattern": instant_pattern(9)}


class TranscriptMessageBody(_Strict):
    uuid: StrictStr = Field(json_schema_extra={"minLength": 1, "maxLength": 200, **TEXT_LINE})
    role: StrictStr = Field(json_schema_extra=one_of(*ROLES))
    text: StrictStr
    timestamp: StrictStr = Field(json_schema_extra=INSTANT)
    kind: StrictStr | None = Field(default=None, json_schema_extra=one_of(*KINDS))
    parent_uuid: StrictStr | None = Field(default=None, json_schema_extra={"maxLength": 200, **TEXT_LINE})
    subagent: StrictStr | None = Field(default=None, json_schema_extra={"pattern": r"^[A-Za-z0-9._-]{1,200}$"})


class TranscriptBody(_Strict):
    """Either the generic form {source, project, session_id, messages} or a JSONL file
    {format: claude-code-jsonl | codex-jsonl, project?, jsonl}."""

    model_config = with_schema(
        {
            "oneOf": [
                {
                    "required": ["format", "jsonl"],
                    "not": {"anyOf": [{"required": [f]} for f in ("source", "session_id", "messages")]},
                },
                {
                    "required": ["source", "session_id", "messages"],
                    "not": {
                        "anyOf": [{"required": ["format"]}, {"required": ["jsonl"]}, {"required": ["project_folder"]}]
                    },
                },
            ]
        }
    )
    format: StrictStr | None = Field(default=None, json_schema_extra=one_of(*FORMATS))
    jsonl: StrictStr | None = Field(default=None, description="the whole transcript file (up to ~5 MB; else upload)")
    project: ProjectText | None = Field(default=None, json_schema_extra={"maxLength": MAX_PROJECT_CHARS, **TEXT_LINE})
    project_folder: ProjectText | None = Field(
        default=None,
        json_schema_extra={"maxLength": MAX_PROJECT_CHARS, **TEXT_LINE},
        description="a ~/.claude/projects/<folder> name, used when the file names no working directory",
    )
    source: StrictStr | None = Field(
        default=None, json_schema_extra={"minLength": 1, "maxLength": MAX_SOURCE_CHARS, "pattern": r"^\S.*$"}
    )
    session_id: StrictStr | None = Field(default=None, json_schema_extra={"pattern": r"^[A-Za-z0-9._-]{1,200}$"})
    messages: list[TranscriptMessageBody] | None = Field(
        default=None, json_schema_extra={"maxItems": MAX_GENERIC_MESSAGES}
    )


class IngestedSessionOut(EdgeModel):
    session_id: str
    messages: int
    unchanged: bool
    parent_session: str | None = None


class ParseWarningOut(EdgeModel):
    code: str
    line: int
    message: str


class IngestOut(EdgeModel):
    session_id: str
    messages_indexed: int
    sessions: list[IngestedSessionOut]
    unchanged: bool
    sha256: str
    lines: int
    malformed: int
    skipped: int
    warnings: list[ParseWarningOut]


class TranscriptUploadBody(_Strict):
    format: StrictStr = Field(json_schema_extra=one_of(*FORMATS))
    project: ProjectText | None = Field(default=None, json_schema_extra={"maxLength": MAX_PROJECT_CHARS, **TEXT_LINE})
    project_folder: ProjectText | None = Field(
        default=None, json_schema_extra={"maxLength": MAX_PROJECT_CHARS, **TEXT_LINE}
    )


class TranscriptUploadOut(EdgeModel):
    upload_id: str
    upload_url: str
    expires_at: str


class TranscriptCheckBody(_Strict):
    sha256: list[StrictStr] = Field(
        description="SHA-256 digests (hex) of transcript files",
        json_schema_extra={
            "minItems": 1,
            "maxItems": MAX_CHECK_DIGESTS,
            "items": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        },
    )


class TranscriptCheckOut(EdgeModel):
    unknown: list[str] = Field(description="the digests asked about that this authority has not ingested")


class WarningOut(EdgeModel):
    code: str
    message: str
    facts: dict[str, Any] = {}


class SearchRefOut(EdgeModel):
    project: str
    session_id: str
    iso: str
    snippet: str
    read_ref: str
    topic: str = ""


class ScopeReportOut(EdgeModel):
    project: str
    status: str
    sessions: int
    pending: int = 0
    detail: str = ""


class VectorCoverageOut(EdgeModel):
    ran: bool = Field(description="whether the semantic tier ran (all counts are 0 when it did not)")
    candidate_msgs: int = Field(description="conversation messages the search's filters select")
    vectored_msgs: int = Field(description="of those, the ones with a vector of the configured model")
    missing_msgs: int = Field(description="not embedded yet: a match there by meaning alone is not found")


class SearchEnvelopeOut(EdgeModel):
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
    vector_coverage: VectorCoverageOut


class MessageOut(EdgeModel):
    uuid: str
    role: str
    kind: str
    timestamp: str
    text: str


class ReadOut(EdgeModel):
    project: str
    session_id: str
    read_ref: str = Field(description="the ref as asked")
    canonical_ref: str = Field(description="the shortest unique form of the ref, as search prints it")
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


class SubagentOut(EdgeModel):
    session_id: str
    message_count: int
    title: str = ""


class OutlineOut(EdgeModel):
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
    ref: StrictStr = Field(
        json_schema_extra={
            "pattern": r"^(ref=)?[A-Za-z0-9._-]+([/~][A-Za-z0-9._-]+)*:[0-9]{0,17}[a-fA-F][0-9a-fA-F-]{0,18}$"
        },
        description="where the segment starts: <session8>:<uuid8>",
    )
    label: StrictStr = Field(
        json_schema_extra={
            "maxLength": MAX_TOPIC_LABEL_CHARS,
            "pattern": r"^[^\x00-\x1f]*[^\s\x00-\x1f][^\x00-\x1f]*$",
        }
    )


class TopicHitOut(EdgeModel):
    topic: str
    project: str
    read_ref: str
    session_id: str


class TopicsOut(EdgeModel):
    query: str
    hits: list[TopicHitOut]
    note: str = ""


class RebuildOut(EdgeModel):
    transcripts: int
    sessions: int
    messages: int
    topics: int
    failed: list[dict[str, str]]
