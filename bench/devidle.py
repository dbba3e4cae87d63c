"""`dovecote dev` at rest: the CPU share of an idle runtime, fresh and after seeding a few hundred notes
and tasks (some of them leased and accepted, so the dispatcher has open leases to look at, and a
memory write and a transcript, so every event source has seen work).

The share is read from `/proc/<pid>/stat` (utime + stime, in clock ticks) over `window` seconds of
nothing but the runtime's own background work, after a settle period in which the janitor, the
indexer and the memory worker finish what the seeding gave them. 100 % is one core.

Run alone: `python -m bench.devidle [--quick] [--window S]`; `devidle_report()` is the entry the main
bench calls.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.common import write_results
from bench.devstart import Dev, cpu_seconds


def cpu_share(pid: int, window: float) -> float:
    """The share of one core the process used over the next `window` seconds."""
    before, started = cpu_seconds(pid), time.monotonic()
    time.sleep(window)
    return (cpu_seconds(pid) - before) / (time.monotonic() - started)


def seed(dev: Dev, notes: int, tasks: int) -> dict[str, float]:
    """`notes` notes and `tasks` tasks over HTTP; a third of the tasks leased and accepted (open
    leases), a third completed; one memory write and one transcript."""
    import httpx

    caller = {"Authorization": f"Bearer {dev.tokens['caller']}"}
    worker = {"Authorization": f"Bearer {dev.tokens['worker']}"}
    started = time.perf_counter()

    def put_notes(offset: int) -> None:
        with httpx.Client(base_url=dev.endpoint, timeout=60, headers=caller) as http:
            for i in range(offset, notes, 4):
                body = {"key": f"idle-{i % 20}", "run": 1, "name": f"n{i}", "text": f"note {i} " * 20}
                http.put("/v1/notes", json=body).raise_for_status()

    def put_tasks(offset: int) -> None:
        message = {"parts": [{"media_type": "text/plain", "text": "work"}]}
        with httpx.Client(base_url=dev.endpoint, timeout=60) as http:
            for i in range(offset, tasks, 4):
                tid = f"idle-{i}"
                body = {"command_id": f"c-{tid}", "workspace": "w", "id": tid, "context": "idle"}
                created = http.post(
                    "/v1/tasks", json={**body, "message": {**message, "id": f"m-{tid}"}}, headers=caller
                )
                created.raise_for_status()
                if i % 3 == 0:
                    continue
                lease = http.post(f"/v1/tasks/{tid}/lease", json={"command_id": f"l-{tid}"}, headers=worker)
                lease.raise_for_status()
                fence = lease.json()["assignment"]["fence"]
                accept = {"command_id": f"a-{tid}", "expected_revision": 1, "fence": fence}
                http.post(f"/v1/tasks/{tid}/accept", json=accept, headers=worker).raise_for_status()
                if i % 3 == 1:
                    continue
                done = {
                    "command_id": f"x-{tid}",
                    "expected_revision": 2,
                    "fence": fence,
                    "submission_id": f"s-{tid}",
                    "message": {"id": f"r-{tid}", "parts": [{"media_type": "text/plain", "text": "done"}]},
                }
                http.post(f"/v1/tasks/{tid}/complete", json=done, headers=worker).raise_for_status()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put_notes, range(4)))
        list(pool.map(put_tasks, range(4)))
    with httpx.Client(base_url=dev.endpoint, timeout=60, headers=caller) as http:
        write = {"id": f"w-{uuid.uuid4().hex[:8]}", "scope": "idle", "content": "kept"}
        http.post("/v1/memory/writes", json=write).raise_for_status()
        session = f"idle-{uuid.uuid4().hex[:8]}"
        messages = [
            {
                "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session}/{i}")),
                "role": "user",
                "text": f"message {i}",
                "timestamp": f"2025-06-01T00:00:{i:02d}Z",
            }
            for i in range(20)
        ]
        transcript = {"source": "bench", "project": "idle", "session_id": session, "messages": messages}
        http.post("/v1/transcripts", json=transcript).raise_for_status()
        # The event sources did their work (an idle runtime that idles because it is broken is no figure).
        status = http.get(f"/v1/memory/writes/{write['id']}", params={"wait": 20}).json()
        if status.get("status") != "complete":
            raise RuntimeError(f"the memory write did not complete: {status}")
        deadline = time.monotonic() + 30
        while not http.get("/v1/recall/search", params={"q": "message"}).json().get("results"):
            if time.monotonic() > deadline:
                raise RuntimeError("the transcript was not indexed in 30 s")
            time.sleep(0.2)
    return {"seed_s": time.perf_counter() - started}


def devidle_report(quick: bool = False, *, window: float | None = None, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    notes, tasks = (200, 200) if quick else (400, 400)
    window = window or (10.0 if quick else 60.0)
    settle = 10.0
    report: dict[str, Any] = {"notes": notes, "tasks": tasks, "window_s": window, "settle_s": settle}
    with tempfile.TemporaryDirectory(prefix="dovecote-devidle-") as tmp:
        work, data = Path(tmp), Path(tmp) / "data"
        dev = Dev(work, data, "--fresh", "--quiet", *extra)
        try:
            time.sleep(settle)
            report["fresh_cpu"] = cpu_share(dev.process.pid, window)
            report.update(seed(dev, notes, tasks))
            time.sleep(settle)
            report["seeded_cpu"] = cpu_share(dev.process.pid, window)
        finally:
            dev.stop()
        report["load_average"] = os.getloadavg()
    return report


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(f"`dovecote dev` at rest ({report['window_s']:.0f} s window)", "CPU, % of one core")
    table.add_row("fresh (empty DIR)", f"{report['fresh_cpu'] * 100:.1f}")
    table.add_row(
        f"after {report['notes']} notes and {report['tasks']} tasks (a third of them leased open)",
        f"{report['seeded_cpu'] * 100:.1f}",
    )
    Console().print(table)
    load = ", ".join(f"{x:.1f}" for x in report["load_average"])
    Console().print(f"machine load average at the end: {load}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.devidle")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--window", type=float, default=None, help="seconds of idle measured (default 60, quick 10)")
    args = parser.parse_args()
    report = devidle_report(args.quick, window=args.window)
    print_report(report)
    write_results("devidle.json", report)


if __name__ == "__main__":
    main()
