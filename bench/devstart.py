"""`dovecote dev --data DIR` start time: the first start and an empty restart; the restart after a
kill -9 that follows LOAD minutes of writes (notes, tasks and memory writes from four threads; the
runtime snapshots in the background meanwhile, so what is left to replay stays bounded whatever the
uptime); then, with NOTES notes and MESSAGES transcript messages seeded over HTTP, the restart after a
clean stop (snapshot only) and after a kill -9 that follows half a minute of writes. Also the clean
stop time, the files' sizes and the runtime's own log lines (snapshot load per service, journal
records replayed, background compactions).

A start is timed from spawning the process to the first 200 of `/v1/health` with the tokens file
written (what a client waits for); beside it, the CPU seconds the process used until then (on a busy
machine the wall time is mostly waiting for a core). Each clean restart figure is the median of
`rounds` starts. Progress goes to stderr as it happens, so a long run shows where it is.

Run alone: `python -m bench.devstart [--quick] [--notes N] [--messages M] [--load-minutes X]
[--rounds R] [--keep DIR [--reuse]]`. Defaults: 10,000 notes, 100,000 messages, 2 minutes of load, 3
rounds; `--quick`: 1,000 notes, 10,000 messages, 0.5 minute of load, 2 rounds. The issue's figure is
`--load-minutes 10` (or DEVSTART_LOAD_MINUTES=10 for `make bench`). `--reuse` starts from a DIR an
earlier `--keep` seeded and measures only the seeded restarts. `devstart_report()` is the entry the
main bench calls.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.common import ROOT, write_results

THREADS = 8
TICKS = os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds (fields 14 and 15 of /proc/<pid>/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / TICKS


class Dev:
    """One `dovecote dev` process; `ready_s` is how long it took to answer."""

    def __init__(self, work: Path, data: Path, *extra: str) -> None:
        import httpx

        self.tokens_file = work / "tokens.json"
        self.tokens_file.unlink(missing_ok=True)
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DOVECOTE_"))}
        self.log = (work / "dev.log").open("a")
        started = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dovecote.cli", "dev", "--port", str(port), "--write-profile", ""]
            + ["--data", str(data), "--tokens-file", str(self.tokens_file), *extra],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"dovecote dev exited early, see {work / 'dev.log'}")
            if self.tokens_file.exists():
                try:
                    if httpx.get(self.endpoint + "/v1/health", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
            time.sleep(0.02)
        else:
            raise RuntimeError("dovecote dev did not become ready")
        self.ready_s = time.perf_counter() - started
        self.ready_cpu_s = cpu_seconds(self.process.pid)
        self.tokens = json.loads(self.tokens_file.read_text())["tokens"]

    def stop(self) -> float:
        """A clean stop (SIGTERM: compaction into a new snapshot); returns its seconds."""
        started = time.perf_counter()
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=900)
        self.log.close()
        return time.perf_counter() - started

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.log.close()


def progress(message: str) -> None:
    sys.stderr.write(f"[devstart {time.strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()


def _seed(dev: Dev, notes: int, messages: int, per_session: int = 500) -> dict[str, float]:
    import threading

    import httpx

    headers = {"Authorization": f"Bearer {dev.tokens['caller']}"}
    done = [0]
    lock = threading.Lock()

    def count(n: int, total: int, what: str) -> None:
        with lock:
            before = done[0]
            done[0] += n
            if done[0] * 10 // total != before * 10 // total:
                progress(f"seeded {done[0]:,} / {total:,} {what}")

    def put_notes(start: int) -> None:
        with httpx.Client(base_url=dev.endpoint, timeout=120, headers=headers) as http:
            for i in range(start, notes, THREADS):
                body = {"key": f"bench-{i % 50}", "run": 1, "name": f"n{i}", "text": f"note {i} " * 20}
                response = http.put("/v1/notes", json=body)
                response.raise_for_status()
                count(1, notes, "notes")

    def put_session(index: int) -> None:
        session_id = f"bench-{index}-{uuid.uuid4().hex[:8]}"
        n = min(per_session, messages - index * per_session)
        body = {
            "source": "bench",
            "project": "devstart",
            "session_id": session_id,
            "messages": [
                {
                    "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session_id}/{i}")),
                    "role": "user" if i % 2 == 0 else "assistant",
                    "text": f"message {i} of session {index} about deploy{i % 97} and retry{i % 13}",
                    "timestamp": f"2025-06-01T{(i // 60) % 24:02d}:{i % 60:02d}:00Z",
                }
                for i in range(n)
            ],
        }
        with httpx.Client(base_url=dev.endpoint, timeout=300, headers=headers) as http:
            http.post("/v1/transcripts", json=body).raise_for_status()
        count(n, messages, "transcript messages")

    out: dict[str, float] = {}
    started = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(put_notes, range(THREADS)))
    out["notes_s"] = time.perf_counter() - started
    done[0] = 0
    started = time.perf_counter()
    sessions = -(-messages // per_session)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(put_session, range(sessions)))
    out["transcripts_s"] = time.perf_counter() - started
    return out


def _load_then_kill(dev: Dev, seconds: float, threads: int = 4) -> dict[str, Any]:
    """Writes from `threads` threads for `seconds` (note puts; task create and lease; memory writes),
    then kill -9 while they are still writing. Returns what was acknowledged and refused."""
    import threading

    import httpx

    caller = {"Authorization": f"Bearer {dev.tokens['caller']}"}
    worker = {"Authorization": f"Bearer {dev.tokens['worker']}"}
    counts = {"acknowledged": 0, "refused": 0}
    lock = threading.Lock()
    stop = threading.Event()

    def write(n: int) -> None:
        with httpx.Client(base_url=dev.endpoint, timeout=30) as http:
            i = 0
            while not stop.is_set():
                i += 1
                tag = f"{n}-{i}-{uuid.uuid4().hex[:6]}"
                try:
                    if i % 4 == 0:
                        body = {"command_id": f"c-{tag}", "workspace": "w", "id": f"t-{tag}", "context": "load"}
                        message = {"id": f"m-{tag}", "parts": [{"media_type": "text/plain", "text": "x"}]}
                        http.post("/v1/tasks", json={**body, "message": message}, headers=caller)
                        lease = {"command_id": f"l-{tag}"}
                        status = http.post(f"/v1/tasks/t-{tag}/lease", json=lease, headers=worker).status_code
                    elif i % 4 == 1:
                        memory = {"id": f"w-{tag}", "scope": f"load-{n}", "content": f"memory {tag}"}
                        status = http.post("/v1/memory/writes", json=memory, headers=caller).status_code
                    else:
                        note = {"key": "load", "run": 1, "name": f"n{tag}", "text": "x" * 300}
                        status = http.put("/v1/notes", json=note, headers=caller).status_code
                except httpx.TransportError:
                    return
                with lock:
                    counts["acknowledged" if status < 300 else "refused"] += 1

    workers = [threading.Thread(target=write, args=(n,)) for n in range(threads)]
    for thread in workers:
        thread.start()
    started = time.monotonic()
    every = min(60.0, max(10.0, seconds / 4))
    last = started
    while time.monotonic() - started < seconds:
        time.sleep(min(1.0, max(0.0, seconds - (time.monotonic() - started))))
        if time.monotonic() - last >= every:
            last = time.monotonic()
            progress(f"load: {counts['acknowledged']:,} writes acknowledged after {last - started:.0f} s")
    dev.kill()
    stop.set()
    for thread in workers:
        thread.join()
    return {**counts, "seconds": seconds}


def _size_mb(data: Path) -> dict[str, float]:
    sizes: dict[str, float] = {}
    for path in sorted(data.rglob("*")):
        if path.is_file():
            top = path.relative_to(data).parts[0]
            sizes[top] = round(sizes.get(top, 0) + path.stat().st_size / 1e6, 2)
    return sizes


def _log_lines(work: Path, *needles: str) -> list[str]:
    return [line for line in (work / "dev.log").read_text().splitlines() if any(n in line for n in needles)]


def devstart_report(
    quick: bool = False,
    *,
    notes: int | None = None,
    messages: int | None = None,
    load_minutes: float | None = None,
    rounds: int | None = None,
    keep: Path | None = None,
    reuse: bool = False,
) -> dict[str, Any]:
    notes = notes if notes is not None else (1_000 if quick else 10_000)
    messages = messages if messages is not None else (10_000 if quick else 100_000)
    if load_minutes is None:
        named = os.environ.get("DEVSTART_LOAD_MINUTES")
        load_minutes = float(named) if named else (0.5 if quick else 2.0)
    rounds = rounds or (2 if quick else 3)
    report: dict[str, Any] = {"notes": notes, "messages": messages, "rounds": rounds, "load_minutes": load_minutes}
    with tempfile.TemporaryDirectory(prefix="dovecote-devstart-") as tmp:
        work = Path(tmp)
        data = keep or work / "data"
        if reuse and (data / "moto.snapshot").exists():
            progress(f"reusing the seeded {data}: no first start, no load on it empty, no seeding")
        else:
            _first_start(report, work, data, rounds)
            # The case: a runtime up for LOAD minutes of writes, killed: what is left to replay?
            report["crash"] = _crash(work, data, load_minutes)
            _seed_and_stop(report, work, data, notes, messages)
        report["files_mb"] = _size_mb(data)
        progress(f"files (MB): {report['files_mb']}")
        _restarts(report, "seeded", work, data, rounds)
        report["restore_lines"] = _log_lines(work, "restored")[-rounds:]
        # The same at the seeded size: the restore of the snapshot plus a bounded replay.
        report["crash_seeded"] = _crash(work, data, min(load_minutes, 0.5))
    report["load_average"] = os.getloadavg()
    return report


def _first_start(report: dict[str, Any], work: Path, data: Path, rounds: int) -> None:
    progress(f"first start (--fresh) in {data}")
    first = Dev(work, data, "--fresh")
    report["first_start_s"] = first.ready_s
    first.stop()
    _restarts(report, "empty", work, data, rounds)


def _restarts(report: dict[str, Any], label: str, work: Path, data: Path, rounds: int) -> None:
    """`rounds` plain restarts over `data`: the median wall and CPU seconds to ready, as
    `<label>_restart_s` and `<label>_restart_cpu_s`."""
    wall, cpu = [], []
    for i in range(rounds):
        dev = Dev(work, data)
        wall.append(dev.ready_s)
        cpu.append(dev.ready_cpu_s)
        dev.stop()
        progress(f"{label} restart {i + 1}/{rounds}: {dev.ready_s:.2f} s ({dev.ready_cpu_s:.2f} CPU s)")
    report[f"{label}_restart_s"] = statistics.median(wall)
    report[f"{label}_restart_cpu_s"] = statistics.median(cpu)


def _seed_and_stop(report: dict[str, Any], work: Path, data: Path, notes: int, messages: int) -> None:
    dev = Dev(work, data)
    progress(f"seeding {notes:,} notes and {messages:,} transcript messages")
    report["seed"] = _seed(dev, notes, messages)
    progress("clean stop")
    report["clean_stop_s"] = dev.stop()


def _crash(work: Path, data: Path, minutes: float) -> dict[str, Any]:
    """`minutes` of writes, kill -9, and the start after it (the runtime's restore line says what it
    replayed)."""
    logged = len(_log_lines(work, ""))
    dev = Dev(work, data)
    progress(f"{minutes:g} minute(s) of writes, then kill -9")
    crash: dict[str, Any] = {"minutes": minutes, "load": _load_then_kill(dev, minutes * 60)}
    compactions = [line for line in _log_lines(work, "")[logged:] if "compacted in the background" in line]
    crash["compactions"] = len(compactions)
    crash["compaction_lines"] = compactions[-2:]
    crash["files_mb"] = _size_mb(data)
    progress(
        f"killed after {crash['load']['acknowledged']:,} acknowledged writes ({len(compactions)} background "
        f"compactions); files (MB): {crash['files_mb']}"
    )
    dev = Dev(work, data)
    crash["restart_s"], crash["restart_cpu_s"] = dev.ready_s, dev.ready_cpu_s
    progress(f"restart after kill -9: {dev.ready_s:.2f} s ({dev.ready_cpu_s:.2f} CPU s)")
    crash["restore_line"] = next(iter(_log_lines(work, "restored")[-1:]), "")
    dev.stop()
    return crash


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    rounds = report["rounds"]
    table = Table("start of `dovecote dev --data DIR`", "seconds", "CPU seconds")
    if "first_start_s" in report:
        table.add_row(
            "first start (--fresh: create resources, mint tokens, first snapshot)", f"{report['first_start_s']:.2f}", ""
        )
        table.add_row(
            f"restart, empty (median of {rounds})",
            f"{report['empty_restart_s']:.2f}",
            f"{report['empty_restart_cpu_s']:.2f}",
        )
    crashes = [("", report.get("crash")), (f", then {report['notes']:,} notes + more", report["crash_seeded"])]
    for label, crash in crashes:
        if crash is None:
            continue
        load = crash["load"]
        table.add_row(
            f"restart after kill -9 following {crash['minutes']:g} min of writes{label} "
            f"({load['acknowledged']:,} acknowledged, {crash['compactions']} background compactions)",
            f"{crash['restart_s']:.2f}",
            f"{crash['restart_cpu_s']:.2f}",
        )
    table.add_row(
        f"restart, {report['notes']:,} notes + {report['messages']:,} transcript messages (median of {rounds})",
        f"{report['seeded_restart_s']:.2f}",
        f"{report['seeded_restart_cpu_s']:.2f}",
    )
    if "seed" in report:
        table.add_row("clean stop after seeding", f"{report['clean_stop_s']:.2f}", "")
        table.add_row(
            f"seeding {report['notes']:,} notes over HTTP ({THREADS} threads)", f"{report['seed']['notes_s']:.1f}", ""
        )
        table.add_row(
            f"seeding {report['messages']:,} transcript messages (500 per session)",
            f"{report['seed']['transcripts_s']:.1f}",
            "",
        )
    console = Console()
    console.print(table)
    console.print(f"files after seeding (MB): {report['files_mb']}")
    lines = list(report["restore_lines"])
    for _, crash in crashes:
        if crash is not None:
            lines += [*crash["compaction_lines"], crash["restore_line"]]
    for line in lines:
        console.print(f"log: {line}", highlight=False)
    load_average = ", ".join(f"{x:.1f}" for x in report["load_average"])
    console.print(f"machine load average at the end: {load_average} ({os.cpu_count()} cores)")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.devstart")
    parser.add_argument("--quick", action="store_true", help="1,000 notes, 10,000 messages, 0.5 minute of load")
    parser.add_argument("--notes", type=int, default=None)
    parser.add_argument("--messages", type=int, default=None)
    parser.add_argument(
        "--load-minutes", type=float, default=None, help="writes before the kill -9 (default 2; the issue's: 10)"
    )
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="keep the data directory here")
    parser.add_argument("--reuse", action="store_true", help="start from the seeded --keep DIR of an earlier run")
    args = parser.parse_args()
    report = devstart_report(
        args.quick,
        notes=args.notes,
        messages=args.messages,
        load_minutes=args.load_minutes,
        rounds=args.rounds,
        keep=args.keep,
        reuse=args.reuse,
    )
    print_report(report)
    write_results("devstart.json", report)


if __name__ == "__main__":
    main()
