"""Notes service: the commands behind the HTTP routes. Pure rules plus one NoteStore port."""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable

from dovecote.notes.limits import INLINE_LIMIT, MAX_NOTE_BYTES
from dovecote.notes.model import BINARY_DEFAULT, NoteCoordinates, NoteFilter, NoteMeta, is_ref, list_limit
from dovecote.notes.ports import NoteStore
from dovecote.platform.clock import Clock, rfc3339, utc_now
from dovecote.platform.cursors import CursorSigner, LazySigner
from dovecote.platform.errors import InvalidArgument, NotFound, PayloadTooLarge
from dovecote.platform.media import is_textual, validate_media_type
from dovecote.platform.principal import Principal

TEXT_DEFAULT = "text/plain; charset=utf-8"
_SHA256_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True, slots=True)
class PutNote:
    """A Put request as it arrives: the gate below decides whether it is storable."""

    key: str = ""
    run: int = 0
    name: str = ""
    author: str = ""
    content_type: str | None = None
    text: str | None = None
    body_b64: str | None = None
    upload: bool = False
    sha256: str | None = None
    size: int | None = None


@dataclass(frozen=True, slots=True)
class NoteView:
    """A read, rendered for the API: exactly one of text, body_b64, download_url is set."""

    meta: NoteMeta
    text: str | None = None
    body_b64: str | None = None
    download_url: str | None = None


@dataclass(frozen=True, slots=True)
class Upload:
    ref: str
    upload_url: str
    upload_headers: dict[str, str]
    expires_at: str


def _sha256_arg(value: str | None) -> str:
    digest = (value or "").removeprefix("sha256:").lower()
    if len(digest) != 64 or not set(digest) <= _SHA256_HEX:
        raise InvalidArgument("sha256 must be 64 hex characters", field="sha256")
    return digest


