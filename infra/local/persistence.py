"""`dovecote dev --data DIR`: moto's state survives restarts and kill -9, and a restart is quick
whatever the uptime.

DIR holds a snapshot (infra/local/snapshot.py: a manifest, one pickle per service, S3 bodies as blob
files) and the journals that continue it (infra/local/journal.py: every acknowledged mutating AWS
request, appended before its answer leaves moto's server); `env.json` (settings: table names, queue
URLs, KMS key, secret ARN) and `dev-tokens.json` (the dev tokens), written once at the first start,
before the first snapshot; and `recall.sqlite` (+ `-wal`), the recall index (SQLite FTS5, WAL, its
own durability). DIR is 0700 and every file in it 0600 (`make_private` fixes a DIR written before).

Start: load snapshot `g` and replay journals `g`, `g+1`, ... in order through moto's own WSGI
dispatch, then serve at once on a new journal generation; the snapshot that folds the replayed
journals in is written in the background.

Background compaction (`DataDir.compact_in_background`), when the journal passes a record count, a
size or an age (`CompactionPolicy`): under the journal's lock and moto's DynamoDB and SQS locks (no
write and no receive is halfway) the journal moves from generation `g` to `g+1` and the process
forks. The child holds moto's state exactly as journal `g` ended (copy-on-write) and writes snapshot
`g+1`; the parent goes on serving, appending to journal `g+1`. Until the child renames the manifest,
snapshot `g` + journals `g` and `g+1` restore everything; after it, snapshot `g+1` + journal `g+1`
(journal `g` is then stale and deleted, never applied on top of the snapshot that holds it). Either
way nothing acknowledged is lost or applied twice, and a restart after a kill -9 replays at most one
policy's worth of records plus what arrived while the last compaction ran.

Clean stop: the compactor stops and a child in flight is let finish; a last snapshot is written in the
foreground only if the journal since the last one is past the policy's size bounds, so a stop stays
quick and the next start replays no more than after a crash.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.local.journal import (
    JOURNAL_PREFIX,
    ORDER,
    Journal,
    JournalingApp,
    journal_generations,
    read_journal,
    replay,
)
from infra.local.snapshot import (
    FORMAT,
    SNAPSHOT,
    libc_function,
    load_snapshot_timed,
    read_manifest,
    remove_stale,
    save_snapshot,
)


@dataclass(frozen=True)
class CompactionPolicy:
    """When the runtime snapshots in the background: the journal since the last snapshot would cost
    `replay_s` CPU seconds to replay (what moto spent serving its records: `Journal.cost_s`), or holds
    `records` records or `size_bytes` bytes, or has held any record for `age_s`. A restart after a
    crash replays at most that, plus what arrived while the last compaction ran. The replay cost is
    the bound that matters for the restart's time; the others bound the files whatever the mix.
    0.4 s: a replay also pays moto's first-request costs (its service models, about half a second
    whatever the count), and measured about twice the serving estimate at 1 s; at 0.4 a restart after
    a crash stays within 5 s (docs/benchmarks/notes.md, `bench/devstart.py`)."""

    replay_s: float = 0.4
    records: int = 2000
    size_bytes: int = 32 << 20
    age_s: float = 300.0
    check_s: float = 1.0

    @classmethod
    def from_env(cls) -> CompactionPolicy:
        """DOVECOTE_DEV_COMPACT_REPLAY_S, _RECORDS, _BYTES and _AGE_S override the defaults."""
        default = cls()

        def named(suffix: str, kind: Callable[[str], Any], fallback: Any) -> Any:
            value = os.environ.get(f"DOVECOTE_DEV_COMPACT_{suffix}")
            return kind(value) if value else fallback

        return cls(
            replay_s=named("REPLAY_S", float, default.replay_s),
            records=named("RECORDS", int, default.records),
            size_bytes=named("BYTES", int, default.size_bytes),
            age_s=named("AGE_S", float, default.age_s),
        )

    def due(self, journal: Journal, age_s: float) -> bool:
        if journal.records == 0:
            return False  # an empty journal is never worth a snapshot
        return (
            journal.cost_s >= self.replay_s
            or journal.records >= self.records
            or journal.bytes >= self.size_bytes
            or age_s >= self.age_s
        )


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
        self.stop_wait_s = 120.0
        # Called at each cut, under the journal's and moto's locks: the runtime drops the stream
        # records its poller has consumed (infra/local/streams.py trim_consumed).
        self.before_cut: Callable[[], None] | None = None

    @property
    def initialized(self) -> bool:
        return (self.directory / SNAPSHOT).exists()

    def journal_path(self, generation: int) -> Path:
        return self.directory / f"{JOURNAL_PREFIX}{generation}"

    def recover(self) -> None:
        """Snapshot + every journal since it, in order, into moto. Call before serving. After a replay
        the journal opened next is a new generation (a replayed one may end with a torn record), and
        the snapshot that folds them in is written in the background (`start_background`), so the
        start does not wait for it."""
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
        if self.replayed == 0:
            # Nothing to fold (a clean stop, or nothing written since the last snapshot): the empty
            # journals go, and the next one continues the snapshot's own generation.
            for generation in generations:
                self.journal_path(generation).unlink(missing_ok=True)
            self.generation = first
        else:
            self.generation = max(g + 1 for g in generations)
        self._pending_fold = bool(self.replayed or loaded["format"] != FORMAT)
        if not self._pending_fold:
            remove_stale(self.directory, manifest)

    def compact(self) -> None:
        """A new snapshot now and an empty journal; no request may run meanwhile (first start, stop)."""
        from infra.local.moto_patches import DYNAMODB_LOCK, SQS_LOCK

        with ORDER, DYNAMODB_LOCK, SQS_LOCK:
            if self.app.journal is not None:
                self.app.journal.close()
                self.app.journal = None
            self._cut_hook()
            self.generation += 1
            save_snapshot(self.directory, self.generation)
            self._pending_fold = False

    def _cut_hook(self) -> None:
        if self.before_cut is not None:
            try:
                self.before_cut()
            except Exception:  # noqa: BLE001 - a trim that failed leaves more in the snapshot, nothing less
                logging.getLogger("dovecote-dev").exception("trimming before the snapshot failed")

    def open_journal(self) -> None:
        with ORDER:
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

        self._prctl = libc_function("prctl")
        self._thread = threading.Thread(target=self._compactor, name="dev-compactor", daemon=True)
        self._thread.start()

    def due(self) -> bool:
        journal = self.app.journal
        if journal is None:
            return False
        if self._run_now.is_set():
            return True
        return self.policy.due(journal, time.monotonic() - self._opened_at)

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
        with ORDER, DYNAMODB_LOCK, SQS_LOCK:
            journal = self.app.journal
            if journal is None or self._stop.is_set():
                os.close(read_end)
                os.close(write_end)
                return {}
            folded, folded_cost = journal.records, journal.cost_s
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
            figures.update(
                {"generation": generation, "folded_records": folded, "folded_cost_s": folded_cost, "wall_s": took}
            )
            self.background.append(figures)
            self._pending_fold = False
            self.snapshot_bytes = sum(figures["parts"].values())
            log.info(
                "compacted in the background in %.1fs (%.1f CPU s): %d journal records (%.1f s to replay) "
                "folded into snapshot %d (%.1f MB, %d new S3 bodies)",
                took,
                figures["cpu_s"],
                folded,
                folded_cost,
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
            # The child lives seconds and frees nothing: a collection would walk (and copy, page by
            # page) the whole inherited heap for no garbage.
            gc.disable()
            if self._lock_fd >= 0:
                os.close(self._lock_fd)  # the DIR's lock is the runtime's alone
            figures = save_snapshot(self.directory, generation)
            figures["cpu_s"] = time.process_time()  # the child's own: a forked process starts at 0
            os.write(answer_fd, json.dumps(figures).encode())
            code = 0
        except BaseException:  # noqa: BLE001 - reported through the exit status
            import traceback

            os.write(2, traceback.format_exc().encode(errors="replace"))
        finally:
            os._exit(code)

    def close(self) -> None:
        """Clean stop: the compactor stops, and a compaction in flight is let finish (one still
        running after `stop_wait_s` is killed: its manifest is written whole or not at all). Then a
        last snapshot only if the journal since the last one is due by the policy's size bounds (its
        age aside): a stop stays quick, and the next start replays at most what the policy allows."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.stop_wait_s)
            child = self._child
            if self._thread.is_alive() and child:
                try:
                    os.kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self._thread.join(timeout=60)
        with ORDER:
            self.app.closed = True
            journal = self.app.journal
            current = read_manifest(self.directory)["generation"] == self.generation
            small = journal is not None and not self.policy.due(journal, age_s=0.0)
            if small and current and not self._pending_fold:
                assert journal is not None
                journal.close()  # the snapshot on disk and this journal are the state
                self.app.journal = None
                return
            self.compact()
