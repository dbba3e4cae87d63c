"""In-memory TranscriptArchive and IngestLedger: the fakes the unit tests and the benchmarks use, held
to the same contract as the S3 archive and the DynamoDB ledger (tests/integration)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace

from dovecote.platform.errors import NotFound
from dovecote.recall.ports import ArchiveEntry, PendingUpload, TopicEntry

# Presigned transcript uploads land here. Every `uploads/` object expires after a day (the bucket's
# lifecycle): the raw copy that is kept is the archive's, under `transcripts/`.
TRANSCRIPT_UPLOADS_PREFIX = "uploads/transcripts/"


def archive_key(authority: str, name: str, fmt: str) -> str:
    return f"transcripts/{authority}/{fmt}/{name}"


def upload_key(authority: str, upload_id: str) -> str:
    return f"{TRANSCRIPT_UPLOADS_PREFIX}{authority}/{upload_id}"


class InMemoryArchive:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, tuple[bytes, ArchiveEntry]] = {}
        self._topics: dict[tuple[str, str, str], TopicEntry] = {}
        self.uploads: dict[str, bytes] = {}

    def put(self, authority: str, name: str, body: bytes, entry: ArchiveEntry) -> ArchiveEntry:
        key = archive_key(authority, name, entry.format)
        stored = replace(entry, key=key)
        with self._lock:
            self._objects[key] = (bytes(body), stored)
        return stored

    def keys(self, authority: str) -> Iterator[str]:
        prefix = f"transcripts/{authority}/"
        with self._lock:
            found = sorted(key for key in self._objects if key.startswith(prefix))
        yield from found

    def get(self, authority: str, key: str) -> tuple[bytes, ArchiveEntry]:
        if not key.startswith(f"transcripts/{authority}/"):
            raise NotFound("transcript not found", key=key)
        with self._lock:
            if key not in self._objects:
                raise NotFound("transcript not found", key=key)
            return self._objects[key]

    def put_topic(self, authority: str, topic: TopicEntry) -> None:
        with self._lock:
            self._topics[(authority, topic.session_id, topic.start_uuid)] = topic

    def topics(self, authority: str) -> Iterator[TopicEntry]:
        with self._lock:
            found = [t for (a, _, _), t in sorted(self._topics.items()) if a == authority]
        yield from found

    def presign_upload(self, authority: str, upload_id: str, expires_in: int) -> str:
        return f"memory://{upload_key(authority, upload_id)}"

    def upload(self, url: str, body: bytes) -> None:
        """What an HTTP PUT to the presigned URL does."""
        with self._lock:
            self.uploads[url.removeprefix("memory://")] = bytes(body)

    def read_upload(self, authority: str, upload_id: str) -> bytes:
        with self._lock:
            body = self.uploads.get(upload_key(authority, upload_id))
        if body is None:
            raise NotFound("no upload found", upload_id=upload_id)
        return body

    def upload_exists(self, authority: str, upload_id: str) -> bool:
        with self._lock:
            return upload_key(authority, upload_id) in self.uploads

    def delete_upload(self, authority: str, upload_id: str) -> None:
        with self._lock:
            self.uploads.pop(upload_key(authority, upload_id), None)


class InMemoryLedger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], PendingUpload] = {}

    def add(self, authority: str, upload: PendingUpload) -> None:
        with self._lock:
            self._entries[(authority, upload.upload_id)] = upload

    def get(self, authority: str, upload_id: str) -> PendingUpload | None:
        with self._lock:
            return self._entries.get((authority, upload_id))

    def fail(self, authority: str, upload_id: str, error: str) -> None:
        with self._lock:
            entry = self._entries.get((authority, upload_id))
            if entry is not None:
                self._entries[(authority, upload_id)] = replace(entry, status="failed", error=error)

    def clear(self, authority: str, upload_id: str) -> None:
        with self._lock:
            self._entries.pop((authority, upload_id), None)

    def pending(self, authority: str, now: str) -> list[PendingUpload]:
        with self._lock:
            return sorted(
                (
                    e
                    for (a, _), e in self._entries.items()
                    if a == authority and e.status == "pending" and (not e.expires_at or e.expires_at > now)
                ),
                key=lambda e: (e.created_at, e.upload_id),
            )