def gate_put(request: PutNote) -> tuple[NoteCoordinates, str, bytes | None]:
    """The one validation gate for a Put, in the reference order: coordinates first (key, name,
    run), then the body form. Returns the coordinates, the content type and the inline body
    (None for an upload commit, whose content type is "" unless the commit names one: the store then
    keeps the type the upload was signed for)."""
    coordinates = NoteCoordinates(request.key, request.run, request.name, request.author).validate()
    if request.upload:
        if request.text is not None or request.body_b64 is not None:
            raise InvalidArgument("an upload commit carries no inline body", field="upload")
        _sha256_arg(request.sha256)
        content_type = validate_media_type(request.content_type) if request.content_type is not None else ""
        return coordinates, content_type, None
    if request.text is not None and request.body_b64 is not None:
        raise InvalidArgument("give either text or body_b64, not both", field="body_b64")
    # An inline body's size and digest are computed from it: a second figure could only contradict it.
    if request.size is not None:
        raise InvalidArgument("size is only for an upload commit; an inline body's size is its length", field="size")
    if request.sha256 is not None:
        raise InvalidArgument(
            "sha256 is only for an upload commit; an inline body's digest is computed", field="sha256"
        )
    if request.body_b64 is not None:
        # Bound the work before decoding: base64 grows 4/3.
        if len(request.body_b64) > (INLINE_LIMIT * 4) // 3 + 4:
            raise _too_large(len(request.body_b64) * 3 // 4)
        try:
            body = base64.b64decode(request.body_b64, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgument("body_b64 is not valid base64", field="body_b64") from None
        content_type = BINARY_DEFAULT if request.content_type is None else request.content_type
    else:
        body = (request.text or "").encode("utf-8")
        # An absent content type is the default; an empty one is not a media type (refused below).
        content_type = TEXT_DEFAULT if request.content_type is None else request.content_type
    if len(body) > INLINE_LIMIT:
        raise _too_large(len(body))
    return coordinates, validate_media_type(content_type), body


def _too_large(size: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"inline bodies are limited to {INLINE_LIMIT} bytes; use POST /v1/notes/uploads",
        size=size,
        limit=INLINE_LIMIT,
    )


class NotesService:
    def __init__(
        self,
        store: NoteStore,
        signer: CursorSigner | None = None,
        *,
        clock: Clock = utc_now,
        presign_seconds: int = 900,
        signer_factory: Callable[[], CursorSigner] | None = None,
    ) -> None:
        self._store = store
        self._signers = LazySigner(signer, signer_factory)
        self._clock = clock
        self._presign_seconds = presign_seconds

    @property
    def signer(self) -> CursorSigner:
        return self._signers.get()

    def put(self, principal: Principal, request: PutNote) -> NoteMeta:
        principal.require("caller", "worker")
        coordinates, content_type, body = gate_put(request)
        principal.require_author(coordinates.author)
        now = rfc3339(self._clock())
        if body is None:
            # size -1: not declared on commit; the store takes it from the uploaded body, whose
            # SHA-256 must still match.
            declared = -1 if request.size is None else request.size
            meta = NoteMeta(coordinates, declared, _sha256_arg(request.sha256), content_type, now)
            return self._store.commit_upload(principal.authority, meta)
        meta = NoteMeta(coordinates, len(body), hashlib.sha256(body).hexdigest(), content_type, now)
        return self._store.put(principal.authority, meta, body)

    def create_upload(self, principal: Principal, request: PutNote) -> Upload:
        principal.require("caller", "worker")
        coordinates = NoteCoordinates(request.key, request.run, request.name, request.author).validate()
        principal.require_author(coordinates.author)
        digest = _sha256_arg(request.sha256)
        if request.size is None or request.size < 0:
            raise InvalidArgument("size is required and must be >= 0", field="size")
        if request.size > MAX_NOTE_BYTES:
            raise PayloadTooLarge(
                f"notes are limited to {MAX_NOTE_BYTES} bytes", size=request.size, limit=MAX_NOTE_BYTES
            )
        content_type = validate_media_type(BINARY_DEFAULT if request.content_type is None else request.content_type)
        presigned = self._store.presign_upload(
            principal.authority, coordinates, request.size, digest, content_type, self._presign_seconds
        )
        expires = rfc3339(self._clock() + timedelta(seconds=self._presign_seconds))
        return Upload(
            ref=coordinates.ref, upload_url=presigned.url, upload_headers=presigned.headers, expires_at=expires
        )

    def get(self, principal: Principal, ref: str) -> NoteView:
        principal.require("caller", "worker")
        _ref_arg(ref)
        stored = self._store.get(principal.authority, ref)
        meta = stored.meta
        if stored.body is None or meta.size > INLINE_LIMIT:
            url = self._store.download_url(principal.authority, stored, self._presign_seconds)
            return NoteView(meta=meta, download_url=url)
        if is_textual(meta.content_type):
            try:
                return NoteView(meta=meta, text=stored.body.decode("utf-8"))
            except UnicodeDecodeError:
                pass
        return NoteView(meta=meta, body_b64=base64.b64encode(stored.body).decode("ascii"))

    def list(
        self, principal: Principal, note_filter: NoteFilter, limit: int | None, cursor: str | None
    ) -> tuple[list[NoteMeta], str | None]:
        principal.require("caller", "worker")
        note_filter.validate()
        size = list_limit(limit)
        scope = "notes:" + note_filter.digest()
        after = None
        if cursor:
            position = self.signer.open(cursor, authority=principal.authority, scope=scope)
            after = position.get("after")
            if not isinstance(after, str) or not is_ref(after):
                raise InvalidArgument("cursor is malformed", field="cursor")
        page = self._store.list(principal.authority, note_filter, size, after)
        next_cursor = None
        if page.after_ref is not None:
            next_cursor = self.signer.seal(
                authority=principal.authority, scope=scope, position={"after": page.after_ref}
            )
        return page.items, next_cursor

    def delete(self, principal: Principal, ref: str) -> None:
        principal.require("caller", "worker")
        _ref_arg(ref)
        self._store.delete(principal.authority, ref, agent=principal.agent)


def _ref_arg(ref: str) -> None:
    if not is_ref(ref):
        # A malformed ref cannot name any note; answering 404 keeps the route total.
        raise NotFound("note not found; a ref is 64 lowercase hex characters", ref=ref)
