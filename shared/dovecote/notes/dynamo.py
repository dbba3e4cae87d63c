"""The AWS NoteStore: bodies in S3, the listing index in DynamoDB.

Layout
- S3 `notes/<authority>/<ref>` holds the body. The bucket is versioned and the index item records
  the version it committed, so an upload or a failed Put that replaced the current S3 version can
  never change what Get returns.
- DynamoDB, one table, four items per note, all with sort key `ref`:
  - the note item, pk `a#<authority>`: coordinates, size, sha256, content type, the S3 version, and
    the body itself when it is at most INLINE_LIMIT, so Get is one GetItem;
  - three view items for the filters agents use, pk `k#h(authority, key)`,
    `r#h(authority, key, run)` and `n#h(authority, key, run, name)`, carrying the listing fields.
  The four are written (and deleted) in one TransactWriteItems. Views live in the base table rather
  than in GSIs because GSIs are only eventually consistent: here every list is a strongly consistent
  Query, so a Put that returned is listed at once, as the contract says.
- A filter without a key (author only, run only, or empty) queries the authority's note items and
  applies the rest with NoteFilter.matches: it reads every note of the authority.

Round trips: put 2 (PutObject, TransactWriteItems), get 1 (GetItem), list 1 per page (Query),
delete 2 (GetItem for the coordinates, TransactWriteItems). Bodies of deleted or replaced notes are
removed asynchronously by the janitor, version by version, from the table's stream.
The index is written last, so a failure before it leaves nothing listed, and a retry converges.
"""

from __future__ import annotations

import hashlib
import random
import time
from typing import Any

from dovecote.notes.model import (
    INLINE_LIMIT,
    NoteCoordinates,
    NoteFilter,
    NoteMeta,
    NotePage,
    StoredNote,
    ref_preimage,
    verify_upload,
)
from dovecote.platform.aws import aws_error_code, aws_errors
from dovecote.platform.errors import CommitUnknown, NotFound, Unavailable

LIST_ATTRIBUTES = ["ref", "key", "run", "name", "author", "size", "updated_at", "sha256", "content_type"]
# Under contention a transaction can be cancelled with TransactionConflict; a note Put or Delete is
# safe to repeat, so it is retried this many times before the caller sees 503.
TRANSACTION_ATTEMPTS = 3


def _partition(prefix: str, authority: str, *parts: str | int) -> str:
    # Length-prefixed like the Ref, so no coordinate can forge another partition.
    data = authority.encode()
    for part in parts:
        data += b"|" + ref_preimage(str(part), 0, "", "")
    return prefix + hashlib.sha256(data).hexdigest()[:40]


def note_partition(authority: str) -> str:
    return "a#" + authority


def view_partitions(authority: str, c: NoteCoordinates) -> list[str]:
    return [
        _partition("k#", authority, c.key),
        _partition("r#", authority, c.key, c.run),
        _partition("n#", authority, c.key, c.run, c.name),
    ]


def blob_key(authority: str, ref: str) -> str:
    return f"notes/{authority}/{ref}"


