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

import io
import json
import os
import pickle
import re
import struct
import sys
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

# The services Dovecote uses locally; a new one must be added here to survive a restart.
SERVICES = ("dynamodb", "s3", "sqs", "kms", "secretsmanager")
SNAPSHOT = "moto.snapshot"
JOURNAL_PREFIX = "moto.journal."
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
OWN_FILES = re.compile(r"^\.?(moto\.snapshot|moto\.journal\.\d+|env\.json|dev-tokens\.json)(\.tmp)?$|^recall\.sqlite")
# The S3 version id moto answered a journaled write with: DynamoDB items name body versions, and a
# replayed PUT draws a new random id, so the replay gives the new version the journaled id back.
VERSION_KEY = "DOVECOTE_S3_VERSION_ID"


# ---- the journal --------------------------------------------------------------------------------


def frame(payload: bytes) -> bytes:
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def read_records(path: Path) -> Iterator[bytes]:
    """The whole records of a journal, in order; stops at the first torn or corrupt one."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, crc = _HEADER.unpack_from(data, offset)
        start = offset + _HEADER.size
        if length > _MAX_RECORD or start + length > len(data):
            return
        payload = data[start : start + length]
        if zlib.crc32(payload) != crc:
            return
        yield payload
        offset = start + length


class Journal:
    """Append-only; one `os.write` per record (looped only if the kernel writes short)."""

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        self.path = path
        self._fsync = fsync
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE)
        self.records = 0

    def append(self, payload: bytes) -> None:
        view = memoryview(frame(payload))
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


def _versioned_store(cls: type, lists: list[tuple[str, list[Any]]]) -> Any:
    store = cls()
    for key, versions in lists:
        store.setlist(key, versions)
    return store


class _StatePickler(pickle.Pickler):
    """Locks and conditions come back new and free; private keys (KMS) travel as PKCS#8 DER; an S3
    bucket's key store keeps every version (its `items()` names only the latest, which is what
    pickle's default for a dict subclass would save)."""

    _LOCKS = (type(threading.Lock()), type(threading.RLock()))

    def __init__(self, file: Any) -> None:
        from moto.s3.utils import _VersionedKeyStore

        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._versioned = _VersionedKeyStore

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, self._versioned):
            return _versioned_store, (type(obj), list(obj.lists()))
        if isinstance(obj, self._LOCKS):
            return (threading.RLock if "RLock" in type(obj).__name__ else threading.Lock), ()
        if isinstance(obj, threading.Condition):
            return threading.Condition, ()
        if isinstance(obj, threading.Event):
            return threading.Event, ()
        module = type(obj).__module__
        if module.startswith("cryptography") and hasattr(obj, "private_bytes"):
            from cryptography.hazmat.primitives import serialization

            der = obj.private_bytes(
                serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
            return _private_key, (der,)
        return NotImplemented


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, write: Callable[[Any], None]) -> None:
    """Owner-only (0600) whatever the umask: the snapshot holds memories and the cursor key."""
    tmp = path.with_name(f".{path.name}.tmp")
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE), "wb") as handle:
        os.fchmod(handle.fileno(), PRIVATE_FILE)  # a temporary file left by a crash keeps its old mode
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def save_snapshot(directory: Path, generation: int) -> None:
    from moto.backends import get_backend

    state = {name: dict(get_backend(name)) for name in SERVICES}  # type: ignore[call-overload]

    def write(handle: Any) -> None:
        _StatePickler(handle).dump({"generation": generation, "backends": state})

    write_atomically(directory / SNAPSHOT, write)


def load_snapshot(directory: Path) -> int:
    """Put the snapshot's state into moto's backends; returns the journal generation to replay."""
    from moto.backends import get_backend

    with open(directory / SNAPSHOT, "rb") as handle:
        saved = pickle.load(handle)  # noqa: S301 - our own file, in the data directory the user named
    for name, accounts in saved["backends"].items():
        backends = get_backend(name)  # type: ignore[call-overload]
        backends.clear()
        backends.update(accounts)
    return int(saved["generation"])


def make_private(directory: Path) -> None:
    """Owner-only modes on DIR and its files, for a DIR written before they were (0755 / 0644)."""
    os.chmod(directory, PRIVATE_DIR)
    for entry in directory.iterdir():
        if OWN_FILES.match(entry.name) and entry.is_file() and not entry.is_symlink():
            os.chmod(entry, PRIVATE_FILE)


# ---- the store ----------------------------------------------------------------------------------


class DataDir:
    """The moto side of `--data DIR`: snapshot + journal generations (see the module docstring)."""

    def __init__(self, directory: Path, app: JournalingApp, *, fsync: bool | None = None) -> None:
        self.directory = directory
        self.app = app
        self.generation = 0
        self._fsync = os.environ.get("DOVECOTE_DEV_FSYNC", "") not in ("", "0") if fsync is None else fsync
        self.replayed = 0
        self.refused = 0
        self.snapshot_bytes = 0

    @property
    def initialized(self) -> bool:
        return (self.directory / SNAPSHOT).exists()

    def journal_path(self, generation: int) -> Path:
        return self.directory / f"{JOURNAL_PREFIX}{generation}"

    def recover(self) -> None:
        """Snapshot + its journal into moto, then compaction. Call before serving."""
        self.snapshot_bytes = (self.directory / SNAPSHOT).stat().st_size
        self.generation = load_snapshot(self.directory)
        journal = self.journal_path(self.generation)
        self.replayed, self.refused = replay(self.app.app, read_records(journal))
        stale = [p for p in self.directory.glob(f"{JOURNAL_PREFIX}*") if p != journal]
        if (journal.exists() and journal.stat().st_size) or stale:
            self.compact()  # after a clean stop the journal is empty: the snapshot is already current

    def compact(self) -> None:
        """A new snapshot and an empty journal; no request may run meanwhile (start and stop)."""
        with _ORDER:
            if self.app.journal is not None:
                self.app.journal.close()
                self.app.journal = None
            self.generation += 1
            save_snapshot(self.directory, self.generation)
            for old in self.directory.glob(f"{JOURNAL_PREFIX}*"):
                if old.name != f"{JOURNAL_PREFIX}{self.generation}":
                    old.unlink()

    def open_journal(self) -> None:
        with _ORDER:
            self.app.journal = Journal(self.journal_path(self.generation), fsync=self._fsync)

    def close(self) -> None:
        """Clean stop: compact so the next start loads one snapshot and replays nothing."""
        with _ORDER:
            self.app.closed = True
            self.compact()
