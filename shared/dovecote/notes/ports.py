"""The NoteStore port: what every note backend promises.

Contract (held by tests/integration/test_note_store_conformance.py for every backend):
- Put overwrites by Ref; a Put that returned is visible to Get and List at once (strong reads).
- A Put that failed leaves nothing new in List or Get (the index entry is written last).
- List is ordered by Ref, starts strictly after `after_ref`, and returns at most `limit` items; it may
  return a short page with `after_ref` still set. Only `after_ref is None` ends a listing.
- Every key and query is scoped by authority; no call can reach another authority's notes.
- Byte ownership: the store keeps its own copy of bodies; callers may reuse their buffers.
"""

from __future__ import annotations

from typing import Protocol

from dovecote.notes.model import NoteCoordinates, NoteFilter, NoteMeta, NotePage, PresignedUpload, StoredNote


class NoteStore(Protocol):
    def put(self, authority: str, meta: NoteMeta, body: bytes) -> NoteMeta: ...

    def commit_upload(self, authority: str, meta: NoteMeta) -> NoteMeta:
        """Index a body uploaded through `presign_upload` after checking its size and SHA-256,
        reading at most the declared size + 1 byte. An empty `meta.content_type` keeps the type the
        upload was signed for."""
        ...

    def presign_upload(
        self, authority: str, coordinates: NoteCoordinates, size: int, sha256: str, content_type: str, expires_in: int
    ) -> PresignedUpload:
        """A URL that accepts exactly one body: that size, SHA-256 and content type."""
        ...

    def get(self, authority: str, ref: str) -> StoredNote:
        """Raises NotFound when absent."""
        ...

    def download_url(self, authority: str, note: StoredNote, expires_in: int) -> str: ...

    def list(self, authority: str, note_filter: NoteFilter, limit: int, after_ref: str | None) -> NotePage: ...

    def delete(self, authority: str, ref: str, *, agent: str = "") -> None:
        """Removes exactly one note; raises NotFound when absent, Forbidden when `agent` is set and
        is not the note's author."""
        ...
