"""`dovecote dev --data DIR`: moto's state survives restarts and kill -9.

Layout of DIR:
- `moto.snapshot`: a pickle of moto's backends (DynamoDB, S3, SQS, KMS, Secrets Manager) plus the
  generation `g` of the journal that continues it. Written to a temporary file, fsynced, renamed
  over the old one, and the directory fsynced: a reader sees the old snapshot or the new, whole.
- `moto.journal.<g>`: every mutating AWS request the moto server answered 2xx since that snapshot
  (its WSGI environ: method, path, query, headers; and its body), one framed record each,
  appended with one `os.write` on an O_APPEND descriptor *before* the response leaves the server.
  A record is `length (4 bytes) | crc32 (4 bytes) | payload`; a torn or garbled tail (kill -9
  halfway through a write) fails the length or the CRC and it and everything after it is ignored.
  No fsync per record: the page cache survives the death of the process (kill -9), not the loss of
  the machine's power; `DOVECOTE_DEV_FSYNC=1` fsyncs every record for that case too.
- `env.json` (settings: table names, queue URLs, KMS key, secret ARN) and `dev-tokens.json` (the
  dev tokens' strings): written once at the first start, before the first snapshot.
- `recall.sqlite` (+ `-wal`): the recall index (SQLite FTS5, WAL, its own durability).

DIR is 0700 and every file in it 0600 (`make_private` fixes a DIR written before, at each start).

Order = execution order: a mutating request runs and is journaled under one lock (`_ORDER`), so two
requests that raced are journaled in the order moto applied them; reads (Get*, Query, Scan,
Receive*, Decrypt, ...) bypass it.

Start: load the snapshot, replay journal `g` through the same WSGI app (moto's own dispatch, no
socket), then compact: write snapshot `g+1` and delete journal `g`. A crash between the two
leaves journal `g` behind, which snapshot `g+1` ignores (deleted at the next start), so nothing is
applied twice. Clean stop compacts the same way.
"""

from __future__ import annotations

import gc
import hashlib
import io
import json
import logging
import os
import pickle
import re
import signal
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The services Dovecote uses locally; a new one must be added here to survive a restart.
SERVICES = ("dynamodb", "s3", "sqs", "kms", "secretsmanager")
SNAPSHOT = "moto.snapshot"
JOURNAL_PREFIX = "moto.journal."
PART_PREFIX = "moto.state."
BLOBS = "moto.blobs"
FORMAT = 2
_BLOB_NAME = re.compile(r"^[0-9a-f]{64}$")
_HEADER = struct.Struct(">II")
# A record larger than this is garbage from a torn write, not a real request (bodies stay < 6 MB
# through the gateway; direct S3 PUTs of large objects fit comfortably).
_MAX_RECORD = 1 << 30
# Operation-name prefixes that never change moto's state (JSON and query protocols).
_READS = (
    "Get",
    "Describe",
    "List",
    "Query",
    "Scan",
    "BatchGet",
    "TransactGet",
    "Receive",
    "Decrypt",
    "Encrypt",
    "GenerateDataKey",
    "GenerateRandom",
    "Sign",
    "Verify",
)
# The environ keys a replay needs: the request as moto's dispatcher saw it.
_ENVIRON_KEYS = ("REQUEST_METHOD", "PATH_INFO", "QUERY_STRING", "RAW_URI", "REQUEST_URI", "CONTENT_TYPE")
_ORDER = threading.RLock()
# DIR and what it holds are the owner's only: moto's state holds memories in plaintext, the cursor
# signing key and the dev tokens.
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
# The files of DIR (the module docstring); `make_private` touches nothing else a user keeps there.
OWN_FILES = re.compile(
    r"^\.?(moto\.snapshot|moto\.journal\.\d+|moto\.state\.[a-z0-9]+\.\d+|moto\.blobs|env\.json|dev-tokens\.json)(\.tmp)?$"
    r"|^recall\.sqlite"
)
# The S3 version id moto answered a journaled write with: DynamoDB items name body versions, and a
# replayed PUT draws a new random id, so the replay gives the new version the journaled id back.
VERSION_KEY = "DOVECOTE_S3_VERSION_ID"


# ---- the journal --------------------------------------------------------------------------------


