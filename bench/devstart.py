"""`dovecote dev --data DIR` start time: empty, and with NOTES notes and MESSAGES transcript messages
in DIR (seeded once over HTTP from parallel threads), after a clean stop (snapshot only) and after
kill -9 during writes (snapshot + journal replay). Also the clean stop (compaction) time and the
snapshot size.

A start is timed from spawning the process to the first 200 of `/v1/health` with the tokens file
written (what a client waits for). Each figure is the median of `rounds` starts.

Run alone: `python -m bench.devstart [--quick]`; `devstart_report()` is the entry the main bench calls.
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

ROOT = Path(__file__).resolve().parent.parent
THREADS = 8


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
            [sys.executable, "-m", "dovecote.cli", "dev", "--port", str(port)]
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


def _seed(dev: Dev, notes: int, messages: int, per_session: int = 500) -> dict[str, float]:
    import httpx

    headers = {"Authorization": f"Bearer {dev.tokens['caller']}"}

    def put_notes(start: int) -> None:
        with httpx.Client(base_url=dev.endpoint, timeout=120, headers=headers) as http:
            for i in range(start, notes, THREADS):
                body = {"key": f"bench-{i % 50}", "run": 1, "name": f"n{i}", "text": f"note {i} " * 20}
                response = http.put("/v1/notes", json=body)
                response.raise_for_status()

    def put_session(index: int) -> None:
        session_id = f"bench-{index}-{uuid.uuid4().hex[:8]}"
        count = min(per_session, messages - index * per_session)
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
                for i in range(count)
            ],
        }
        with httpx.Client(base_url=dev.endpoint, timeout=300, headers=headers) as http:
            http.post("/v1/transcripts", json=body).raise_for_status()

    out: dict[str, float] = {}
    started = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(put_notes, range(THREADS)))
    out["notes_s"] = time.perf_counter() - started
    started = time.perf_counter()
    sessions = -(-messages // per_session)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(put_session, range(sessions)))
    out["transcripts_s"] = time.perf_counter() - started
    return out


def _burst_then_kill(dev: Dev, writes: int) -> int:
    """Note puts from threads; kill -9 once `writes` were acknowledged. Returns how many were."""
    import threading

    import httpx

    headers = {"Authorization": f"Bearer {dev.tokens['caller']}"}
    done = [0]
    lock = threading.Lock()
    stop = threading.Event()

    def put(n: int) -> None:
        with httpx.Client(base_url=dev.endpoint, timeout=30, headers=headers) as http:
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    body = {"key": "burst", "run": 1, "name": f"b{n}-{i}", "text": "x" * 200}
                    if http.put("/v1/notes", json=body).status_code == 200:
                        with lock:
                            done[0] += 1
                except httpx.TransportError:
                    return

    threads = [threading.Thread(target=put, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    while done[0] < writes:
        time.sleep(0.01)
    dev.kill()
    stop.set()
    for thread in threads:
        thread.join()
    return done[0]


def _size_mb(data: Path) -> dict[str, float]:
    return {p.name: round(p.stat().st_size / 1e6, 2) for p in sorted(data.iterdir()) if p.is_file()}


def devstart_report(quick: bool = False) -> dict[str, Any]:
    notes, messages, rounds, burst = (1_000, 10_000, 2, 200) if quick else (10_000, 100_000, 3, 1_000)
    report: dict[str, Any] = {"notes": notes, "messages": messages, "rounds": rounds}
    with tempfile.TemporaryDirectory(prefix="dovecote-devstart-") as tmp:
        work, data = Path(tmp), Path(tmp) / "data"
        first = Dev(work, data, "--fresh")
        report["first_start_s"] = first.ready_s
        first.stop()
        empty = []
        for _ in range(rounds):
            dev = Dev(work, data)
            empty.append(dev.ready_s)
            dev.stop()
        report["empty_restart_s"] = statistics.median(empty)

        dev = Dev(work, data)
        report["seed"] = _seed(dev, notes, messages)
        report["clean_stop_s"] = dev.stop()
        report["files_mb"] = _size_mb(data)
        seeded = []
        for _ in range(rounds):
            dev = Dev(work, data)
            seeded.append(dev.ready_s)
            dev.stop()
        report["seeded_restart_s"] = statistics.median(seeded)

        dev = Dev(work, data)
        report["burst_acknowledged"] = _burst_then_kill(dev, burst)
        report["journal_mb"] = _size_mb(data)
        dev = Dev(work, data)
        report["crash_restart_s"] = dev.ready_s
        log = (work / "dev.log").read_text().splitlines()
        report["replay_line"] = next((line for line in reversed(log) if "replayed" in line), "")
        dev.stop()
    return report


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("start of `dovecote dev --data DIR`", "seconds")
    table.add_row(
        "first start (--fresh: create resources, mint tokens, first snapshot)", f"{report['first_start_s']:.2f}"
    )
    table.add_row(f"restart, empty (median of {report['rounds']})", f"{report['empty_restart_s']:.2f}")
    table.add_row(
        f"restart, {report['notes']} notes + {report['messages']} transcript messages (median of {report['rounds']})",
        f"{report['seeded_restart_s']:.2f}",
    )
    table.add_row(
        f"restart after kill -9 during writes ({report['burst_acknowledged']} acknowledged puts to replay)",
        f"{report['crash_restart_s']:.2f}",
    )
    table.add_row("clean stop after seeding (compaction: the snapshot)", f"{report['clean_stop_s']:.2f}")
    table.add_row(f"seeding {report['notes']} notes over HTTP ({THREADS} threads)", f"{report['seed']['notes_s']:.1f}")
    table.add_row(
        f"seeding {report['messages']} transcript messages (500 per session)", f"{report['seed']['transcripts_s']:.1f}"
    )
    Console().print(table)
    Console().print(f"files after seeding (MB): {report['files_mb']}")
    Console().print(f"journal before the crash restart (MB): {report['journal_mb']}")
    Console().print(f"log: {report['replay_line']}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.devstart")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    report = devstart_report(args.quick)
    print_report(report)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "devstart.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
