"""Recall API function: parse → call RecallService → return a model. No rules here.

Refs and sessions travel in the path: a subagent thread's level separator is printed `~` (a `/`
would end the path segment); both spellings are accepted.
"""

from __future__ import annotations

from dataclasses import asdict
from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from dovecote.platform.http import JSON, current_principal, lambda_entry, new_resolver, responses
from dovecote.platform.schema import DATE_PATTERN, OFFSET_PATTERN, TIME_PATTERN, QueryInt, bounded, one_of
from dovecote.recall.model import (
    MAX_PROJECT_CHARS,
    MAX_QUERY_CHARS,
    MAX_READ_BUDGET,
    MAX_READ_RADIUS,
    MAX_SEARCH_LIMIT,
    MAX_SOURCE_CHARS,
    MAX_TOPICS_LIMIT,
    MIN_READ_BUDGET,
    RANKERS,
    READ_WINDOW,
    ROLES,
    SEMANTIC_SWITCH,
    SORTS,
    gate_outline,
    gate_read,
    gate_search,
    gate_topic_label,
    gate_topics,
)
from dovecote.recall.patterns import MAX_PATTERN_CHARS, MAX_PATTERN_PROGRAM
from functions.recall_api.models import (
    IngestOut,
    OutlineOut,
    ReadOut,
    RebuildOut,
    SearchEnvelopeOut,
    TopicBody,
    TopicHitOut,
    TopicsOut,
    TranscriptBody,
    TranscriptCheckBody,
    TranscriptCheckOut,
    TranscriptUploadBody,
    TranscriptUploadOut,
)

if TYPE_CHECKING:
    from dovecote.recall.digests import TranscriptCheck
    from dovecote.recall.service import RecallService

app = new_resolver()


def text(limit: int) -> dict[str, Any]:
    """Free text: no control characters but tab, bounded."""
    return {"pattern": r"^[^\x00-\x08\x0a-\x1f\x7f]*$", "maxLength": limit}


SESSION = r"[A-Za-z0-9._-]+([/~][A-Za-z0-9._-]+)*"
# The ref grammar: <session8>:<uuid8> (longer prefixes and a full dashed uuid too); a ref naming
# nothing is a 404, and an all-digit uuid part matching nothing is the reference's "old numeric ref" (400).
# The uuid part documented is hex with at least one letter, at most 36 characters: an all-digit part
# is accepted when it matches a message, and otherwise is the reference's "old numeric ref" (400).
UUID_PART = "[0-9]{0,17}[a-fA-F][0-9a-fA-F-]{0,18}"
REF = {"pattern": f"^(ref=)?{SESSION}:{UUID_PART}$"}
INSTANT_OR_DATE = {
    "pattern": f"^$|^{DATE_PATTERN}({TIME_PATTERN}(\\.[0-9]{{1,6}})?{OFFSET_PATTERN})?$",
}
# Not `format: regex` (that is ECMA-262's dialect): the server takes RE2, the reference's Go regexp.
PATH_PATTERN = text(MAX_PATTERN_CHARS)
PATH_PATTERN_DOC = (
    f"an RE2 regular expression (Go regexp syntax: no backreferences or look-around), searched in the "
    f"working directory; at most {MAX_PATTERN_CHARS} characters and {MAX_PATTERN_PROGRAM} RE2 instructions"
)
TEXT = "text/plain; charset=utf-8"


@lru_cache(maxsize=1)
def service() -> RecallService:
    """Composition root: SQLite FTS5 or OpenSearch by settings (dovecote.recall.engines), the S3
    archive and the DynamoDB ledger; wired on the first request of the container."""
    from dovecote.platform.settings import get_settings
    from dovecote.recall.engines import recall_service

    return recall_service(get_settings())


@lru_cache(maxsize=1)
def checker() -> TranscriptCheck:
    """A transcript check's own composition root: `recall push` starts with a check, and it needs
    neither the search engine nor the archive."""
    from dovecote.platform.settings import get_settings
    from dovecote.recall.engines import transcript_check

    return transcript_check(get_settings())


@app.post("/v1/transcripts", tags=["recall"], responses=responses(200, IngestOut, 400, 401, 403, 413, 429, 503))
def ingest(body: Annotated[TranscriptBody, Body()]) -> IngestOut:
    """Index a transcript: re-ingesting a session replaces it; an unchanged file is skipped."""
    result = service().ingest(current_principal(app), body.model_dump(exclude_none=True))
    return IngestOut.model_validate(asdict(result))


