"""The snapshot of `dovecote dev --data DIR`: moto's state at the start of journal generation `g`.

- `moto.snapshot`: the manifest, a small JSON document naming the generation `g` of the journal that
  continues the snapshot and one part per service. Written to a temporary file, fsynced, renamed over
  the old one, and the directory fsynced: a reader sees the old snapshot or the new, whole. Renaming
  it is the commit; the parts and blobs it names were written and fsynced before.
- `moto.state.<service>.<g>`: a pickle of that service's backends (DynamoDB, S3, SQS, KMS, Secrets
  Manager): one per service, so each loads alone and a restore reports where its time went.
- `moto.blobs/<sha256>`: S3 object bodies, outside the pickles: written once, never rewritten by a
  later snapshot, and read back only when the object is first read or written after a restart
  (`LazyBody`): a restore does not read every body.

The pickler (`_StatePickler`) decides per type, once, how an object travels: locks come back new,
KMS private keys as DER, an S3 key store with every version, a DynamoDB item's attributes without
moto's quadratic per-attribute size check. The loader runs with the cyclic GC off (millions of new
objects, none of them garbage).
"""

from __future__ import annotations

import gc
import hashlib
import io
import json
import os
import pickle
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infra.local.journal import JOURNAL_PREFIX, PRIVATE_DIR, PRIVATE_FILE, journal_generations

# The services Dovecote uses locally; a new one must be added here to survive a restart.
SERVICES = ("dynamodb", "s3", "sqs", "kms", "secretsmanager")
SNAPSHOT = "moto.snapshot"
PART_PREFIX = "moto.state."
BLOBS = "moto.blobs"
FORMAT = 2
_BLOB_NAME = re.compile(r"[0-9a-f]{64}")  # fullmatch: a name with a final newline is not a blob
# The files of DIR (the module docstring); `make_private` touches nothing else a user keeps there.
OWN_FILES = re.compile(
    r"^\.?(moto\.snapshot|moto\.journal\.\d+|moto\.state\.[a-z0-9]+\.\d+|moto\.blobs|env\.json|dev-tokens\.json"
    r"|webhook-keys\.json)(\.tmp)?$"
    r"|^recall\.sqlite"
)


def _private_key(der: bytes) -> Any:
    from cryptography.hazmat.primitives.serialization import load_der_private_key

    # Our own key, written by cryptography: the RSA consistency check costs ~50 ms a key for nothing.
    return load_der_private_key(der, password=None, unsafe_skip_rsa_key_validation=True)


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


def libc_function(name: str) -> Any:
    """A libc function, or None where there is none (syncfs and prctl are Linux's). Look it up before
    any fork: a child of a threaded process must not dlopen (another thread may hold the loader's lock)."""
    try:
        import ctypes

        return getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None


_SYNCFS = libc_function("syncfs")


class Blobs:
    """S3 object bodies as files named by their SHA-256, outside the pickles: written once, never
    rewritten by a later snapshot, read back with one `read` each (not unpickled). A snapshot writes
    its new blobs without an fsync each (thousands after a seeding: 6 ms apiece here) and makes them
    durable at once with `sync` before its manifest names them."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.referenced: set[str] = set()
        self.written = 0
        self.written_bytes = 0
        self._existing: set[str] | None = None
        self._unsynced: list[Path] = []

    def put_known(self, digest: str) -> str:
        """A body already in a blob file of this DIR (a restored key nobody touched)."""
        self.referenced.add(digest)
        return digest

    def put(self, body: bytes) -> str:
        digest = hashlib.sha256(body).hexdigest()
        self.referenced.add(digest)
        if self._existing is None:
            self.directory.mkdir(mode=PRIVATE_DIR, exist_ok=True)
            self._existing = {p.name for p in self.directory.iterdir() if _BLOB_NAME.fullmatch(p.name)}
        path = self.directory / digest
        # A name alone is not proof: a blob renamed into place but never synced (a power cut before
        # the manifest that would have named it) may be short.
        if digest not in self._existing or path.stat().st_size != len(body):
            tmp = path.with_name(f".{digest}.tmp")
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE), "wb") as handle:
                handle.write(body)
            os.replace(tmp, path)
            self._existing.add(digest)
            self._unsynced.append(path)
            self.written += 1
            self.written_bytes += len(body)
        return digest

    def sync(self) -> None:
        """Every blob written so far, and their names, on disk: one syncfs of the DIR's filesystem
        (Linux), else an fsync per blob; then the directory."""
        if not self._unsynced:
            return
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            if _SYNCFS is None or _SYNCFS(fd) != 0:
                for path in self._unsynced:
                    with open(path, "rb") as handle:
                        os.fsync(handle.fileno())
            os.fsync(fd)
        finally:
            os.close(fd)
        self._unsynced.clear()

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
    blobs.sync()
    manifest = {
        "format": FORMAT,
        "generation": generation,
        "parts": parts,
        "blobs": len(blobs.referenced),
        "moto": moto_version(),
    }
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


class SnapshotOfAnotherMoto(RuntimeError):
    """The snapshot's pickles hold moto's own classes as another moto version laid them out: loading
    them into this one could put objects with missing or renamed fields into its backends (errors
    far from their cause, or data silently lost). Refused, before anything is loaded."""


def moto_version() -> str:
    from importlib.metadata import version

    return version("moto")


def check_moto_version(manifest: dict[str, Any]) -> None:
    """A snapshot names the moto version that wrote it (since this check; an older one names none
    and was written by the version the project pinned then, moto 5.2.5). pyproject.toml pins moto
    exactly, and tests/integration/test_dev_snapshot.py holds the pin to the installed version."""
    written = manifest.get("moto")
    if written is not None and written != moto_version():
        raise SnapshotOfAnotherMoto(
            f"this data directory's snapshot was written with moto {written}, and moto {moto_version()} is"
            f" installed: reinstall the version that wrote it (pip install moto[server]=={written}), or start"
            " with another --data directory"
        )


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
    check_moto_version(manifest)
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
            # The loaded state lives as long as the runtime: out of the collector's generations, no
            # later full collection walks it again (each one walked millions of objects, ~1.5 s of a
            # journal replay at 10k notes), and a forked compaction keeps its pages shared.
            gc.freeze()
            gc.enable()
    return {"generation": int(manifest["generation"]), "seconds": seconds, "format": FORMAT}


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
            # Its files are created 0600 (Blobs.put), and it is newer than the private modes: no
            # chmod of each of its thousands of files at every start.
            os.chmod(entry, PRIVATE_DIR)
