"""The IngestLedger on DynamoDB (the recall table; items in recall/records.py).

Round trips: add 1 (PutItem), get 1 (GetItem, strongly consistent), fail 1 (UpdateItem, only if the
entry exists), clear 1 (DeleteItem), pending 1 per page of 1 MB (Query on the authority's partition,
strongly consistent; expired and failed entries are filtered here).
Consistency: an entry is written before its upload URL is returned and deleted after the upload is
indexed, so a search that reads the ledger after the URL exists reports the scope stale until the
transcript is searchable.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from dovecote.platform.aws import aws_error_code
from dovecote.platform.dynamo import bind, pynamodb_errors, unwrap
from dovecote.recall.ports import PendingUpload
from dovecote.recall.records import UPLOAD_PREFIX, UploadRecord, ledger_partition

# DynamoDB's TTL tidies entries a day after their URL expired: the indexer still needs the entry of
# an upload that landed in the URL's last second (the search stops counting it at expiry).
TTL_GRACE_SECONDS = 24 * 3600


def _epoch(instant: str) -> int | None:
    try:
        return int(datetime.fromisoformat(instant).timestamp()) + TTL_GRACE_SECONDS
    except ValueError:
        return None


def _upload(record: UploadRecord) -> PendingUpload:
    return PendingUpload(
        upload_id=record.sk.removeprefix(UPLOAD_PREFIX),
        format=record.format,
        project=record.project or "",
        project_folder=record.project_folder or "",
        created_at=record.created_at,
        expires_at=record.expires_at,
        status=record.status,
        error=record.error or "",
    )


class DynamoIngestLedger:
    def __init__(self, *, table: str, dynamodb: Any) -> None:
        self._model = bind(UploadRecord, table=table, client=dynamodb)

    def add(self, authority: str, upload: PendingUpload) -> None:
        record = self._model(
            ledger_partition(authority),
            UPLOAD_PREFIX + upload.upload_id,
            format=upload.format,
            project=upload.project,
            project_folder=upload.project_folder,
            created_at=upload.created_at,
            expires_at=upload.expires_at,
            status=upload.status,
            error=upload.error,
            ttl=_epoch(upload.expires_at),
        )
        with pynamodb_errors(write=True):
            record.save()

    def get(self, authority: str, upload_id: str) -> PendingUpload | None:
        with pynamodb_errors(write=False):
            try:
                record = self._model.get(ledger_partition(authority), UPLOAD_PREFIX + upload_id, consistent_read=True)
            except self._model.DoesNotExist:
                return None
        return _upload(record)

    def fail(self, authority: str, upload_id: str, error: str) -> None:
        from pynamodb.exceptions import UpdateError

        record = self._model(ledger_partition(authority), UPLOAD_PREFIX + upload_id)
        try:
            record.update(
                actions=[self._model.status.set("failed"), self._model.error.set(error[:1000])],
                condition=self._model.pk.exists(),
            )
        except UpdateError as exc:
            if aws_error_code(unwrap(exc)) == "ConditionalCheckFailedException":
                return  # already cleared: nothing to mark
            with pynamodb_errors(write=True):
                raise

    def clear(self, authority: str, upload_id: str) -> None:
        record = self._model(ledger_partition(authority), UPLOAD_PREFIX + upload_id)
        with pynamodb_errors(write=True):
            record.delete()

    def pending(self, authority: str, now: str) -> list[PendingUpload]:
        with pynamodb_errors(write=False):
            records = list(
                self._model.query(
                    ledger_partition(authority),
                    self._model.sk.startswith(UPLOAD_PREFIX),
                    consistent_read=True,
                )
            )
        uploads = [_upload(r) for r in records]
        return [u for u in uploads if u.status == "pending" and (not u.expires_at or u.expires_at > now)]
