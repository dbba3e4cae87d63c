"""Notes janitor: consumes the notes table's stream and deletes body versions no note points to
any more (dovecote.notes.janitor). Powertools BatchProcessor reports partial batch failures, so one
failing record is retried alone instead of replaying the whole batch."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from dovecote.notes.janitor import BodyStore, unreferenced_body
from dovecote.platform import gc_pause
from dovecote.platform.observability import logger

processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


@lru_cache(maxsize=1)
def store() -> BodyStore:
    from dovecote.notes.dynamo import DynamoNoteStore
    from dovecote.platform import aws
    from dovecote.platform.settings import get_settings

    settings = get_settings()
    return DynamoNoteStore(
        table=settings.notes_table, bucket=settings.bucket, dynamodb=aws.client("dynamodb"), s3=aws.lazy_client("s3")
    )


def sweep_record(record: DynamoDBRecord) -> None:
    body = unreferenced_body(record.raw_event)
    if body is not None:
        store().delete_body_version(body.key, body.version)
        logger.info("deleted unreferenced body version", extra={"key": body.key, "version": body.version})


@gc_pause.resumes_gc
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    response = process_partial_response(event=event, record_handler=sweep_record, processor=processor, context=context)
    return dict(response)
