"""Notes: the pure rules. Coordinates, Ref, the one validation gate, the one filter matcher.

Nothing here touches AWS; every store (DynamoDB adapter, in-memory fake) calls these functions so
"what is a storable note" and "what a filter selects" are each defined once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from dovecote.notes.limits import DEFAULT_LIST_LIMIT, MAX_COORDINATE_BYTES, MAX_LIST_LIMIT, MAX_NOTE_BYTES, MAX_RUN

# Re-exported: the ref is the notes' own rule; it lives apart so that the SDK and the CLI compute refs
# without loading this module's dataclasses (`dovecote notes get` starts faster).
from dovecote.notes.refs import is_ref, note_ref, ref_preimage  # noqa: F401
from dovecote.platform.errors import InvalidArgument, PayloadTooLarge
from dovecote.platform.paging import page_limit
from dovecote.platform.uploads import PresignedUpload  # noqa: F401 (re-exported: the notes port names it)


@dataclass(frozen=True, slots=True)
class NoteCoordinates:
    key: str
    run: int
    name: str
    author: str = ""

    @property
    def ref(self) -> str:
        # Derived, never stored beside the coordinates, so it cannot disagree with them.
        return note_ref(self.key, self.run, self.name, self.author)

    def validate(self) -> NoteCoordinates:
        """The single gate every store's Put calls, in the reference order."""
        if self.key == "":
            raise InvalidArgument("Note.Key is required", field="key")
        if self.name == "":
            raise InvalidArgument("Note.Name is required", field="name")
        _check_run("Note", self.run)
        _check_sizes("Note", key=self.key, name=self.name, author=self.author)
        return self


@dataclass(frozen=True, slots=True)
class NoteFilter:
    """Empty or absent fields are wildcards. Author has three states: None (any author),
    "" (the shared scope only) and a value (that author only)."""

    key: str = ""
    run: int | None = None
    name: str = ""
    author: str | None = None

    def validate(self) -> NoteFilter:
        if self.run is not None:
            _check_run("Filter", self.run)
        # A filter longer than any storable coordinate matches nothing: refused, as documented.
        _check_sizes("Filter", key=self.key, name=self.name, author=self.author or "")
        return self

    def matches(self, note: NoteCoordinates) -> bool:
        """The single definition of what a filter selects; a store that narrows only part of the
        filter through an index applies the rest with this."""
        return (
            (self.key == "" or note.key == self.key)
            and (self.run is None or note.run == self.run)
            and (self.name == "" or note.name == self.name)
            and (self.author is None or note.author == self.author)
        )

    def digest(self) -> str:
        """Binds a cursor to this filter: a cursor replayed with another filter is refused."""
        author = "\x00absent" if self.author is None else self.author
        run = -1 if self.run is None else self.run
        return hashlib.sha256(ref_preimage(self.key, run, self.name, author)).hexdigest()[:32]


def _check_run(what: str, run: int) -> None:
    if run < 1:
        raise InvalidArgument(f"{what}.Run must be >= 1, got {run}", field="run")
    if run > MAX_RUN:
        raise InvalidArgument(f"{what}.Run must be <= {MAX_RUN}, got {run}", field="run")


def _check_sizes(what: str, **coordinates: str) -> None:
    for field, value in coordinates.items():
        size = len(value.encode("utf-8"))
        if size > MAX_COORDINATE_BYTES:
            raise InvalidArgument(
                f"{what}.{field.capitalize()} is {size} bytes; the limit is {MAX_COORDINATE_BYTES}",
                field=field,
                size=size,
                limit=MAX_COORDINATE_BYTES,
            )


def list_limit(limit: int | None) -> int:
    return page_limit(limit, default=DEFAULT_LIST_LIMIT, maximum=MAX_LIST_LIMIT)


@dataclass(frozen=True, slots=True)
class NoteMeta:
    """What the index knows of a stored note."""

    coordinates: NoteCoordinates
    size: int
    sha256: str
    content_type: str
    updated_at: str

    @property
    def ref(self) -> str:
        return self.coordinates.ref


@dataclass(frozen=True, slots=True)
class StoredNote:
    """A Get result: the body inline when it is small, otherwise only a blob location."""

    meta: NoteMeta
    body: bytes | None
    blob_key: str | None = None
    blob_version: str | None = None


@dataclass(frozen=True, slots=True)
class NotePage:
    items: list[NoteMeta]
    # Position to continue strictly after; None when the listing is exhausted.
    after_ref: str | None


BINARY_DEFAULT = "application/octet-stream"


def upload_limit(declared: int) -> int:
    """How many bytes a commit may read: the declared size, or the note maximum when the commit
    did not repeat it (-1)."""
    return MAX_NOTE_BYTES if declared == -1 else min(declared, MAX_NOTE_BYTES)


def oversize(size: int, declared: int) -> InvalidArgument | PayloadTooLarge:
    """The refusal for an upload found to be larger than `upload_limit(declared)`."""
    if declared != -1 and size > declared:
        return InvalidArgument(
            "uploaded body is larger than the declared size", expected_size=declared, actual_size_at_least=size
        )
    return PayloadTooLarge(f"notes are limited to {MAX_NOTE_BYTES} bytes", size=size, limit=MAX_NOTE_BYTES)


def verify_upload(meta: NoteMeta, size: int, sha256: str, *, uploaded_type: str | None = None) -> NoteMeta:
    """An uploaded body is committed only if it is exactly what the client declared. A size of -1
    in `meta` means the commit did not repeat it; the digest still pins the body. An empty content
    type means the commit did not name one: the type the upload was signed for is kept."""
    if size > MAX_NOTE_BYTES:
        raise PayloadTooLarge(f"notes are limited to {MAX_NOTE_BYTES} bytes", size=size, limit=MAX_NOTE_BYTES)
    if (meta.size != -1 and size != meta.size) or sha256 != meta.sha256:
        raise InvalidArgument(
            "uploaded body does not match the declared size and sha256",
            expected_size=meta.size,
            actual_size=size,
            expected_sha256=meta.sha256,
            actual_sha256=sha256,
        )
    content_type = meta.content_type or uploaded_type or BINARY_DEFAULT
    return NoteMeta(meta.coordinates, size, meta.sha256, content_type, meta.updated_at)
