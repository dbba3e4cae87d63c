"""Transcript indexer: consumes the queue S3 notifies when a transcript upload lands under
`uploads/transcripts/<authority>/<upload id>`. For each object it reads the file, parses it, archives it, indexes
it and clears the ledger entry (RecallService.index_upload, safe to repeat). Powertools
BatchProcessor reports partial batch failures, so one failing upload is retried alone; S3's
`s3:TestEvent` and keys outside `uploads/transcripts/` are acknowledged and ignored.

The semantic tier's embedding runs here, off the request path, after the lexical index is written
(RecallService.embed_pending: nothing when the embedder is off or the engine keeps no vectors). A
scheduled event embeds whatever is still pending in every authority (the local runtime schedules it
while an embedder is on: transcripts posted inline never pass through the queue). An embedder failure
is logged and does not fail the upload: it is indexed, and the next run embeds what is left.

The scheduled event also writes the session documents an index made before them lacks
(RecallService.fill_session_docs: the OpenSearch migration, DOCUMENTS_LIMIT per run; SQLite migrates
when the database is opened).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from dovecote.platform import gc_pause
from dovecote.platform.errors import Unavailable
from dovecote.platform.observability import logger
from dovecote.recall.archive import parse_upload_key
from dovecote.recall.service import RecallService

processor = BatchProcessor(event_type=EventType.SQS)


@lru_cache(maxsize=1)
def service() -> RecallService:
    from dovecote.platform.settings import get_settings
    from dovecote.recall.engines import recall_service

    return recall_service(get_settings())


def uploads_in(body: str) -> list[tuple[str, str]]:
    """(authority, upload id) for every created object an S3 event notification names."""
    event = json.loads(body)
    found = []
    for record in event.get("Records") or []:
        if not str(record.get("eventName", "")).startswith("ObjectCreated"):
            continue
        key = unquote_plus(((record.get("s3") or {}).get("object") or {}).get("key") or "")
        parsed = parse_upload_key(key)
        if parsed is not None:
            found.append(parsed)
    return found


def index_record(record: SQSRecord) -> None:
    for authority, upload_id in uploads_in(record.body):
        result = service().index_upload(authority, upload_id)
        logger.info(
            "transcript upload processed",
            extra={
                "authority": authority,
                "upload_id": upload_id,
                "session_id": result.session_id if result else None,
                "messages": result.messages_indexed if result else 0,
                "unchanged": result.unchanged if result else None,
            },
        )
        embed(authority)


# A scheduled backfill embeds at most this many messages per run: a large backlog is worked down an
# hour at a time instead of timing out the function (and firing its error alarm) every hour.
BACKFILL_LIMIT = 5_000


def embed(authority: str | None, limit: int | None = None) -> int:
    try:
        embedded = service().embed_pending(authority, limit=limit)
    except Unavailable as exc:
        logger.warning("embedding failed; the messages stay pending", extra={"authority": authority, "code": exc.code})
        return 0
    if embedded:
        logger.info("messages embedded", extra={"authority": authority, "messages": embedded})
    return embedded


# The migration to session documents (an index made before them) writes at most this many per run.
DOCUMENTS_LIMIT = 2_000


def fill_documents(limit: int | None = None) -> int:
    try:
        written = service().fill_session_docs(limit=limit)
    except Unavailable as exc:
        logger.warning("session documents not written; the next run retries", extra={"code": exc.code})
        return 0
    if written:
        logger.info("session documents written", extra={"documents": written})
    return written


@gc_pause.resumes_gc
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if event.get("detail-type") == "Scheduled Event":
        return {"documents": fill_documents(DOCUMENTS_LIMIT), "embedded": embed(None, BACKFILL_LIMIT)}
    response = process_partial_response(event=event, record_handler=index_record, processor=processor, context=context)
    return dict(response)