def frame(payload: bytes) -> bytes:
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def read_records(path: Path) -> Iterator[bytes]:
    """The whole records of a journal, in order; stops at the first torn or corrupt one."""
    yield from read_journal(path)[0]


def read_journal(path: Path) -> tuple[list[bytes], bool]:
    """The whole records of a journal, and whether they are all of it (False: it ends with a torn
    or corrupt record, which and everything after it is ignored)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], True
    records: list[bytes] = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, crc = _HEADER.unpack_from(data, offset)
        start = offset + _HEADER.size
        if length > _MAX_RECORD or start + length > len(data):
            break
        payload = data[start : start + length]
        if zlib.crc32(payload) != crc:
            break
        records.append(payload)
        offset = start + length
    return records, offset == len(data)


class Journal:
    """Append-only; one `os.write` per record (looped only if the kernel writes short)."""

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        self.path = path
        self._fsync = fsync
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE)
        self.records = 0
        self.bytes = 0

    def append(self, payload: bytes) -> None:
        view = memoryview(frame(payload))
        self.bytes += len(view)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        if self._fsync:
            os.fsync(self._fd)
        self.records += 1

    def close(self) -> None:
        os.close(self._fd)


def encode_request(environ: dict[str, Any], body: bytes) -> bytes:
    meta = {k: environ[k] for k in (*_ENVIRON_KEYS, VERSION_KEY) if k in environ}
    meta.update({k: v for k, v in environ.items() if k.startswith("HTTP_") and k != "HTTP_TRANSFER_ENCODING"})
    head = json.dumps(meta, separators=(",", ":")).encode()
    return struct.pack(">I", len(head)) + head + body


def decode_request(payload: bytes) -> tuple[dict[str, str], bytes]:
    (size,) = struct.unpack_from(">I", payload)
    return json.loads(payload[4 : 4 + size]), payload[4 + size :]


def operation(environ: dict[str, Any], body: bytes) -> str:
    """The AWS operation name, or "" for S3's REST calls (named by their method)."""
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    if target:
        return target.rsplit(".", 1)[-1]
    if str(environ.get("CONTENT_TYPE", "")).startswith("application/x-www-form-urlencoded"):
        from urllib.parse import parse_qs

        action = parse_qs(body.decode("latin-1")).get("Action") or parse_qs(environ.get("QUERY_STRING", "")).get(
            "Action"
        )
        if action:
            return action[0]
    return ""


def mutates(environ: dict[str, Any], body: bytes) -> bool:
    name = operation(environ, body)
    if name:
        return not name.startswith(_READS)
    return environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD", "OPTIONS")


def replace_body(environ: dict[str, Any], body: bytes) -> None:
    """Put a body that was read back into the environ, for the app behind."""
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    environ.pop("HTTP_TRANSFER_ENCODING", None)
    environ.pop("wsgi.input_terminated", None)