@app.post(
    "/v1/transcripts/uploads", tags=["recall"], responses=responses(200, TranscriptUploadOut, 400, 401, 403, 429, 503)
)
def create_upload(body: Annotated[TranscriptUploadBody, Body()]) -> TranscriptUploadOut:
    """A presigned PUT for a transcript file; it is indexed asynchronously, and searches report its
    scope stale until it is."""
    upload = service().create_upload(current_principal(app), body.model_dump(exclude_none=True))
    return TranscriptUploadOut.model_validate(asdict(upload))


@app.post(
    "/v1/transcripts/check", tags=["recall"], responses=responses(200, TranscriptCheckOut, 400, 401, 403, 429, 503)
)
def check(body: Annotated[TranscriptCheckBody, Body()]) -> TranscriptCheckOut:
    """Which of these transcript files (by SHA-256) this authority has not ingested: what `recall push`
    sends. A server started afresh, or another authority, lacks them all."""
    unknown = checker().unknown_transcripts(current_principal(app), body.model_dump())
    return TranscriptCheckOut(unknown=unknown)


@app.get(
    "/v1/recall/search",
    tags=["recall"],
    responses={
        **responses(200, SearchEnvelopeOut, 400, 401, 403, 429, 503),
        200: {
            "description": "the SearchEnvelope, or one line per hit with format=oneline",
            "content": {"application/json": {"model": SearchEnvelopeOut}, TEXT: {"schema": {"type": "string"}}},
        },
    },
)
def search(
    q: Annotated[str, Query(json_schema_extra=text(MAX_QUERY_CHARS))] = "",
    limit: Annotated[QueryInt | None, Query(json_schema_extra=bounded(0, MAX_SEARCH_LIMIT))] = None,
    role: Annotated[str, Query(json_schema_extra=one_of("", *ROLES))] = "",
    sort: Annotated[
        str, Query(json_schema_extra=one_of(*SORTS), description="absent (relevance), newest or oldest")
    ] = "",
    since: Annotated[str, Query(json_schema_extra=INSTANT_OR_DATE, description="inclusive date or instant")] = "",
    before: Annotated[
        str, Query(json_schema_extra=INSTANT_OR_DATE, description="inclusive: a date or an instant")
    ] = "",
    min_messages: Annotated[QueryInt | None, Query(json_schema_extra=bounded(0, 10**9))] = None,
    project: Annotated[str, Query(json_schema_extra=text(MAX_PROJECT_CHARS))] = "",
    source: Annotated[str, Query(json_schema_extra=text(MAX_SOURCE_CHARS))] = "",
    include_path: Annotated[str, Query(json_schema_extra=PATH_PATTERN, description=PATH_PATTERN_DOC)] = "",
    exclude_path: Annotated[str, Query(json_schema_extra=PATH_PATTERN, description=PATH_PATTERN_DOC)] = "",
    current_session: Annotated[
        str,
        Query(
            json_schema_extra={"anyOf": [text(7), {"pattern": f"^{SESSION}$", "minLength": 8, "maxLength": 400}]},
            description="your live session: the id, or a prefix of 8 characters or more (a shorter value is "
            "ignored, as in the reference: it would name too many sessions)",
        ),
    ] = "",
    include_tools: Annotated[bool, Query()] = False,
    include_subagents: Annotated[
        bool, Query(description="also search subagent threads (found only when asked for, as in the reference)")
    ] = False,
    output: Annotated[
        str, Query(alias="format", json_schema_extra=one_of("", "json", "oneline"), description="json or oneline")
    ] = "",
    ranker: Annotated[
        str,
        Query(
            json_schema_extra=one_of("", *RANKERS),
            description="session-doc by default; or session, top2, message, passage, fused",
        ),
    ] = "",
    semantic: Annotated[
        str,
        Query(
            json_schema_extra=one_of("", *SEMANTIC_SWITCH),
            description="the semantic tier (vectors fused with the words) for this relevance search: on or off; "
            "absent: the deployment's default. vector_coverage says whether it ran",
        ),
    ] = "",
) -> Response[SearchEnvelopeOut | str]:
    """Search transcripts: ranked refs, one per session, with warnings and a completeness report (or
    one line per result with `format=oneline`)."""
    params = gate_search(
        q=q,
        limit=limit,
        role=role,
        sort=sort,
        since=since,
        before=before,
        min_messages=min_messages,
        project=project,
        source=source,
        include_path=include_path,
        exclude_path=exclude_path,
        current_session=current_session,
        include_tools=include_tools,
        include_subagents=include_subagents,
        format=output,
        ranker=ranker,
        semantic=semantic,
    )
    envelope = service().search(current_principal(app), params)
    if params.oneline:
        return Response(status_code=200, content_type=TEXT, body=service().oneline(envelope))
    return Response(status_code=200, content_type=JSON, body=SearchEnvelopeOut.model_validate(asdict(envelope)))


