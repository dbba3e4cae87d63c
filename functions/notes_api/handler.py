"""Notes API function: parse → call NotesService → return a model. No rules here."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from dovecote.notes.limits import MAX_LIST_LIMIT
from dovecote.notes.model import NoteFilter, NoteMeta
from dovecote.notes.service import NotesService, PutNote
from dovecote.platform.http import current_principal, lambda_entry, new_resolver, responses
from dovecote.platform.schema import QueryInt, bounded
from functions.notes_api.models import (
    COORDINATE,
    RUN,
    NoteBodyOut,
    NoteListItem,
    NoteListOut,
    NoteOut,
    PutNoteBody,
    UploadBody,
    UploadOut,
)

app = new_resolver()


@lru_cache(maxsize=1)
def service() -> NotesService:
    """Composition root: wires the AWS adapters on the first request of the container."""
    from dovecote.notes.dynamo import DynamoNoteStore
    from dovecote.platform import aws
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.settings import get_settings

    settings = get_settings()
    store = DynamoNoteStore(
        table=settings.notes_table, bucket=settings.bucket, dynamodb=aws.client("dynamodb"), s3=aws.lazy_client("s3")
    )
    return NotesService(
        store, signer_factory=lambda: CursorSigner(aws.cursor_key()), presign_seconds=settings.presign_seconds
    )


def _meta(meta: NoteMeta) -> dict[str, Any]:
    """What a note's answer and its list entry both give: its ref, its coordinates and its size."""
    c = meta.coordinates
    return {"ref": meta.ref, "key": c.key, "run": c.run, "name": c.name, "author": c.author, "size": meta.size}


def _out(meta: NoteMeta) -> NoteOut:
    return NoteOut(**_meta(meta), sha256=meta.sha256, content_type=meta.content_type, updated_at=meta.updated_at)


@app.put("/v1/notes", tags=["notes"], responses=responses(200, NoteOut, 400, 401, 403, 404, 413, 429, 503))
def put_note(body: Annotated[PutNoteBody, Body()]) -> NoteOut:
    """Store a note body under (key, run, name, author), overwriting; or commit an upload."""
    meta = service().put(current_principal(app), PutNote(**body.model_dump()))
    return _out(meta)


@app.post("/v1/notes/uploads", tags=["notes"], responses=responses(200, UploadOut, 400, 401, 403, 413, 429, 503))
def create_upload(body: Annotated[UploadBody, Body()]) -> UploadOut:
    """A presigned PUT for a body up to 64 MiB, signed for its size, SHA-256 and content type: send
    exactly `upload_headers`. Then commit it with PUT /v1/notes {upload: true, sha256}."""
    upload = service().create_upload(current_principal(app), PutNote(**body.model_dump()))
    return UploadOut(
        ref=upload.ref, upload_url=upload.upload_url, upload_headers=upload.upload_headers, expires_at=upload.expires_at
    )


@app.get("/v1/notes/<ref>", tags=["notes"], responses=responses(200, NoteBodyOut, 401, 403, 404, 429, 503))
def get_note(ref: Annotated[str, Path()]) -> NoteBodyOut:
    """Read a note by its ref: metadata and the body as `text`, `body_b64`, or a `download_url`
    (a presigned GET, above the inline limit)."""
    view = service().get(current_principal(app), ref)
    return NoteBodyOut(
        **_out(view.meta).model_dump(), text=view.text, body_b64=view.body_b64, download_url=view.download_url
    )


@app.delete(
    "/v1/notes/<ref>",
    tags=["notes"],
    responses=responses(204, None, 401, 403, 404, 429, 503),
)
def delete_note(ref: Annotated[str, Path()]) -> Response[None]:
    """Delete exactly one note; 404 when absent. Its body version is removed asynchronously."""
    service().delete(current_principal(app), ref)
    return Response(status_code=204)


@app.get("/v1/notes", tags=["notes"], responses=responses(200, NoteListOut, 400, 401, 403, 429, 503))
def list_notes(
    key: Annotated[str, Query(json_schema_extra=COORDINATE)] = "",
    run: Annotated[QueryInt | None, Query(json_schema_extra=RUN)] = None,
    name: Annotated[str, Query(json_schema_extra=COORDINATE)] = "",
    author: Annotated[
        str | None, Query(json_schema_extra=COORDINATE, description="absent: any author; empty: the shared scope")
    ] = None,
    limit: Annotated[QueryInt | None, Query(json_schema_extra=bounded(0, MAX_LIST_LIMIT))] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> NoteListOut:
    """List notes in ref order. Empty or absent filters are wildcards; `author=` (empty) is the
    shared scope, an absent author any author. A page may be short while `cursor` is set."""
    items, next_cursor = service().list(
        current_principal(app), NoteFilter(key=key, run=run, name=name, author=author), limit, cursor
    )
    return NoteListOut(items=[NoteListItem(**_meta(m), updated_at=m.updated_at) for m in items], cursor=next_cursor)


handler = lambda_entry(app, service)
