"""In-memory NoteStore: the fake the unit tests and the conformance suite use beside the real
adapter. It is held to the same contract, including Ref order, short pages and authority scope."""

from __future__ import annotations

import hashlib
import threading
from bisect import bisect_right

from dovecote.notes import model
from dovecote.notes.limits import INLINE_LIMIT
from dovecote.platform.errors import Forbidden, NotFound


class InMemoryNoteStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._notes: dict[str, dict[str, tuple[model.NoteMeta, bytes]]] = {}
        self._uploads: dict[str, tuple[bytes, str]] = {}
        self._bound: dict[str, tuple[int, str, str]] = {}

    def put(self, authority: str, meta: model.NoteMeta, body: bytes) -> model.NoteMeta:
        with self._lock:
            self._notes.setdefault(authority, {})[meta.ref] = (meta, bytes(body))
        return meta

    def presign_upload(
        self,
        authority: str,
        coordinates: model.NoteCoordinates,
        size: int,
        sha256: str,
        content_type: str,
        expires_in: int,
    ) -> model.PresignedUpload:
        url = f"memory://{authority}/{coordinates.ref}"
        self._bound[url] = (size, sha256, content_type)
        return model.PresignedUpload(url, {"Content-Length": str(size), "Content-Type": content_type})

    def upload(self, url: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        """Stands in for the client's HTTP PUT to the presigned URL. Like moto, it does not check
        the signature, so a body other than the declared one gets through and the commit's own
        check is what refuses it."""
        _, _, content_type = self._bound[url]
        self._uploads[url] = (bytes(body), (headers or {}).get("Content-Type", content_type))

    def commit_upload(self, authority: str, meta: model.NoteMeta) -> model.NoteMeta:
        found = self._uploads.get(f"memory://{authority}/{meta.ref}")
        if found is None:
            raise NotFound("no upload found for this note; PUT the body to the upload URL first", ref=meta.ref)
        body, content_type = found
        if len(body) > model.upload_limit(meta.size):
            raise model.oversize(len(body), meta.size)
        checked = model.verify_upload(meta, len(body), hashlib.sha256(body).hexdigest(), uploaded_type=content_type)
        return self.put(authority, checked, body)

    def get(self, authority: str, ref: str) -> model.StoredNote:
        with self._lock:
            found = self._notes.get(authority, {}).get(ref)
        if found is None:
            raise NotFound("note not found", ref=ref)
        meta, body = found
        if meta.size > INLINE_LIMIT:
            return model.StoredNote(meta=meta, body=None, blob_key=f"memory://{authority}/{ref}")
        return model.StoredNote(meta=meta, body=body)

    def download_url(self, authority: str, note: model.StoredNote, expires_in: int) -> str:
        return note.blob_key or f"memory://{authority}/{note.meta.ref}"

    def list(self, authority: str, note_filter: model.NoteFilter, limit: int, after_ref: str | None) -> model.NotePage:
        with self._lock:
            notes = self._notes.get(authority, {})
            refs = sorted(notes)
            start = bisect_right(refs, after_ref) if after_ref else 0
            items: list[model.NoteMeta] = []
            last: str | None = None
            for ref in refs[start:]:
                meta = notes[ref][0]
                if not note_filter.matches(meta.coordinates):
                    continue
                if len(items) == limit:
                    return model.NotePage(items=items, after_ref=last)
                items.append(meta)
                last = ref
        return model.NotePage(items=items, after_ref=None)

    def delete(self, authority: str, ref: str, *, agent: str = "") -> None:
        with self._lock:
            found = self._notes.get(authority, {}).get(ref)
            if found is None:
                raise NotFound("note not found", ref=ref)
            if agent and found[0].coordinates.author != agent:
                raise Forbidden(f"this token deletes notes only as author {agent!r}", agent=agent, ref=ref)
            del self._notes[authority][ref]