class DynamoNoteStore:
    def __init__(self, *, table: str, bucket: str, dynamodb: Any, s3: Any) -> None:
        self._table = table
        self._bucket = bucket
        self._ddb = dynamodb
        self._s3 = s3

    # ---- writes -------------------------------------------------------------------------------

    def put(self, authority: str, meta: NoteMeta, body: bytes) -> NoteMeta:
        with aws_errors(write=True):
            response = self._s3.put_object(
                Bucket=self._bucket,
                Key=blob_key(authority, meta.ref),
                Body=body,
                ContentType=meta.content_type,
                Metadata={"sha256": meta.sha256},
            )
        self._index(authority, meta, body, response.get("VersionId"))
        return meta

    def presign_upload(self, authority: str, coordinates: NoteCoordinates, expires_in: int) -> str:
        return str(
            self._s3.generate_presigned_url(
                "put_object",
                Params={"Bucket": self._bucket, "Key": blob_key(authority, coordinates.ref)},
                ExpiresIn=expires_in,
            )
        )

    def commit_upload(self, authority: str, meta: NoteMeta) -> NoteMeta:
        # The body is hashed here rather than trusting a client-sent checksum: one streamed
        # GetObject, pinned to the version it read, so a concurrent upload cannot slip in.
        from botocore.exceptions import ClientError

        try:
            with aws_errors(write=False):
                obj = self._s3.get_object(Bucket=self._bucket, Key=blob_key(authority, meta.ref))
        except Unavailable as exc:
            if isinstance(exc.__cause__, ClientError) and aws_error_code(exc.__cause__) in ("NoSuchKey", "404"):
                raise NotFound(
                    "no upload found for this note; PUT the body to the upload URL first", ref=meta.ref
                ) from None
            raise
        digest = hashlib.sha256()
        size = 0
        inline = bytearray()
        with aws_errors(write=False):
            for chunk in obj["Body"].iter_chunks(1024 * 1024):
                digest.update(chunk)
                size += len(chunk)
                if size <= INLINE_LIMIT:
                    inline += chunk
        meta = verify_upload(meta, size, digest.hexdigest())
        self._index(authority, meta, bytes(inline) if size <= INLINE_LIMIT else None, obj.get("VersionId"))
        return meta

    def _index(self, authority: str, meta: NoteMeta, body: bytes | None, version: str | None) -> None:
        c = meta.coordinates
        listing: dict[str, Any] = {
            "ref": {"S": meta.ref},
            "key": {"S": c.key},
            "run": {"N": str(c.run)},
            "name": {"S": c.name},
            "author": {"S": c.author},
            "size": {"N": str(meta.size)},
            "sha256": {"S": meta.sha256},
            "content_type": {"S": meta.content_type},
            "updated_at": {"S": meta.updated_at},
        }
        note = {"pk": {"S": note_partition(authority)}, **listing}
        if body is not None and len(body) <= INLINE_LIMIT:
            note["body"] = {"B": body}
        if version and version != "null":
            note["blob_version"] = {"S": version}
        items = [note] + [{"pk": {"S": pk}, **listing} for pk in view_partitions(authority, c)]
        self._transact([{"Put": {"TableName": self._table, "Item": item}} for item in items])

    def _transact(self, operations: list[dict[str, Any]]) -> None:
        from botocore.exceptions import ClientError

        for attempt in range(1, TRANSACTION_ATTEMPTS + 1):
            try:
                with aws_errors(write=True):
                    self._ddb.transact_write_items(TransactItems=operations)
                return
            except CommitUnknown as exc:
                cause = exc.__cause__
                reasons = _cancellation_codes(cause) if isinstance(cause, ClientError) else []
                if "ConditionalCheckFailed" in reasons:
                    raise NotFound("note not found") from None
                if "TransactionConflict" in reasons and attempt < TRANSACTION_ATTEMPTS:
                    time.sleep(random.uniform(0.01, 0.05) * attempt)  # noqa: S311 - jitter only
                    continue
                raise

    def delete(self, authority: str, ref: str) -> None:
        coordinates = self._coordinates(authority, ref)  # they name the view items to remove
        operations: list[dict[str, Any]] = [
            {
                "Delete": {
                    "TableName": self._table,
                    "Key": {"pk": {"S": note_partition(authority)}, "ref": {"S": ref}},
                    "ConditionExpression": "attribute_exists(pk)",
                }
            }
        ]
        operations += [
            {"Delete": {"TableName": self._table, "Key": {"pk": {"S": pk}, "ref": {"S": ref}}}}
            for pk in view_partitions(authority, coordinates)
        ]
        try:
            self._transact(operations)
        except NotFound:
            raise NotFound("note not found", ref=ref) from None
        # The note is deleted once its index items are gone. Its body version is removed by the
        # notes janitor from the table's stream (dovecote.notes.janitor), off the request path.

    def _coordinates(self, authority: str, ref: str) -> NoteCoordinates:
        """Only the coordinates: the inline body (up to 256 KiB) is not worth transferring here."""
        with aws_errors(write=False):
            item = self._ddb.get_item(
                TableName=self._table,
                Key={"pk": {"S": note_partition(authority)}, "ref": {"S": ref}},
                ConsistentRead=True,
                ProjectionExpression="#k, #r, #n, #a",
                ExpressionAttributeNames={"#k": "key", "#r": "run", "#n": "name", "#a": "author"},
            ).get("Item")
        if item is None:
            raise NotFound("note not found", ref=ref)
        return NoteCoordinates(item["key"]["S"], int(item["run"]["N"]), item["name"]["S"], item["author"]["S"])

    def delete_body_version(self, key: str, version: str | None) -> None:
        """Permanently delete one body version (the janitor's only write). A pinned version never
        touches a newer body written by a later Put of the same note."""
        params = {"Bucket": self._bucket, "Key": key}
        if version:
            params["VersionId"] = version
        with aws_errors(write=True):
            self._s3.delete_object(**params)

    # ---- reads --------------------------------------------------------------------------------

    def get(self, authority: str, ref: str) -> StoredNote:
        with aws_errors(write=False):
            response = self._ddb.get_item(
                TableName=self._table,
                Key={"pk": {"S": note_partition(authority)}, "ref": {"S": ref}},
                ConsistentRead=True,
            )
        item = response.get("Item")
        if item is None:
            raise NotFound("note not found", ref=ref)
        meta = _meta(item)
        if meta.ref != ref:  # the key is derived; a mismatch means a corrupt index item
            raise Unavailable("corrupt note index item", ref=ref)
        body = item.get("body", {}).get("B")
        return StoredNote(
            meta=meta,
            body=bytes(body) if body is not None else (b"" if meta.size == 0 else None),
            blob_key=blob_key(authority, ref),
            blob_version=item.get("blob_version", {}).get("S"),
        )

    def download_url(self, authority: str, note: StoredNote, expires_in: int) -> str:
        params = {"Bucket": self._bucket, "Key": blob_key(authority, note.meta.ref)}
        if note.blob_version:
            params["VersionId"] = note.blob_version
        return str(self._s3.generate_presigned_url("get_object", Params=params, ExpiresIn=expires_in))

    def list(self, authority: str, note_filter: NoteFilter, limit: int, after_ref: str | None) -> NotePage:
        names = {f"#a{i}": attr for i, attr in enumerate(LIST_ATTRIBUTES)}
        names["#pk"] = "pk"
        query: dict[str, Any] = {
            "TableName": self._table,
            # One extra item tells whether more matches remain without a second query.
            "Limit": limit + 1,
            "ConsistentRead": True,
            "ProjectionExpression": ", ".join(names_for(LIST_ATTRIBUTES)),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {":pk": {"S": self._plan(authority, note_filter)}},
            "KeyConditionExpression": "#pk = :pk",
        }
        if after_ref:
            query["KeyConditionExpression"] += " AND #a0 > :after"
            query["ExpressionAttributeValues"][":after"] = {"S": after_ref}
        with aws_errors(write=False):
            response = self._ddb.query(**query)
        items: list[NoteMeta] = []
        last_consumed: str | None = None
        for raw in response.get("Items", []):
            meta = _meta(raw)
            if not note_filter.matches(meta.coordinates):
                last_consumed = meta.ref
                continue
            if len(items) == limit:
                return NotePage(items=items, after_ref=items[-1].ref)
            items.append(meta)
            last_consumed = meta.ref
        if "LastEvaluatedKey" in response:
            # More may match past what this query evaluated: the page can be short, cursor set.
            return NotePage(items=items, after_ref=last_consumed or after_ref)
        return NotePage(items=items, after_ref=None)

    @staticmethod
    def _plan(authority: str, f: NoteFilter) -> str:
        """Pick the narrowest view the filter fixes; the rest is applied with NoteFilter.matches."""
        if f.key and f.run is not None and f.name:
            return _partition("n#", authority, f.key, f.run, f.name)
        if f.key and f.run is not None:
            return _partition("r#", authority, f.key, f.run)
        if f.key:
            return _partition("k#", authority, f.key)
        return note_partition(authority)


def _cancellation_codes(exc: Any) -> list[str]:
    reasons = (getattr(exc, "response", None) or {}).get("CancellationReasons") or []
    return [str(r.get("Code") or "") for r in reasons]


def names_for(attributes: list[str]) -> list[str]:
    return [f"#a{i}" for i in range(len(attributes))]


def _meta(item: dict[str, Any]) -> NoteMeta:
    return NoteMeta(
        coordinates=NoteCoordinates(
            key=item["key"]["S"],
            run=int(item["run"]["N"]),
            name=item["name"]["S"],
            author=item["author"]["S"],
        ),
        size=int(item["size"]["N"]),
        sha256=item["sha256"]["S"],
        content_type=item["content_type"]["S"],
        updated_at=item["updated_at"]["S"],
    )