class JournalingApp:
    """WSGI middleware in front of moto's dispatcher: a mutating request answered 2xx is journaled
    before its response is handed to the server, so every acknowledged write is on the journal."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.journal: Journal | None = None
        # Set by the final compaction: a write that slipped past the server's shutdown is refused
        # (503), never acknowledged and left off the journal.
        self.closed = False

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if self.journal is None and not self.closed:
            return self.app(environ, start_response)
        from werkzeug.wsgi import get_input_stream

        body = get_input_stream(environ).read()
        replace_body(environ, body)
        if not mutates(environ, body):
            return self.app(environ, start_response)
        captured: list[Any] = []

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], Any]:
            captured[:] = [status, headers, exc_info]
            return lambda _chunk: None

        with _ORDER:
            if self.journal is None:
                start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
                return [b"dovecote dev is stopping"]
            result = self.app(environ, capture)
            try:
                chunks = list(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
            status = captured[0]
            if status.startswith("2") and self.journal is not None:
                version = next((v for k, v in captured[1] if k.lower() == "x-amz-version-id"), None)
                if version is not None:
                    environ[VERSION_KEY] = version
                self.journal.append(encode_request(environ, body))
        start_response(*captured)
        return chunks


def replay(app: Callable[..., Iterable[bytes]], records: Iterable[bytes]) -> tuple[int, int]:
    """Apply journaled requests in order through moto's dispatch. Returns (replayed, refused): a
    refused one is expected only where moto's answer depended on randomness, e.g. an SQS delete
    whose receipt handle the replayed receive never issued (the message is delivered again)."""
    done = refused = 0
    for payload in records:
        meta, body = decode_request(payload)
        environ: dict[str, Any] = {
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": False,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "0",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            **meta,
        }
        replace_body(environ, body)
        status: list[str] = []
        headers: list[tuple[str, str]] = []

        def start_response(
            s: str, h: list[tuple[str, str]], _exc: Any = None, status: list[str] = status, headers: Any = headers
        ) -> Any:
            status.append(s)
            headers.extend(h)
            return lambda _chunk: None

        result = app(environ, start_response)
        for _ in result:
            pass
        close = getattr(result, "close", None)
        if close is not None:
            close()
        done += 1
        if not status or not status[0].startswith("2"):
            refused += 1
            continue
        drawn = next((v for k, v in headers if k.lower() == "x-amz-version-id"), None)
        if meta.get(VERSION_KEY) and drawn and drawn != meta[VERSION_KEY]:
            _rename_version(str(meta.get("PATH_INFO", "")), drawn, meta[VERSION_KEY])
    return done, refused


def _rename_version(path: str, drawn: str, journaled: str) -> None:
    """Give the S3 object version a replay created the id the original request got (path-style
    `/bucket/key`, as boto3 and presigned URLs address the local endpoint)."""
    from moto.backends import get_backend

    parts = path.lstrip("/").split("/", 1)
    if len(parts) != 2:
        return
    bucket_name, key = parts
    for account in get_backend("s3").values():  # type: ignore[call-overload]
        for backend in account.values():
            bucket = backend.buckets.get(bucket_name)
            if bucket is None:
                continue
            for version in bucket.keys.getlist(key, []):
                if getattr(version, "_version_id", None) == drawn:
                    version._version_id = journaled
                    return


# ---- the snapshot -------------------------------------------------------------------------------


def _private_key(der: bytes) -> Any:
    from cryptography.hazmat.primitives.serialization import load_der_private_key

    return load_der_private_key(der, password=None)


def _plain_dict(cls: Any, items: dict[str, Any]) -> Any:
    """A dict subclass filled without its `__setitem__`: moto's LimitedSizeDict (a DynamoDB item's
    attributes) sums the size of every attribute at each one set, so unpickling an item the default
    way (one __setitem__ per attribute) was quadratic, and most of a restore's time."""
    mapping = cls.__new__(cls)
    dict.update(mapping, items)
    return mapping


def _versioned_store(cls: type, lists: list[tuple[str, list[Any]]]) -> Any:
    store = cls()
    for key, versions in lists:
        store.setlist(key, versions)
    return store


