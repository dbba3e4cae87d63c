"""HTTP shapes of the notes routes (docs/services/notes.md). Types only: the rules live in
dovecote.notes, so these models stay permissive where the domain gate decides."""

from __future__ import annotations

from typing import Any

from pydantic import Field, StrictBool, StrictStr

from dovecote.notes.limits import INLINE_LIMIT, MAX_COORDINATE_BYTES, MAX_NOTE_BYTES, MAX_RUN
from dovecote.platform.http import ApiModel
from dovecote.platform.schema import (
    MEDIA_TYPE,
    SHA256_HEX,
    JsonInt,
    RequestModel,
    bounded,
    optional_int,
    utf8_text,
    with_schema,
)


class _Strict(RequestModel):
    pass


# Coordinates are limited to 1024 UTF-8 bytes each, declared as such (platform/schema.py utf8_text).
COORDINATE: dict[str, Any] = utf8_text(MAX_COORDINATE_BYTES)
REQUIRED_COORDINATE: dict[str, Any] = utf8_text(MAX_COORDINATE_BYTES, minLength=1)
RUN = bounded(1, MAX_RUN)
# Inline bodies are limited to INLINE_LIMIT bytes: in UTF-8 bytes as text (over it: 413), and in
# base64 characters (4 per 3 bytes).
INLINE_TEXT: dict[str, Any] = utf8_text(INLINE_LIMIT)
INLINE_B64: dict[str, Any] = {
    "maxLength": (INLINE_LIMIT // 3) * 4,
    "pattern": r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
}


class PutNoteBody(_Strict):
    """Either an inline put (`text` or `body_b64`, or neither for an empty body; no `size` or
    `sha256`: they are computed) or the commit of a presigned upload (`upload: true` with the
    `sha256` the upload was declared with)."""

    model_config = with_schema(
        {
            "required": ["key", "run", "name"],
            "oneOf": [
                {
                    "properties": {"upload": {"const": False}},
                    "not": {
                        "anyOf": [{"required": ["text", "body_b64"]}, {"required": ["size"]}, {"required": ["sha256"]}]
                    },
                },
                {
                    "properties": {"upload": {"const": True}},
                    "required": ["upload", "sha256"],
                    "not": {"anyOf": [{"required": ["text"]}, {"required": ["body_b64"]}]},
                },
            ],
        }
    )
    key: StrictStr = Field(default="", json_schema_extra=REQUIRED_COORDINATE)
    run: JsonInt = Field(default=0, json_schema_extra=RUN)
    name: StrictStr = Field(default="", json_schema_extra=REQUIRED_COORDINATE)
    author: StrictStr = Field(default="", json_schema_extra=COORDINATE, description='"" is the shared scope')
    content_type: StrictStr | None = Field(default=None, json_schema_extra=MEDIA_TYPE)
    text: StrictStr | None = Field(default=None, json_schema_extra=INLINE_TEXT)
    body_b64: StrictStr | None = Field(default=None, json_schema_extra=INLINE_B64)
    upload: StrictBool = False
    sha256: StrictStr | None = Field(default=None, json_schema_extra=SHA256_HEX, description="an upload commit only")
    size: JsonInt | None = optional_int(
        0, MAX_NOTE_BYTES, "an upload commit only (optional there): an inline body's size is its length"
    )


class UploadBody(_Strict):
    model_config = with_schema({"required": ["key", "run", "name"]})
    key: StrictStr = Field(default="", json_schema_extra=REQUIRED_COORDINATE)
    run: JsonInt = Field(default=0, json_schema_extra=RUN)
    name: StrictStr = Field(default="", json_schema_extra=REQUIRED_COORDINATE)
    author: StrictStr = Field(default="", json_schema_extra=COORDINATE)
    size: JsonInt = Field(json_schema_extra=bounded(0, MAX_NOTE_BYTES))
    sha256: StrictStr = Field(json_schema_extra=SHA256_HEX)
    content_type: StrictStr | None = Field(default=None, json_schema_extra=MEDIA_TYPE)


# What a note's answer and its list entry share (each one's schema lists the fields itself).
class _NoteMeta(ApiModel):
    ref: str
    key: str
    run: int
    name: str
    author: str
    size: int


class NoteOut(_NoteMeta):
    sha256: str
    content_type: str
    updated_at: str


class NoteBodyOut(NoteOut):
    text: str | None = None
    body_b64: str | None = None
    download_url: str | None = None


class UploadOut(ApiModel):
    ref: str
    upload_url: str
    upload_headers: dict[str, str]
    expires_at: str


class NoteListItem(_NoteMeta):
    updated_at: str


class NoteListOut(ApiModel):
    items: list[NoteListItem]
    cursor: str | None = None
