"""The journal of `dovecote dev --data DIR`: every mutating AWS request the moto server answered 2xx.

`moto.journal.<g>` holds the requests since snapshot `g` began (infra/local/snapshot.py): each one's
WSGI environ (method, path, query, headers) and its body, one framed record each, appended with one
`os.write` on an O_APPEND descriptor *before* the response leaves the server. A record is
`length (4 bytes) | crc32 (4 bytes) | payload`; a torn or garbled tail (kill -9 halfway through a
write) fails the length or the CRC and it and everything after it is ignored. No fsync per record:
the page cache survives the death of the process (kill -9), not the loss of the machine's power;
`DOVECOTE_DEV_FSYNC=1` fsyncs every record for that case too.

Order = execution order: a mutating request runs and is journaled under one lock (`ORDER`), so two
requests that raced are journaled in the order moto applied them; reads (Get*, Query, Scan,
Receive*, Decrypt, ...) bypass it. A replay applies the records in order through moto's own WSGI
dispatch (no socket).
"""

from __future__ import annotations

import io
import json
import os
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

JOURNAL_PREFIX = "moto.journal."
# DIR and what it holds are the owner's only: moto's state holds memories in plaintext, the cursor
# signing key and the dev tokens.
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
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
# Held while a mutating request runs and is journaled; a snapshot's cut takes it too.
ORDER = threading.RLock()
# The S3 version id moto answered a journaled write with: DynamoDB items name body versions, and a
# replayed PUT draws a new random id, so the replay gives the new version the journaled id back.
VERSION_KEY = "DOVECOTE_S3_VERSION_ID"


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
    """Append-only; one `os.write` per record (looped only if the kernel writes short). Counts what
    it holds: records, bytes, and `cost_s`, the CPU seconds moto spent serving them (a replay runs
    the same code, so about what replaying them at the next start would cost)."""

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        self.path = path
        self._fsync = fsync
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE)
        self.records = 0
        self.bytes = 0
        self.cost_s = 0.0

    def append(self, payload: bytes, cost_s: float = 0.0) -> None:
        view = memoryview(frame(payload))
        self.bytes += len(view)
        self.cost_s += cost_s
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

        with ORDER:
            if self.journal is None:
                start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
                return [b"dovecote dev is stopping"]
            # The serving thread's CPU time, not the wall clock: waits for the GIL are not a replay's cost.
            spent = time.thread_time()
            result = self.app(environ, capture)
            try:
                chunks = list(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
            spent = time.thread_time() - spent
            status = captured[0]
            if status.startswith("2") and self.journal is not None:
                version = next((v for k, v in captured[1] if k.lower() == "x-amz-version-id"), None)
                if version is not None:
                    environ[VERSION_KEY] = version
                self.journal.append(encode_request(environ, body), spent)
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


def journal_generations(directory: Path) -> list[int]:
    suffixes = (p.name[len(JOURNAL_PREFIX) :] for p in directory.glob(f"{JOURNAL_PREFIX}*"))
    return sorted(int(suffix) for suffix in suffixes if suffix.isdigit())