class Blobs:
    """S3 object bodies as files named by their SHA-256, outside the pickles: written once, never
    rewritten by a later snapshot, read back with one `read` each (not unpickled)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.referenced: set[str] = set()
        self.written = 0
        self.written_bytes = 0
        self._existing: set[str] | None = None

    def put_known(self, digest: str) -> str:
        """A body already in a blob file of this DIR (a restored key nobody touched)."""
        self.referenced.add(digest)
        return digest

    def put(self, body: bytes) -> str:
        digest = hashlib.sha256(body).hexdigest()
        self.referenced.add(digest)
        if self._existing is None:
            self.directory.mkdir(mode=PRIVATE_DIR, exist_ok=True)
            self._existing = {p.name for p in self.directory.iterdir() if _BLOB_NAME.match(p.name)}
        if digest not in self._existing:
            write_atomically(self.directory / digest, lambda f: f.write(body), sync_dir=False)
            self._existing.add(digest)
            self.written += 1
            self.written_bytes += len(body)
        return digest

    def read(self, digest: str) -> bytes:
        return (self.directory / digest).read_bytes()

    def unreferenced(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        return [p for p in self.directory.iterdir() if p.name not in self.referenced]


# Set while a snapshot is loaded: where restored S3 bodies are read from.
_LOADING: list[Blobs] = []


class LazyBody:
    """A restored S3 object's body buffer (FakeKey._value_buffer): the blob file is read the first
    time moto reads or writes the body, so a restore does not read every body (most are never read
    again before the next restart). Until then a snapshot names the same digest without reading it."""

    def __init__(self, path: Path, digest: str, max_size: int) -> None:
        self.path = path
        self.digest = digest
        self._max_size = max_size
        self._file: Any = None
        self._lock = threading.Lock()

    def materialized(self) -> Any:
        with self._lock:
            if self._file is None:
                import tempfile

                real = tempfile.SpooledTemporaryFile(max_size=self._max_size)
                real.write(self.path.read_bytes())
                real.seek(0)
                self._file = real
            return self._file

    @property
    def closed(self) -> bool:
        return bool(self._file.closed) if self._file is not None else False

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = io.BytesIO()
        self._file.close()

    def __getattr__(self, name: str) -> Any:  # seek, read, write, truncate, ...: the real buffer's
        return getattr(self.materialized(), name)


def _restore_key(cls: Any, state: dict[str, Any], digest: str) -> Any:
    """A FakeKey whose body stays in its blob file until used (FakeKey.__setstate__ would copy it
    into a new buffer at once)."""
    key = cls.__new__(cls)
    key.__dict__.update(state)
    key._value_buffer = LazyBody(_LOADING[-1].directory / digest, digest, state.get("_max_buffer_size") or 0)
    key.lock = threading.Lock()
    return key


def _buffer_bytes(buffer: Any) -> bytes:
    """The bytes of a FakeKey's SpooledTemporaryFile, without its lock and without moving the file
    offset (in a forked compaction the offset of a rolled-over file is shared with the server)."""
    try:
        if isinstance(buffer, LazyBody):
            if buffer._file is None:
                return buffer.path.read_bytes()
            buffer = buffer._file
        if buffer.closed:
            return b""  # a disposed (deleted) key
        inner = buffer._file
        if isinstance(inner, io.BytesIO):
            return inner.getvalue()
        fd = inner.fileno()
        size = os.fstat(fd).st_size
        chunks, offset = [], 0
        while offset < size:
            chunk = os.pread(fd, size - offset, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks)
    except (ValueError, OSError):
        return b""


class _StatePickler(pickle.Pickler):
    """Locks and conditions come back new and free; private keys (KMS) travel as PKCS#8 DER; an S3
    bucket's key store keeps every version (its `items()` names only the latest, which is what
    pickle's default for a dict subclass would save); an S3 object's body goes to `blobs` and its
    pickled state names the digest; a DynamoDB item's attributes are filled without moto's
    per-attribute size check (`_plain_dict`). `reducer_override` runs for every object: what it does
    for a type is decided once per type."""

    def __init__(self, file: Any, blobs: Blobs | None = None) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._blobs = blobs
        self._kinds: dict[type, Callable[[Any], Any] | None] = {}

    def reducer_override(self, obj: Any) -> Any:
        kind = type(obj)
        try:
            reduce = self._kinds[kind]
        except KeyError:
            reduce = self._kinds[kind] = self._reducer_for(kind)
        return NotImplemented if reduce is None else reduce(obj)

    def _reducer_for(self, kind: type) -> Callable[[Any], Any] | None:
        from moto.dynamodb.models.dynamo_type import LimitedSizeDict
        from moto.s3.models import FakeKey
        from moto.s3.utils import _VersionedKeyStore

        if kind is LimitedSizeDict:
            return lambda obj: (_plain_dict, (LimitedSizeDict, dict(obj)))
        if issubclass(kind, _VersionedKeyStore):
            return lambda obj: (_versioned_store, (type(obj), list(obj.lists())))
        if issubclass(kind, FakeKey) and self._blobs is not None:
            return self._reduce_key
        if kind in (type(threading.Lock()), type(threading.RLock())):
            lock = threading.RLock if "RLock" in kind.__name__ else threading.Lock
            return lambda _obj: (lock, ())
        if issubclass(kind, threading.Condition):
            return lambda _obj: (threading.Condition, ())
        if issubclass(kind, threading.Event):
            return lambda _obj: (threading.Event, ())
        if kind.__module__.startswith("cryptography") and hasattr(kind, "private_bytes"):
            return self._reduce_private_key
        return None

    def _reduce_key(self, key: Any) -> Any:
        # FakeKey.__getstate__ would read its body under the key's lock: here it is read directly.
        assert self._blobs is not None
        state = {k: v for k, v in key.__dict__.items() if k not in ("_value_buffer", "lock")}
        buffer = key._value_buffer
        if isinstance(buffer, LazyBody) and buffer._file is None:
            digest = self._blobs.put_known(buffer.digest)
        else:
            digest = self._blobs.put(_buffer_bytes(buffer))
        return _restore_key, (type(key), state, digest)

    @staticmethod
    def _reduce_private_key(obj: Any) -> Any:
        from cryptography.hazmat.primitives import serialization

        der = obj.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return _private_key, (der,)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, write: Callable[[Any], None], *, sync_dir: bool = True) -> None:
    """Owner-only (0600) whatever the umask: the snapshot holds memories and the cursor key."""
    tmp = path.with_name(f".{path.name}.tmp")
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE), "wb") as handle:
        os.fchmod(handle.fileno(), PRIVATE_FILE)  # a temporary file left by a crash keeps its old mode
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    if sync_dir:
        _fsync_dir(path.parent)


def part_name(service: str, generation: int) -> str:
    return f"{PART_PREFIX}{service}.{generation}"


def save_snapshot(directory: Path, generation: int) -> dict[str, Any]:
    """moto's state as one pickle per service plus the S3 bodies as blob files, then the manifest
    that names them (renamed into place last: until then the previous snapshot stands whole), then
    what the new snapshot made stale. Returns the figures (bytes per part, blobs written)."""
    from moto.backends import get_backend

    started = time.perf_counter()
    blobs = Blobs(directory / BLOBS)
    parts: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for service in SERVICES:
        accounts = dict(get_backend(service))  # type: ignore[call-overload]
        name = part_name(service, generation)

        def write(handle: Any, accounts: dict[str, Any] = accounts) -> None:
            _StatePickler(handle, blobs).dump(accounts)

        write_atomically(directory / name, write, sync_dir=False)
        parts[service] = name
        sizes[service] = (directory / name).stat().st_size
    if blobs.written:
        _fsync_dir(blobs.directory)
    manifest = {"format": FORMAT, "generation": generation, "parts": parts, "blobs": len(blobs.referenced)}
    write_atomically(directory / SNAPSHOT, lambda f: f.write(json.dumps(manifest).encode()))
    removed = remove_stale(directory, manifest, blobs)
    return {
        "seconds": time.perf_counter() - started,
        "parts": sizes,
        "blobs": len(blobs.referenced),
        "blobs_written": blobs.written,
        "blob_bytes_written": blobs.written_bytes,
        "removed": removed,
    }


def read_manifest(directory: Path) -> dict[str, Any]:
    """The snapshot's manifest; a snapshot of the first layout (one pickle) reads as format 1."""
    path = directory / SNAPSHOT
    with open(path, "rb") as handle:
        first = handle.read(1)
    if first == b"{":
        return dict(json.loads(path.read_bytes()))
    return {"format": 1, "generation": None, "parts": {}, "blobs": []}


