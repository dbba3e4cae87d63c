"""Which SearchIndex answers: the one seam between the embedded engine and OpenSearch.

`DOVECOTE_OPENSEARCH_URL` set → the OpenSearch engine (`dovecote.recall.opensearch.OpenSearchIndex`;
imported only here and only then, so functions that never use it never load opensearch-py).
Otherwise SQLite FTS5 at `DOVECOTE_RECALL_SQLITE_PATH`, one engine per database per process (the
local runtime's API and indexer share it, `:memory:` included).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, cast

from dovecote.platform.settings import Settings

if TYPE_CHECKING:
    from dovecote.recall.digests import TranscriptCheck
    from dovecote.recall.ports import SearchIndex
    from dovecote.recall.service import RecallService


class IndexOnFirstUse:
    """The engine, opened when something first uses it. A recall function's first request may never
    search (a transcript check, an upload URL): it then loads no opensearch-py and builds no client
    (about a quarter of the floor on a cold start, bench/coldstart.py)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._index: SearchIndex | None = None
        self._lock = threading.Lock()

    def opened(self) -> SearchIndex:
        with self._lock:
            if self._index is None:
                self._index = open_search_index(self._settings)
            return self._index

    def __getattr__(self, name: str) -> Any:
        return getattr(self.opened(), name)


def open_search_index(settings: Settings) -> SearchIndex:
    if settings.opensearch_url:
        from dovecote.recall.opensearch import OpenSearchIndex

        return OpenSearchIndex.from_settings(settings)
    from dovecote.recall.sqlite import shared_index

    return shared_index(settings.recall_sqlite_path)


def recall_service(settings: Settings) -> RecallService:
    """The composition root shared by the recall API and the transcript indexer."""
    from dovecote.embedding.engines import open_embedder
    from dovecote.platform import aws
    from dovecote.recall.archive import S3Archive
    from dovecote.recall.digests import DynamoIngestedDigests
    from dovecote.recall.dynamo import DynamoIngestLedger
    from dovecote.recall.service import RecallService

    return RecallService(
        cast("SearchIndex", IndexOnFirstUse(settings)),
        S3Archive(bucket=settings.bucket, s3=aws.lazy_client("s3")),
        DynamoIngestLedger(table=settings.recall_table, dynamodb=aws.client("dynamodb")),
        presign_seconds=settings.presign_seconds,
        digests=DynamoIngestedDigests(table=settings.recall_table, dynamodb=aws.client("dynamodb")),
        embedder=open_embedder(settings),
    )


def transcript_check(settings: Settings) -> TranscriptCheck:
    """The composition root of a transcript check alone (the recall API's `POST /v1/transcripts/check`)."""
    from dovecote.platform import aws
    from dovecote.recall.digests import DynamoIngestedDigests, TranscriptCheck

    return TranscriptCheck(DynamoIngestedDigests(table=settings.recall_table, dynamodb=aws.client("dynamodb")))