@app.get("/v1/recall/read/<ref>", tags=["recall"], responses=responses(200, ReadOut, 400, 401, 403, 404, 429, 503))
def read(
    ref: Annotated[str, Path(json_schema_extra=REF)],
    budget: Annotated[
        QueryInt | None,
        Query(
            json_schema_extra=bounded(MIN_READ_BUDGET, MAX_READ_BUDGET),
            description="characters; absent: no cap. The anchor is always shown: below the marker's length it is "
            "cut to the budget and the marker overshoots it",
        ),
    ] = None,
    more: Annotated[
        QueryInt | None,
        Query(
            json_schema_extra=bounded(0, MAX_READ_RADIUS // READ_WINDOW - 1),
            description="level n widens the radius to (n + 1) × 8",
        ),
    ] = None,
    around: Annotated[
        QueryInt | None,
        Query(json_schema_extra=bounded(-(10**9), 10**9), description="re-centre N messages after the anchor"),
    ] = None,
    window: Annotated[
        QueryInt | None, Query(json_schema_extra=bounded(0, MAX_READ_RADIUS), description="an explicit radius")
    ] = None,
    include_tools: Annotated[bool, Query()] = False,
    include_thinking: Annotated[bool, Query()] = False,
) -> ReadOut:
    """Read a bounded window of messages around a ref (`<session8>:<uuid8>`), trimmed to `budget`
    characters, never silently: the anchor first, then neighbours outward."""
    params = gate_read(
        ref,
        budget=budget,
        more=more,
        around=around,
        window=window,
        include_tools=include_tools,
        include_thinking=include_thinking,
    )
    return ReadOut.model_validate(asdict(service().read(current_principal(app), params)))


@app.get(
    "/v1/recall/outline/<session>", tags=["recall"], responses=responses(200, OutlineOut, 400, 401, 403, 404, 429, 503)
)
def outline(
    session: Annotated[str, Path(json_schema_extra={"pattern": f"^(ref=)?{SESSION}(:[^:\\s]+)?$"})],
    include_tools: Annotated[bool, Query()] = False,
    include_thinking: Annotated[bool, Query()] = False,
    include_subagents: Annotated[bool, Query(description="list the session's subagent threads")] = False,
) -> OutlineOut:
    """Outline a session: the first and last four displayable messages, how many lie between,
    topic labels and subagent threads."""
    params = gate_outline(
        session, include_tools=include_tools, include_thinking=include_thinking, include_subagents=include_subagents
    )
    return OutlineOut.model_validate(asdict(service().outline(current_principal(app), params)))


@app.get("/v1/recall/topics", tags=["recall"], responses=responses(200, TopicsOut, 400, 401, 403, 429, 503))
def topics(
    q: Annotated[str, Query(json_schema_extra=text(MAX_QUERY_CHARS))] = "",
    limit: Annotated[QueryInt | None, Query(json_schema_extra=bounded(0, MAX_TOPICS_LIMIT))] = None,
    project: Annotated[str, Query(json_schema_extra=text(MAX_PROJECT_CHARS))] = "",
) -> TopicsOut:
    """Search the topic layer only: labelled segments ranked globally, one global limit."""
    result = service().topics(current_principal(app), gate_topics(q=q, limit=limit, project=project))
    return TopicsOut.model_validate(asdict(result))


@app.post("/v1/recall/topics", tags=["recall"], responses=responses(200, TopicHitOut, 400, 401, 403, 404, 429, 503))
def label_topic(body: Annotated[TopicBody, Body()]) -> TopicHitOut:
    """Label the segment that starts at `ref`."""
    hit = service().label_topic(current_principal(app), gate_topic_label(body.ref, body.label))
    return TopicHitOut.model_validate(asdict(hit))


@app.post("/v1/recall/rebuild", tags=["recall"], responses=responses(200, RebuildOut, 401, 403, 429, 503))
def rebuild() -> RebuildOut:
    """Admin: re-create the authority's index from the archived transcripts and topic labels."""
    return RebuildOut.model_validate(asdict(service().rebuild(current_principal(app))))


handler = lambda_entry(app, service, checker)