def load_snapshot(directory: Path) -> int:
    """Put the snapshot's state into moto's backends; returns the generation of the first journal
    to replay."""
    return int(load_snapshot_timed(directory)["generation"])


def load_snapshot_timed(directory: Path) -> dict[str, Any]:
    from moto.backends import get_backend

    manifest = read_manifest(directory)
    seconds: dict[str, float] = {}
    if manifest["format"] == 1:
        started = time.perf_counter()
        with open(directory / SNAPSHOT, "rb") as handle:
            saved = pickle.load(handle)  # noqa: S301 - our own file, in the data directory the user named
        for name, accounts in saved["backends"].items():
            backends = get_backend(name)  # type: ignore[call-overload]
            backends.clear()
            backends.update(accounts)
            for account in accounts:
                backends[account]  # noqa: B018 - indexing registers the dict with moto's reset (tests)
        seconds["all"] = time.perf_counter() - started
        return {"generation": int(saved["generation"]), "seconds": seconds, "format": 1}
    _LOADING.append(Blobs(directory / BLOBS))
    # Unpickling makes millions of objects, none of them garbage: the cyclic collector would walk
    # the growing heap again and again (a third of the load time).
    collecting = gc.isenabled()
    gc.disable()
    try:
        for service, name in manifest["parts"].items():
            started = time.perf_counter()
            with open(directory / name, "rb") as handle:
                accounts = pickle.load(handle)  # noqa: S301 - our own file, in the data directory the user named
            backends = get_backend(service)  # type: ignore[call-overload]
            backends.clear()
            backends.update(accounts)
            for account in accounts:
                backends[account]  # noqa: B018 - indexing registers the dict with moto's reset (tests)
            seconds[service] = time.perf_counter() - started
    finally:
        _LOADING.pop()
        if collecting:
            gc.enable()
    return {"generation": int(manifest["generation"]), "seconds": seconds, "format": FORMAT}


