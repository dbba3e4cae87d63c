"""SDK methods for notes (docs/services/notes.md), as a mixin over the client's transport.

A note's Ref is computed here, from the coordinates, so an agent addresses a note without a lookup.
Bodies over the inline limit stream: the file is read twice in chunks (once for its size and
SHA-256, which the presigned URL is signed for, once to send it), never held in memory whole, and a
download streams to its destination while its SHA-256 is checked against the note's."""

from __future__ import annotations

import base64
import codecs
import hashlib
import io
import mimetypes
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import httpx

from dovecote.client.errors import INTEGRITY, UPLOAD_FAILED, DovecoteError
from dovecote.client.paging import keyset_items
from dovecote.client.paths import path
from dovecote.notes.limits import INLINE_LIMIT
from dovecote.notes.refs import note_ref
from dovecote.platform.media import is_textual

CHUNK = 1024 * 1024
TEXT_UTF8 = "text/plain; charset=utf-8"
# progress(done, total): bytes sent or received so far of this transfer (it restarts at 0 on a retry).
Progress = Callable[[int, int], None]
NoteBody = bytes | str | os.PathLike[str] | IO[bytes]


@dataclass(frozen=True)
class Note:
    ref: str
    key: str
    run: int
    name: str
    author: str
    size: int
    sha256: str
    content_type: str
    updated_at: str
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")


META_FIELDS = ("ref", "key", "run", "name", "author", "size", "sha256", "content_type", "updated_at")


def guess_content_type(name: str | os.PathLike[str] | None) -> str | None:
    """The media type `mimetypes` gives a file name (None when it knows none)."""
    if not name:
        return None
    guessed, _ = mimetypes.guess_type(os.fspath(name))
    return guessed


def scan(stream: IO[bytes]) -> tuple[int, str, bool]:
    """Size, SHA-256 and whether the bytes are valid UTF-8, reading from the current position to
    the end in chunks; the position is restored."""
    start = stream.tell()
    digest = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")()
    size, utf8 = 0, True
    while chunk := stream.read(CHUNK):
        digest.update(chunk)
        size += len(chunk)
        if utf8:
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError:
                utf8 = False
    if utf8:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            utf8 = False
    stream.seek(start)
    return size, digest.hexdigest(), utf8


def seekable(stream: IO[bytes]) -> IO[bytes]:
    """The stream itself when it can be read twice, else a spooled copy (stdin, pipes): in memory
    up to the inline limit, on disk above it."""
    try:
        if stream.seekable():
            stream.tell()
            return stream
    except (OSError, ValueError):
        pass
    spool = tempfile.SpooledTemporaryFile(max_size=INLINE_LIMIT)  # noqa: SIM115 - returned open
    shutil.copyfileobj(stream, spool, CHUNK)
    spool.seek(0)
    return spool  # type: ignore[return-value]


