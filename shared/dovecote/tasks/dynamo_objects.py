"""The S3 side of the DynamoDB TaskStore: message parts and artifact payloads over the inline size,
content-addressed (`parts/<authority>/<sha256>`, `artifacts/<authority>/<sha256>`) and written with
If-None-Match: * before the transaction that references them; presigned artifact uploads
(`uploads/artifacts/<authority>/<sha256>`, hashed and moved into place by staging); download URLs."""

from __future__ import annotations

import hashlib

from dovecote.platform.aws import aws_error_code, aws_errors
from dovecote.platform.dynamo import committing
from dovecote.platform.errors import CommitUnknown, CorruptStore, Unavailable
from dovecote.platform.uploads import PresignedUpload, presign_put
from dovecote.tasks.dynamo_items import TaskItems, artifact_identity, artifact_pk
from dovecote.tasks.model import ARTIFACT_INLINE_ANSWER, Artifact, Message, PayloadInput
from dovecote.tasks.storage import INLINE_PART_BYTES, check_upload, no_upload, upload_too_large

READ_CHUNK = 1024 * 1024


def upload_key(authority: str, sha256: str) -> str:
    return f"uploads/artifacts/{authority}/{sha256}"


class TaskObjects:
    """The store's S3 side, over the table's item mapping (its bucket and client, its sealing)."""

    def __init__(self, items: TaskItems) -> None:
        self.items = items

    def _part_key(self, authority: str, digest: str) -> str:
        return f"parts/{authority}/{digest}"

    def _artifact_key(self, authority: str, sha256_hex: str) -> str:
        return f"artifacts/{authority}/{sha256_hex}"

    def _put_object(self, key: str, data: bytes) -> None:
        """One conditional PutObject (sealed at rest). Content-addressed: an object already at `key`
        holds exactly these bytes, so a 412 is success (a retry writes nothing new)."""
        from botocore.exceptions import ClientError

        try:
            with committing():
                self.items.s3.put_object(
                    Bucket=self.items.bucket, Key=key, Body=data, IfNoneMatch="*", **self.items.protector.s3_put_args()
                )
        except CommitUnknown as exc:
            cause = exc.__cause__
            if not (isinstance(cause, ClientError) and aws_error_code(cause) in ("PreconditionFailed", "412")):
                raise

    def store_parts(self, authority: str, messages: tuple[Message, ...]) -> None:
        for message in messages:
            for part in message.parts:
                if len(part.data) > INLINE_PART_BYTES:
                    self._put_object(self._part_key(authority, hashlib.sha256(part.data).hexdigest()), part.data)

    def store_payload(self, artifact: Artifact, payload: PayloadInput) -> bytes | None:
        """Inline bytes (sealed) for a small payload; else the payload is in S3 by digest (put
        here for an inline one, already moved there by `stage_artifact_upload` for an upload)."""
        if payload.data is None:
            return None
        if len(payload.data) <= INLINE_PART_BYTES:
            return self.items.protector.seal(payload.data, artifact_identity(artifact))
        key = self._artifact_key(artifact.authority, artifact.payload_digest.removeprefix("sha256:"))
        self._put_object(key, payload.data)
        return None

    def stage_artifact_upload(self, authority: str, sha256: str, max_bytes: int) -> int:
        from botocore.exceptions import ClientError

        source = upload_key(authority, sha256)
        try:
            with aws_errors(write=False):
                obj = self.items.s3.get_object(Bucket=self.items.bucket, Key=source)
        except Unavailable as exc:
            if isinstance(exc.__cause__, ClientError) and aws_error_code(exc.__cause__) in ("NoSuchKey", "404"):
                raise no_upload(sha256) from None
            raise
        stream = obj["Body"]
        digest = hashlib.sha256()
        size = 0
        try:
            if int(obj.get("ContentLength") or 0) > max_bytes:
                raise upload_too_large(max_bytes)
            with aws_errors(write=False):
                for chunk in stream.iter_chunks(READ_CHUNK):
                    digest.update(chunk)
                    size += len(chunk)
                    if size > max_bytes:  # never read past the limit + 1 chunk
                        raise upload_too_large(max_bytes)
        finally:
            stream.close()
        check_upload(sha256, digest.hexdigest())
        copy_source: dict[str, str] = {"Bucket": self.items.bucket, "Key": source}
        if obj.get("VersionId") and obj["VersionId"] != "null":
            copy_source["VersionId"] = obj["VersionId"]
        with aws_errors(write=True):
            self.items.s3.copy_object(
                Bucket=self.items.bucket,
                Key=self._artifact_key(authority, sha256),
                CopySource=copy_source,
                **self.items.protector.s3_put_args(),
            )
        return size

    def presign_artifact_upload(self, authority: str, size: int, sha256: str, expires_in: int) -> PresignedUpload:
        key = upload_key(authority, sha256)
        return presign_put(
            self.items.s3, bucket=self.items.bucket, key=key, size=size, sha256=sha256, expires_in=expires_in
        )

    def _download_url(self, key: str, expires_in: int) -> str:
        params = {"Bucket": self.items.bucket, "Key": key}
        return str(self.items.s3.generate_presigned_url("get_object", Params=params, ExpiresIn=expires_in))

    def part_url(self, authority: str, sha256: str, expires_in: int) -> str:
        return self._download_url(self._part_key(authority, sha256), expires_in)

    def artifact_url(self, artifact: Artifact, expires_in: int) -> str:
        key = self._artifact_key(artifact.authority, artifact.payload_digest.removeprefix("sha256:"))
        return self._download_url(key, expires_in)

    def artifact_content(self, authority: str, workspace: str, artifact: str) -> tuple[Artifact, bytes | None] | None:
        """The artifact and its plaintext payload: from the item (opened) when inline; from S3 when
        at most ARTIFACT_INLINE_ANSWER; else None (a download URL serves it). A payload that does
        not match the digest its record pins is never served."""
        (item,) = self.items.get_many([(self.items.artifacts, artifact_pk(authority, workspace, artifact), "-")])
        if item is None:
            return None
        found = self.items.artifact(item)
        if item.payload is not None:
            data = self.items.protector.open(bytes(item.payload), artifact_identity(found))
        elif found.payload_size <= ARTIFACT_INLINE_ANSWER:
            key = self._artifact_key(authority, found.payload_digest.removeprefix("sha256:"))
            with aws_errors(write=False):
                obj = self.items.s3.get_object(Bucket=self.items.bucket, Key=key)
                self.items.protector.check_s3(obj)
                data = obj["Body"].read()
        else:
            return found, None
        if "sha256:" + hashlib.sha256(data).hexdigest() != found.payload_digest:
            raise CorruptStore("an artifact payload does not match its digest", record="artifact")
        return found, bytes(data)