def journal_generations(directory: Path) -> list[int]:
    suffixes = (p.name[len(JOURNAL_PREFIX) :] for p in directory.glob(f"{JOURNAL_PREFIX}*"))
    return sorted(int(suffix) for suffix in suffixes if suffix.isdigit())


def remove_stale(directory: Path, manifest: dict[str, Any], blobs: Blobs | None = None) -> int:
    """Delete what the manifest made stale: journals before its generation, parts it does not name,
    temporary files, and (given the `blobs` the snapshot was written with) the blob files it does
    not reference. Returns how many files went."""
    keep_parts = set(manifest["parts"].values())
    stale = [directory / f"{JOURNAL_PREFIX}{g}" for g in journal_generations(directory) if g < manifest["generation"]]
    stale += [p for p in directory.glob(f"{PART_PREFIX}*") if p.name not in keep_parts]
    stale += [p for p in directory.glob(f".{PART_PREFIX}*.tmp")]
    if blobs is not None:  # the snapshot just written: the blobs it references, and no others
        stale += blobs.unreferenced()
    for path in stale:
        path.unlink(missing_ok=True)
    return len(stale)


def make_private(directory: Path) -> None:
    """Owner-only modes on DIR and its files, for a DIR written before they were (0755 / 0644)."""
    os.chmod(directory, PRIVATE_DIR)
    for entry in directory.iterdir():
        if entry.is_symlink() or not OWN_FILES.match(entry.name):
            continue
        if entry.is_file():
            os.chmod(entry, PRIVATE_FILE)
        elif entry.is_dir() and entry.name == BLOBS:
            os.chmod(entry, PRIVATE_DIR)
            for blob in entry.iterdir():
                if blob.is_file() and not blob.is_symlink():
                    os.chmod(blob, PRIVATE_FILE)


# ---- the store ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactionPolicy:
    """When the runtime snapshots in the background: the journal since the last snapshot holds
    `records` records or `size_bytes`, or has held any record for `age_s`. A restart after a crash
    replays at most that (plus what arrived while the last compaction ran)."""

    records: int = 500
    size_bytes: int = 32 << 20
    age_s: float = 300.0
    check_s: float = 1.0

    @classmethod
    def from_env(cls) -> CompactionPolicy:
        """DOVECOTE_DEV_COMPACT_RECORDS and DOVECOTE_DEV_COMPACT_AGE_S override the defaults."""
        default = cls()
        records = os.environ.get("DOVECOTE_DEV_COMPACT_RECORDS")
        age = os.environ.get("DOVECOTE_DEV_COMPACT_AGE_S")
        return cls(
            records=int(records) if records else default.records,
            age_s=float(age) if age else default.age_s,
        )


