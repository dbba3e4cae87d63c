"""The AWS NoteStore: bodies in S3, the listing index in DynamoDB (models in notes/records.py).

Layout
- S3 `notes/<authority>/<ref>` holds the committed body. The bucket is versioned and the note item
  pins the version it committed, so a failed Put that replaced the current S3 version can never
  change what Get returns. Versions no note pins are deleted by the janitor (from the table's
  stream) and, for what it misses, by the reconciler (notes/reconcile.py).
- S3 `uploads/notes/<authority>/<ref>` is where a presigned upload lands. The URL is signed for the
  declared length, SHA-256 and content type, so S3 refuses any other body. The commit copies the
  upload into `notes/` (pinned to the version it hashed); the uploads prefix expires after a day,
  so an upload never committed, or a URL used again after a commit or a delete, leaves nothing
  behind and can never replace a committed body.
- DynamoDB, one table, four items per note, all with sort key `ref`:
  - the note item (`NoteItem`), pk `a#<authority>`: coordinates, size, sha256, content type, the S3
    version, and the body itself when it is at most INLINE_LIMIT, so Get is one GetItem;
  - three view items (`NoteViewItem`) for the filters agents use, pk `k#h(authority, key)`,
    `r#h(authority, key, run)` and `n#h(authority, key, run, name)`, carrying the listing fields.
  The four are written (and deleted) in one TransactWriteItems. Views live in the base table rather
  than in GSIs because GSIs are only eventually consistent: here every list is a strongly consistent
  Query, so a Put that returned is listed at once, as the contract says.
- A filter without a key (author only, run only, or empty) queries the authority's note items and
  applies the rest with NoteFilter.matches: it reads every note of the authority.

Round trips: put 2 (PutObject, TransactWriteItems), get 1 (GetItem), list 1 per page (Query),
delete 2 (GetItem for the coordinates, TransactWriteItems), upload commit 3 (GetObject, read at most
the declared size + 1 byte and hashed; CopyObject; TransactWriteItems).
The index is written last, so a failure before it leaves nothing listed, and a retry converges.
"""

from __future__ import annotations

import hashlib
import random
import time
from typing import Any

from dovecote.notes.limits import INLINE_LIMIT
from dovecote.notes.model import (
    NoteCoordinates,
    NoteFilter,
    NoteMeta,
    NotePage,
    PresignedUpload,
    StoredNote,
    oversize,
    ref_preimage,
    upload_limit,
    verify_upload,
)
from dovecote.notes.reconcile import StoredVersion, note_of
from dovecote.notes.records import LIST_ATTRIBUTES, NoteItem, NoteViewItem
from dovecote.platform.aws import aws_error_code, aws_errors
from dovecote.platform.dynamo import bind, cancellation_codes, connection, one_page, pynamodb_errors
from dovecote.platform.errors import CommitUnknown, Forbidden, InvalidArgument, NotFound, Unavailable
from dovecote.platform.media import validate_media_type
from dovecote.platform.uploads import presign_put

# Under contention a transaction can be cancelled with TransactionConflict; a note Put or Delete is
# safe to repeat, so it is retried this many times before the caller sees 503.
TRANSACTION_ATTEMPTS = 3
READ_CHUNK = 1024 * 1024


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


def upload_key(authority: str, ref: str) -> str:
    return f"uploads/notes/{authority}/{ref}"