def write_atomically(target: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Run `write` on a temporary file beside `target`, then move it into place: a failed or
    refused download leaves no file (and never half of one)."""
    with tempfile.NamedTemporaryFile(dir=target.parent or ".", prefix=f".{target.name}.", delete=False) as tmp:
        try:
            write(tmp)
        except BaseException:
            tmp.close()
            os.unlink(tmp.name)
            raise
    os.replace(tmp.name, target)


class NotesMixin:
    if TYPE_CHECKING:  # provided by DovecoteClient
        max_attempts: int

        def request(self, method: str, path: str, **kwargs: Any) -> Any: ...
        def blob_client(self) -> httpx.Client: ...
        def unreachable(
            self, exc: httpx.TransportError, *, attempts: int = 1, command_id: str | None = None
        ) -> DovecoteError: ...
        def _pause(self, attempt: int, retry_after: float | None = None) -> None: ...

    @staticmethod
    def note_ref(key: str, run: int, name: str, author: str = "") -> str:
        return note_ref(key, run, name, author)

    # ---- put ----------------------------------------------------------------------------------

    def put_note(
        self,
        key: str,
        run: int,
        name: str,
        body: NoteBody = b"",
        *,
        author: str = "",
        content_type: str | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Store a note: `PUT /v1/notes`, or above the inline limit a presigned upload and a commit.

        `body` is bytes, a str (stored as text), a path (streamed; its content type guessed from its
        name when none is given) or a binary file object (streamed; spooled first if not seekable).
        Without a content type, a body that is valid UTF-8 is stored as `text/plain; charset=utf-8`,
        any other as `application/octet-stream`, on both paths."""
        where = {"key": key, "run": run, "name": name, "author": author}
        if isinstance(body, str):
            data = body.encode("utf-8")
            if len(data) <= INLINE_LIMIT:
                return self._put_inline(where, content_type, data, as_text=True)
            return self._put_stream(where, content_type or TEXT_UTF8, io.BytesIO(data), progress)
        if isinstance(body, bytes | bytearray | memoryview):
            data = bytes(body)
            if len(data) <= INLINE_LIMIT:
                return self._put_inline(where, content_type, data, as_text=False)
            return self._put_stream(where, content_type, io.BytesIO(data), progress)
        if isinstance(body, os.PathLike):
            path = Path(body)
            with path.open("rb") as handle:
                return self.put_note(
                    key,
                    run,
                    name,
                    handle,
                    author=author,
                    content_type=content_type or guess_content_type(path),
                    progress=progress,
                )
        stream = seekable(body)
        size, _, _ = scan(stream)
        if size <= INLINE_LIMIT:
            data = stream.read()
            textual = content_type is None or is_textual(content_type)
            return self._put_inline(where, content_type, data, as_text=textual, fallback=True)
        return self._put_stream(where, content_type, stream, progress)

    @staticmethod
    def _coordinates(where: dict[str, Any], content_type: str | None) -> dict[str, Any]:
        """The note's key, run, name and author, with its content type when one is given."""
        return {**where, "content_type": content_type} if content_type else dict(where)

    def _put_inline(
        self, where: dict[str, Any], content_type: str | None, data: bytes, *, as_text: bool, fallback: bool = False
    ) -> dict[str, Any]:
        body = self._coordinates(where, content_type)
        text = None
        if as_text:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                if not fallback:
                    raise
        if text is not None:
            body["text"] = text
        else:
            body["body_b64"] = base64.b64encode(data).decode("ascii")
        return dict(self.request("PUT", "/v1/notes", json=body))

    def _put_stream(
        self, where: dict[str, Any], content_type: str | None, stream: IO[bytes], progress: Progress | None
    ) -> dict[str, Any]:
        size, digest, utf8 = scan(stream)
        if content_type is None and utf8:
            content_type = TEXT_UTF8  # as the inline path stores an undeclared UTF-8 body
        coordinates = self._coordinates(where, content_type)
        upload = self.request("POST", "/v1/notes/uploads", json={**coordinates, "size": size, "sha256": digest})
        self._put_blob(upload["upload_url"], upload.get("upload_headers") or {}, stream, size, progress)
        commit = {**coordinates, "upload": True, "sha256": digest, "size": size}
        return dict(self.request("PUT", "/v1/notes", json=commit))

    def _put_blob(
        self, url: str, headers: dict[str, str], stream: IO[bytes], size: int, progress: Progress | None
    ) -> None:
        """PUT the body to a presigned URL with exactly the headers it was signed for, streaming
        from the file; a transport error or a 5xx retries from the start of the body."""
        start = stream.tell()

        def chunks() -> Iterator[bytes]:
            stream.seek(start)
            done = 0
            if progress:
                progress(0, size)
            while chunk := stream.read(CHUNK):
                done += len(chunk)
                yield chunk
                if progress:
                    progress(done, size)

        attempt = 0
        while True:
            attempt += 1
            try:
                response = self.blob_client().put(url, content=chunks(), headers=headers)
            except httpx.TransportError as exc:
                if attempt < self.max_attempts:
                    self._pause(attempt)
                    continue
                raise self.unreachable(exc, attempts=attempt) from exc
            if response.status_code < 300:
                return
            if response.status_code >= 500 and attempt < self.max_attempts:
                self._pause(attempt)
                continue
            raise DovecoteError(
                response.status_code,
                UPLOAD_FAILED,
                f"the presigned upload was refused: {response.text[:300]}",
                attempts=attempt,
            )

    # ---- get ----------------------------------------------------------------------------------

    def get_note_meta(self, ref: str) -> dict[str, Any]:
        """`GET /v1/notes/{ref}` as the API answers it: metadata and `text`, `body_b64` or
        `download_url` (above the inline limit)."""
        return dict(self.request("GET", path("notes", ref)))

    def download_note(
        self, ref: str, dest: str | os.PathLike[str] | IO[bytes], *, progress: Progress | None = None
    ) -> dict[str, Any]:
        """Write a note's body to a path or a binary stream, streaming a large body from its
        download URL in chunks; its SHA-256 is checked against the note's (a path is written
        through a temporary file, so a failed download leaves nothing). Returns the metadata."""
        raw = self.get_note_meta(ref)
        if isinstance(dest, str | os.PathLike):
            write_atomically(Path(dest), lambda out: self._write_body(raw, out, progress))
        else:
            self._write_body(raw, dest, progress)
        return {k: raw[k] for k in META_FIELDS}

    def _write_body(self, raw: dict[str, Any], out: IO[bytes], progress: Progress | None) -> None:
        what = f"the body of note {raw.get('ref')}"
        self._receive(raw, out, str(raw.get("sha256") or ""), what, int(raw.get("size") or 0), progress)

    def _receive(
        self, raw: dict[str, Any], out: IO[bytes], expected: str, what: str, size: int, progress: Progress | None
    ) -> None:
        """Write a body answered as `text`, `body_b64` / `data_b64` or `download_url` (streamed in
        chunks) to `out`, and check it hashes to `expected` (hex SHA-256; empty skips the check):
        `DovecoteError` code `integrity` otherwise."""
        digest = hashlib.sha256()
        if raw.get("download_url"):
            attempt = done = 0
            while True:
                attempt += 1
                try:
                    with self.blob_client().stream("GET", raw["download_url"]) as response:
                        if response.status_code >= 300:
                            raise DovecoteError(
                                response.status_code,
                                "download_failed",
                                f"the download URL answered {response.status_code}",
                            )
                        for chunk in response.iter_bytes(CHUNK):
                            digest.update(chunk)
                            out.write(chunk)
                            done += len(chunk)
                            if progress:
                                progress(done, size)
                    break
                except httpx.TransportError as exc:
                    # Only a stream that has written nothing yet can start again.
                    if done == 0 and attempt < self.max_attempts:
                        self._pause(attempt)
                        continue
                    raise self.unreachable(exc, attempts=attempt) from exc
        else:
            encoded = raw.get("body_b64") if raw.get("body_b64") is not None else raw.get("data_b64")
            if encoded is not None:
                data = base64.b64decode(encoded)
            else:
                data = (raw.get("text") or "").encode("utf-8")
            digest.update(data)
            out.write(data)
            if progress:
                progress(len(data), size)
        if expected and digest.hexdigest() != expected:
            raise DovecoteError(
                0,
                INTEGRITY,
                f"{what} does not match its SHA-256",
                {"expected": expected, "actual": digest.hexdigest()},
            )

    def get_note(self, ref: str) -> Note:
        """The note with its body in memory (use `download_note` for a large one)."""
        buffer = io.BytesIO()
        meta = self.download_note(ref, buffer)
        return Note(**meta, body=buffer.getvalue())

    def get_note_at(self, key: str, run: int, name: str, author: str = "") -> Note:
        return self.get_note(note_ref(key, run, name, author))

    # ---- list and delete ----------------------------------------------------------------------

    def list_notes(
        self,
        *,
        key: str = "",
        run: int | None = None,
        name: str = "",
        author: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """One page `{items, cursor}` in Ref order; `author=""` is the shared scope, None any author."""
        params: dict[str, Any] = {}
        for field, value in (("key", key), ("name", name)):
            if value:
                params[field] = value
        if run is not None:
            params["run"] = run
        if author is not None:
            params["author"] = author
        if limit:
            params["limit"] = limit
        if cursor:
            params["cursor"] = cursor
        return dict(self.request("GET", "/v1/notes", params=params))

    def iter_notes(self, **filters: Any) -> Iterator[dict[str, Any]]:
        return keyset_items(lambda cursor: self.list_notes(**filters, cursor=cursor))

    def delete_note(self, ref: str) -> None:
        """`DELETE /v1/notes/{ref}`: 404 when there is no such note, except on a retry after a cut
        connection, where the first attempt deleted it."""
        try:
            self.request("DELETE", path("notes", ref))
        except DovecoteError as exc:
            if not (exc.status == 404 and exc.attempts > 1):
                raise

    def delete_note_at(self, key: str, run: int, name: str, author: str = "") -> None:
        self.delete_note(note_ref(key, run, name, author))