def _prctl() -> Any:
    """libc's prctl, looked up before any fork (a child of a threaded process does no dlopen)."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _die_with_parent(prctl: Any, parent: int) -> None:
    """Linux: the forked compaction gets SIGKILL when the thread that forked it ends (kill -9 of the
    runtime included), so it never writes into a DIR another runtime has opened since."""
    if prctl is not None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(3)


class DataDir:
    """The moto side of `--data DIR`: snapshot + journal generations (see the module docstring)."""

    def __init__(
        self,
        directory: Path,
        app: JournalingApp,
        *,
        fsync: bool | None = None,
        lock_fd: int = -1,
        policy: CompactionPolicy | None = None,
    ) -> None:
        self.directory = directory
        self.app = app
        self.generation = 0
        self._fsync = os.environ.get("DOVECOTE_DEV_FSYNC", "") not in ("", "0") if fsync is None else fsync
        self._lock_fd = lock_fd
        self.policy = policy or CompactionPolicy.from_env()
        self.replayed = 0
        self.refused = 0
        self.snapshot_bytes = 0
        self.restore: dict[str, Any] = {}
        self.background: list[dict[str, Any]] = []  # one entry per background compaction
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._child = 0
        self._opened_at = time.monotonic()
        self._run_now = threading.Event()
        self._pending_fold = False
        self._prctl: Any = None
        # Called at each cut, under the journal's and moto's locks: the runtime drops the stream
        # records its poller has consumed (infra/local/streams.py trim_consumed).
        self.before_cut: Callable[[], None] | None = None

    @property
    def initialized(self) -> bool:
        return (self.directory / SNAPSHOT).exists()

    def journal_path(self, generation: int) -> Path:
        return self.directory / f"{JOURNAL_PREFIX}{generation}"

    def recover(self) -> None:
        """Snapshot + every journal since it, in order, into moto. Call before serving. The journal
        opened next is a new generation (a replayed one may end with a torn record); the snapshot
        that folds them in is written in the background (`start_background`), so the start does not
        wait for it."""
        started = time.perf_counter()
        manifest = read_manifest(self.directory)
        self.snapshot_bytes = sum(
            (self.directory / name).stat().st_size for name in [SNAPSHOT, *manifest["parts"].values()]
        )
        loaded = load_snapshot_timed(self.directory)
        first = loaded["generation"]
        generations = [g for g in journal_generations(self.directory) if g >= first]
        replay_started = time.perf_counter()
        for index, generation in enumerate(generations):
            path = self.journal_path(generation)
            records, whole = read_journal(path)
            done, refused = replay(self.app.app, records)
            self.replayed += done
            self.refused += refused
            if not whole and index < len(generations) - 1:
                # Only the last journal can end torn (a kill -9 mid-append); a damaged earlier one
                # ends the replay there, so no later write is applied without the ones before it.
                logging.getLogger("dovecote-dev").error(
                    "%s is damaged after %d records: the journals after it are not replayed", path, len(records)
                )
                break
        self.restore = {
            "load_s": loaded["seconds"],
            "replay_s": time.perf_counter() - replay_started,
            "journals": len(generations),
            "format": loaded["format"],
            "total_s": time.perf_counter() - started,
        }
        self.generation = max([first, *(g + 1 for g in generations)])
        self._pending_fold = bool(self.replayed or len(generations) > 1 or loaded["format"] != FORMAT)
        if not self._pending_fold:
            remove_stale(self.directory, manifest)

    def compact(self) -> None:
        """A new snapshot now and an empty journal; no request may run meanwhile (first start, stop)."""
        from infra.local.moto_patches import DYNAMODB_LOCK, SQS_LOCK

        with _ORDER, DYNAMODB_LOCK, SQS_LOCK:
            if self.app.journal is not None:
                self.app.journal.close()
                self.app.journal = None
            self._cut_hook()
            self.generation += 1
            save_snapshot(self.directory, self.generation)

    def _cut_hook(self) -> None:
        if self.before_cut is not None:
            try:
                self.before_cut()
            except Exception:  # noqa: BLE001 - a trim that failed leaves more in the snapshot, nothing less
                logging.getLogger("dovecote-dev").exception("trimming before the snapshot failed")

    def open_journal(self) -> None:
        with _ORDER:
            self.app.journal = Journal(self.journal_path(self.generation), fsync=self._fsync)
            self._opened_at = time.monotonic()

    def start_background(self) -> None:
        """The compactor thread: it snapshots in a forked child when the policy says so (and at once
        after a start that replayed journals)."""
        if self._pending_fold:
            self._run_now.set()
        # Everything the forked child runs is imported here, in the parent: a child of a threaded
        # process must not import (another thread may have held an import lock at the fork).
        import traceback  # noqa: F401

        from cryptography.hazmat.primitives import serialization  # noqa: F401
        from moto.dynamodb.models.dynamo_type import LimitedSizeDict  # noqa: F401
        from moto.s3.models import FakeKey  # noqa: F401
        from moto.s3.utils import _VersionedKeyStore  # noqa: F401

        self._prctl = _prctl()
        self._thread = threading.Thread(target=self._compactor, name="dev-compactor", daemon=True)
        self._thread.start()

    def due(self) -> bool:
        journal = self.app.journal
        if journal is None:
            return False
        if self._run_now.is_set():
            return True
        if journal.records == 0:
            return False
        return (
            journal.records >= self.policy.records
            or journal.bytes >= self.policy.size_bytes
            or time.monotonic() - self._opened_at >= self.policy.age_s
        )

    def _compactor(self) -> None:
        while not self._stop.wait(self.policy.check_s):
            if not self.due():
                continue
            self._run_now.clear()
            try:
                self.compact_in_background()
            except Exception:  # noqa: BLE001 - a failed compaction leaves the journals, which stay correct
                logging.getLogger("dovecote-dev").exception("background compaction failed")

    def compact_in_background(self) -> dict[str, Any]:
        """Cut the journal and snapshot the state at the cut in a forked child, while the runtime
        goes on serving. The cut: under the journal's lock and moto's DynamoDB and SQS locks (no write
        and no receive is halfway), the journal moves to generation g+1 and the process forks: the
        child holds moto's state exactly as journal g ended, copy-on-write, and writes snapshot g+1;
        the parent appends to journal g+1. Until the child renames the manifest, snapshot + journals
        g and g+1 restore everything; after it, snapshot g+1 + journal g+1. Either way nothing is lost
        or applied twice. Call from one thread at a time (the compactor's)."""
        from infra.local.moto_patches import DYNAMODB_LOCK, SQS_LOCK

        read_end, write_end = os.pipe()
        with _ORDER, DYNAMODB_LOCK, SQS_LOCK:
            journal = self.app.journal
            if journal is None or self._stop.is_set():
                os.close(read_end)
                os.close(write_end)
                return {}
            folded = journal.records
            self._cut_hook()
            generation = self.generation + 1
            journal.close()
            self.app.journal = Journal(self.journal_path(generation), fsync=self._fsync)
            self.generation = generation
            self._opened_at = time.monotonic()
            parent = os.getpid()
            started = time.perf_counter()
            pid = os.fork()
            if pid == 0:  # the child: moto's state at the cut; no other thread runs here
                os.close(read_end)
                self._child_main(parent, generation, write_end)
        self._child = pid
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            answer = pipe.read()
        _, status = os.waitpid(pid, 0)
        self._child = 0
        took = time.perf_counter() - started
        log = logging.getLogger("dovecote-dev")
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and answer:
            figures = dict(json.loads(answer))
            figures.update({"generation": generation, "folded_records": folded, "wall_s": took})
            self.background.append(figures)
            self.snapshot_bytes = sum(figures["parts"].values())
            log.info(
                "compacted in the background in %.1fs: %d journal records folded into snapshot %d "
                "(%.1f MB, %d new S3 bodies)",
                took,
                folded,
                generation,
                self.snapshot_bytes / 1e6,
                figures["blobs_written"],
            )
            return figures
        if not self._stop.is_set():
            log.warning("background compaction %d failed (status %s): the journals stay", generation, status)
        return {}

    def _child_main(self, parent: int, generation: int, answer_fd: int) -> None:
        code = 1
        try:
            _die_with_parent(self._prctl, parent)
            if self._lock_fd >= 0:
                os.close(self._lock_fd)  # the DIR's lock is the runtime's alone
            figures = save_snapshot(self.directory, generation)
            os.write(answer_fd, json.dumps(figures).encode())
            code = 0
        except BaseException:  # noqa: BLE001 - reported through the exit status
            import traceback

            os.write(2, traceback.format_exc().encode(errors="replace"))
        finally:
            os._exit(code)

    def close(self) -> None:
        """Clean stop: stop the compactor (a compaction in flight is abandoned: its manifest is
        written whole or not at all), then compact so the next start loads one snapshot and
        replays nothing."""
        self._stop.set()
        child = self._child
        if child:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=60)
        with _ORDER:
            self.app.closed = True
            self.compact()


def _blob(digest: str) -> bytes:  # TEMPORARY shim for local DIRs written by an intermediate build
    return _LOADING[-1].read(digest)
