"""The TranscriptArchive on S3: the canonical copy of every transcript recall has indexed.

Layout (the service bucket):
- `transcripts/<authority>/<format>/<session>.<jsonl|json>`: the file as it was ingested, byte for
  byte, with metadata {format, project, project-folder (percent-encoded), sha256}. A re-ingest of the
  same session replaces the object (the bucket is versioned; older versions expire by lifecycle).
- `topics/<authority>/<session>/<start uuid>.json`: a topic label, {session_id, start_uuid, label}.
- `uploads/transcripts/<authority>/<upload id>`: where a presigned PUT lands. The bucket notifies the transcript
  indexer's queue for this prefix; the indexer archives, indexes and then deletes the upload.

Round trips: put 1 (PutObject), get 1 (GetObject: body and metadata), keys 1 per 1,000 objects
(ListObjectsV2), put_topic 1, topics 1 list per 1,000 + 1 GET each, presign 0 (signed locally),
read_upload 1, upload_exists 1 (HeadObject), delete_upload 1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, unquote

from dovecote.platform.aws import aws_error_code, aws_errors
from dovecote.platform.errors import NotFound, PayloadTooLarge, Unavailable
from dovecote.recall.memory import TRANSCRIPT_UPLOADS_PREFIX, archive_key, upload_key
from dovecote.recall.ports import ArchiveEntry, TopicEntry

# An upload is read whole into the indexer's memory; bigger files are refused, not truncated.
MAX_UPLOAD_BYTES = 256 * 1024 * 1024


def parse_upload_key(key: str) -> tuple[str, str] | None:
    """(authority, upload id) of an `uploads/transcripts/<authority>/<upload id>` key, else None."""
    if not key.startswith(TRANSCRIPT_UPLOADS_PREFIX):
        return None
    parts = key[len(TRANSCRIPT_UPLOADS_PREFIX) :].split("/")
    if len(parts) != 2 or not parts[0] or not parts[1]:
        return None
    return parts[0], parts[1]


class S3Archive:
    def __init__(self, *, bucket: str, s3: Any) -> None:
        self._bucket = bucket
        self._s3 = s3

    def put(self, authority: str, name: str, body: bytes, entry: ArchiveEntry) -> ArchiveEntry:
        key = archive_key(authority, name, entry.format)
        with aws_errors(write=True):
            self._s3.put_object(
                Bucket=self._bucket,
                Key=key,
                Body=body,
                Metadata={
                    "format": entry.format,
                    "project": quote(entry.project, safe=""),
                    "project-folder": quote(entry.project_folder, safe=""),
                    "sha256": entry.sha256,
                },
            )
        return ArchiveEntry(key, entry.format, entry.project, entry.project_folder, entry.sha256)

    def _list(self, prefix: str) -> Iterator[str]:
        paginator = self._s3.get_paginator("list_objects_v2")
        with aws_errors(write=False):
            for page in paginator.paginate(Bucket=self._bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    yield item["Key"]

    def keys(self, authority: str) -> Iterator[str]:
        yield from self._list(f"transcripts/{authority}/")

    def _get_object(self, key: str) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        try:
            with aws_errors(write=False):
                return dict(self._s3.get_object(Bucket=self._bucket, Key=key))
        except Unavailable as exc:
            if isinstance(exc.__cause__, ClientError) and aws_error_code(exc.__cause__) in ("NoSuchKey", "404"):
                raise NotFound("transcript not found", key=key) from None
            raise

    def get(self, authority: str, key: str) -> tuple[bytes, ArchiveEntry]:
        if not key.startswith(f"transcripts/{authority}/"):
            raise NotFound("transcript not found", key=key)
        obj = self._get_object(key)
        with aws_errors(write=False):
            body = obj["Body"].read()
        meta = obj.get("Metadata") or {}
        entry = ArchiveEntry(
            key=key,
            format=meta.get("format") or key.split("/")[2],
            project=unquote(meta.get("project", "")),
            project_folder=unquote(meta.get("project-folder", "")),
            sha256=meta.get("sha256", ""),
        )
        return body, entry

    def put_topic(self, authority: str, topic: TopicEntry) -> None:
        body = json.dumps({"session_id": topic.session_id, "start_uuid": topic.start_uuid, "label": topic.label})
        with aws_errors(write=True):
            self._s3.put_object(
                Bucket=self._bucket,
                Key=f"topics/{authority}/{topic.session_id}/{topic.start_uuid}.json",
                Body=body.encode("utf-8"),
                ContentType="application/json",
            )

    def topics(self, authority: str) -> Iterator[TopicEntry]:
        for key in self._list(f"topics/{authority}/"):
            obj = self._get_object(key)
            with aws_errors(write=False):
                data = json.loads(obj["Body"].read())
            yield TopicEntry(data["session_id"], data["start_uuid"], data["label"])

    def presign_upload(self, authority: str, upload_id: str, expires_in: int) -> str:
        return str(
            self._s3.generate_presigned_url(
                "put_object",
                Params={"Bucket": self._bucket, "Key": upload_key(authority, upload_id)},
                ExpiresIn=expires_in,
            )
        )

    def read_upload(self, authority: str, upload_id: str) -> bytes:
        try:
            obj = self._get_object(upload_key(authority, upload_id))
        except NotFound:
            raise NotFound("no upload found", upload_id=upload_id) from None
        size = int(obj.get("ContentLength") or 0)
        if size > MAX_UPLOAD_BYTES:
            raise PayloadTooLarge(
                f"transcript uploads are limited to {MAX_UPLOAD_BYTES} bytes", size=size, limit=MAX_UPLOAD_BYTES
            )
        with aws_errors(write=False):
            return bytes(obj["Body"].read())

    def upload_exists(self, authority: str, upload_id: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            with aws_errors(write=False):
                self._s3.head_object(Bucket=self._bucket, Key=upload_key(authority, upload_id))
        except Unavailable as exc:
            if isinstance(exc.__cause__, ClientError) and aws_error_code(exc.__cause__) in ("NoSuchKey", "404"):
                return False
            raise
        return True

    def delete_upload(self, authority: str, upload_id: str) -> None:
        with aws_errors(write=True):
            self._s3.delete_object(Bucket=self._bucket, Key=upload_key(authority, upload_id))