class DynamoNoteStore:
    def __init__(self, *, table: str, bucket: str, dynamodb: Any, s3: Any) -> None:
        self._bucket = bucket
        self._ddb = dynamodb
        self._s3 = s3
        self._notes = bind(NoteItem, table=table, client=dynamodb)
        self._views = bind(NoteViewItem, table=table, client=dynamodb)

    # ---- writes -------------------------------------------------------------------------------

    def _blob(self, authority: str, meta: NoteMeta) -> dict[str, Any]:
        """Where a note's body is stored, and what it is stored as (its type, its digest)."""
        stored = {"ContentType": meta.content_type, "Metadata": {"sha256": meta.sha256}}
        return {"Bucket": self._bucket, "Key": blob_key(authority, meta.ref), **stored}

    def put(self, authority: str, meta: NoteMeta, body: bytes) -> NoteMeta:
        with aws_errors(write=True):
            response = self._s3.put_object(**self._blob(authority, meta), Body=body)
        self._index(authority, meta, body, response.get("VersionId"))
        return meta

    def presign_upload(
        self, authority: str, coordinates: NoteCoordinates, size: int, sha256: str, content_type: str, expires_in: int
    ) -> PresignedUpload:
        """A PUT URL bound to exactly one body: its length, SHA-256 and content type are signed
        headers, so S3 refuses anything else (and a URL used again can only rewrite the same bytes
        into the expiring uploads prefix)."""
        key = upload_key(authority, coordinates.ref)
        return presign_put(
            self._s3,
            bucket=self._bucket,
            key=key,
            size=size,
            sha256=sha256,
            content_type=content_type,
            expires_in=expires_in,
        )

    def commit_upload(self, authority: str, meta: NoteMeta) -> NoteMeta:
        """Hash the uploaded body (never trusting a client checksum), reading at most the declared
        size + 1 byte, then copy exactly the version that was hashed into `notes/` and index it."""
        from botocore.exceptions import ClientError

        source = upload_key(authority, meta.ref)
        try:
            with aws_errors(write=False):
                obj = self._s3.get_object(Bucket=self._bucket, Key=source)
        except Unavailable as exc:
            if isinstance(exc.__cause__, ClientError) and aws_error_code(exc.__cause__) in ("NoSuchKey", "404"):
                raise NotFound(
                    "no upload found for this note; PUT the body to the upload URL first", ref=meta.ref
                ) from None
            raise
        limit = upload_limit(meta.size)
        stream = obj["Body"]
        try:
            declared_length = int(obj.get("ContentLength") or 0)
            if declared_length > limit:
                raise oversize(declared_length, meta.size)
            digest = hashlib.sha256()
            size = 0
            inline = bytearray()
            with aws_errors(write=False):
                for chunk in stream.iter_chunks(min(READ_CHUNK, limit + 1)):
                    digest.update(chunk)
                    size += len(chunk)
                    if size > limit:  # stop at the declared size + 1 byte: never read the rest
                        raise oversize(size, meta.size)
                    if size <= INLINE_LIMIT:
                        inline += chunk
        finally:
            stream.close()
        meta = verify_upload(meta, size, digest.hexdigest(), uploaded_type=_media_type(obj.get("ContentType")))
        copy_source: dict[str, str] = {"Bucket": self._bucket, "Key": source}
        if obj.get("VersionId") and obj["VersionId"] != "null":
            copy_source["VersionId"] = obj["VersionId"]
        with aws_errors(write=True):
            copied = self._s3.copy_object(
                **self._blob(authority, meta), CopySource=copy_source, MetadataDirective="REPLACE"
            )
        self._index(authority, meta, bytes(inline) if size <= INLINE_LIMIT else None, copied.get("VersionId"))
        return meta

    def _index(self, authority: str, meta: NoteMeta, body: bytes | None, version: str | None) -> None:
        c = meta.coordinates
        listing: dict[str, Any] = {
            "ref": meta.ref,
            "key": c.key,
            "run": c.run,
            "name": c.name,
            "author": c.author,
            "size": meta.size,
            "sha256": meta.sha256,
            "content_type": meta.content_type,
            "updated_at": meta.updated_at,
        }
        note = self._notes(
            note_partition(authority),
            body=body if body is not None and len(body) <= INLINE_LIMIT else None,
            blob_version=version if version and version != "null" else None,
            **listing,
        )
        views = [self._views(pk, **listing) for pk in view_partitions(authority, c)]
        self._transact(lambda tx: [tx.save(item) for item in (note, *views)])

    def _transact(self, build: Any) -> None:
        from pynamodb.exceptions import TransactWriteError
        from pynamodb.transactions import TransactWrite

        for attempt in range(1, TRANSACTION_ATTEMPTS + 1):
            try:
                with pynamodb_errors(write=True):
                    try:
                        with TransactWrite(connection=connection(self._ddb)) as tx:
                            build(tx)
                    except TransactWriteError as exc:
                        reasons = cancellation_codes(exc)
                        if "ConditionalCheckFailed" in reasons:
                            raise NotFound("note not found") from None
                        raise
                return
            except CommitUnknown as exc:
                reasons = cancellation_codes(exc.__cause__) if exc.__cause__ is not None else []
                if "TransactionConflict" in reasons and attempt < TRANSACTION_ATTEMPTS:
                    time.sleep(random.uniform(0.01, 0.05) * attempt)  # noqa: S311 - jitter only
                    continue
                raise

    def delete(self, authority: str, ref: str, *, agent: str = "") -> None:
        coordinates = self._coordinates(authority, ref)  # they name the view items to remove
        if agent and coordinates.author != agent:
            # The author is part of the ref, so it cannot change between this read and the commit.
            raise Forbidden(f"this token deletes notes only as author {agent!r}", agent=agent, ref=ref)
        note = self._notes(note_partition(authority), ref)
        views = [self._views(pk, ref) for pk in view_partitions(authority, coordinates)]

        def build(tx: Any) -> None:
            tx.delete(note, condition=self._notes.pk.exists())
            for view in views:
                tx.delete(view)

        try:
            self._transact(build)
        except NotFound:
            raise NotFound("note not found", ref=ref) from None
        # The note is deleted once its index items are gone. Its body version is removed by the
        # notes janitor from the table's stream (dovecote.notes.janitor), off the request path.

    def _coordinates(self, authority: str, ref: str) -> NoteCoordinates:
        """Only the coordinates: the inline body (up to 256 KiB) is not worth transferring here."""
        notes = self._notes
        with pynamodb_errors(write=False):
            try:
                item = notes.get(
                    note_partition(authority),
                    ref,
                    consistent_read=True,
                    attributes_to_get=["key", "run", "name", "author"],
                )
            except notes.DoesNotExist:
                raise NotFound("note not found", ref=ref) from None
        return NoteCoordinates(item.key, int(item.run), item.name, item.author)

    def delete_body_version(self, key: str, version: str | None) -> None:
        """Permanently delete one body version (the janitor's only write). A pinned version never
        touches a newer body written by a later Put of the same note."""
        params = {"Bucket": self._bucket, "Key": key}
        if version:
            params["VersionId"] = version
        with aws_errors(write=True):
            self._s3.delete_object(**params)

    # ---- reconciliation (notes/reconcile.py) --------------------------------------------------

    def body_versions(self, marker: tuple[str, str] | None) -> tuple[list[StoredVersion], tuple[str, str] | None]:
        """One ListObjectVersions page under `notes/` (up to 1000 versions) and the marker after it."""
        params: dict[str, Any] = {"Bucket": self._bucket, "Prefix": "notes/"}
        if marker:
            params.update(KeyMarker=marker[0], VersionIdMarker=marker[1])
        with aws_errors(write=False):
            page = self._s3.list_object_versions(**params)
        found = [
            StoredVersion(v["Key"], v["VersionId"], v["LastModified"], delete_marker=kind == "DeleteMarkers")
            for kind in ("Versions", "DeleteMarkers")
            for v in page.get(kind, [])
        ]
        more = (page["NextKeyMarker"], page["NextVersionIdMarker"]) if page.get("IsTruncated") else None
        return found, more

    def pinned_versions(self, keys: list[str]) -> dict[str, str | None]:
        """The version each key's note pins, for keys whose note exists (BatchGetItem, 100 a call)."""
        wanted = {}
        for key in keys:
            found = note_of(key)
            if found is not None:
                wanted[(note_partition(found[0]), found[1])] = key
        out: dict[str, str | None] = {}
        with pynamodb_errors(write=False):
            for item in self._notes.batch_get(list(wanted), attributes_to_get=["pk", "ref", "blob_version"]):
                out[wanted[(item.pk, item.ref)]] = item.blob_version
        return out

    # ---- reads --------------------------------------------------------------------------------

    def get(self, authority: str, ref: str) -> StoredNote:
        notes = self._notes
        with pynamodb_errors(write=False):
            try:
                item = notes.get(note_partition(authority), ref, consistent_read=True)
            except notes.DoesNotExist:
                raise NotFound("note not found", ref=ref) from None
        meta = _meta(item)
        if meta.ref != ref:  # the key is derived; a mismatch means a corrupt index item
            raise Unavailable("corrupt note index item", ref=ref)
        body = item.body
        return StoredNote(
            meta=meta,
            body=bytes(body) if body is not None else (b"" if meta.size == 0 else None),
            blob_key=blob_key(authority, ref),
            blob_version=item.blob_version,
        )

    def download_url(self, authority: str, note: StoredNote, expires_in: int) -> str:
        params = {"Bucket": self._bucket, "Key": blob_key(authority, note.meta.ref)}
        if note.blob_version:
            params["VersionId"] = note.blob_version
        return str(self._s3.generate_presigned_url("get_object", Params=params, ExpiresIn=expires_in))

    def list(self, authority: str, note_filter: NoteFilter, limit: int, after_ref: str | None) -> NotePage:
        views = self._views
        results = views.query(
            self._plan(authority, note_filter),
            views.ref > after_ref if after_ref else None,
            consistent_read=True,
            # One extra item tells whether more matches remain without a second query.
            page_size=limit + 1,
            attributes_to_get=LIST_ATTRIBUTES,
        )
        with pynamodb_errors(write=False):
            raw_items, last_key = one_page(views, results)
        items: list[NoteMeta] = []
        last_consumed: str | None = None
        for raw in raw_items:
            meta = _meta(raw)
            if not note_filter.matches(meta.coordinates):
                last_consumed = meta.ref
                continue
            if len(items) == limit:
                return NotePage(items=items, after_ref=items[-1].ref)
            items.append(meta)
            last_consumed = meta.ref
        if last_key is not None:
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


def _media_type(value: str | None) -> str | None:
    try:
        return validate_media_type(value) if value else None
    except InvalidArgument:
        return None


def _meta(item: Any) -> NoteMeta:
    return NoteMeta(
        coordinates=NoteCoordinates(key=item.key, run=int(item.run), name=item.name, author=item.author),
        size=int(item.size),
        sha256=item.sha256,
        content_type=item.content_type,
        updated_at=item.updated_at,
    )
