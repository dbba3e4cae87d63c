"""HTTP shapes of the notes routes (API.md § Notes). Types only: the rules live in
dovecote.notes, so these models stay permissive where the domain gate decides."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from dovecote.platform.http import ApiModel


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PutNoteBody(_Strict):
    key: StrictStr = ""
    run: StrictInt = 0
    name: StrictStr = ""
    author: StrictStr = ""
    content_type: StrictStr | None = None
    text: StrictStr | None = None
    body_b64: StrictStr | None = None
    upload: StrictBool = False
    sha256: StrictStr | None = None
    size: StrictInt | None = Field(default=None, description="optional on an upload commit")


class UploadBody(_Strict):
    key: StrictStr = ""
    run: StrictInt = 0
    name: StrictStr = ""
    author: StrictStr = ""
    size: StrictInt
    sha256: StrictStr
    content_type: StrictStr | None = None


class NoteOut(ApiModel):
    ref: str
    key: str
    run: int
    name: str
    author: str
    size: int
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


class NoteListItem(ApiModel):
    ref: str
    key: str
    run: int
    name: str
    author: str
    size: int
    updated_at: str


class NoteListOut(ApiModel):
    items: list[NoteListItem]
    cursor: str | None = None
