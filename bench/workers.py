"""How many HTTP requests an SDK worker (`dovecote.client.worker.Worker`) makes per minute, counted
by an httpx response hook on its client, against `dovecote dev` started as a separate process:

- idle: nothing to claim, so only long-poll claims (`wait_seconds` 20: about 3 a minute);
- busy: one task held for the whole window, so only heartbeats, at a quarter of the task's
  `lease_timeout_seconds` (60 s here: 4 a minute; the default 300 s gives 0.8);
- for comparison, what a claim loop without long-poll costs (a claim every 0.5 s: 120 a minute).

Wired into `python -m bench` as the `workers` section (`workers_report`, `print_report`); also
`python -m bench.workers [--quick]` alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent


class DevProcess:
    """`dovecote dev --port 0` in its own process; its endpoint and tokens from the tokens file."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="bench-workers-")
        self.tokens_file = Path(self._dir.name) / "dev-tokens.json"
        self._log = (Path(self._dir.name) / "dev.log").open("w")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DOVECOTE_"))}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dovecote.cli",
                "dev",
                "--port",
                "0",
                "--quiet",
                "--tokens-file",
                str(self.tokens_file),
            ],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 90
        while not self.tokens_file.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("dovecote dev did not start")
            time.sleep(0.2)
        data = json.loads(self.tokens_file.read_text())
        self.endpoint: str = data["endpoint"]
        self.tokens: dict[str, str] = data["tokens"]

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log.close()
        self._dir.cleanup()


class RequestCounter:
    """An httpx request hook: the time and kind of every request sent while `counting` is set."""

    def __init__(self) -> None:
        self.sent: list[tuple[float, str]] = []
        self.counting = threading.Event()

    def __call__(self, request: Any) -> None:
        if not self.counting.is_set():
            return
        path = request.url.path
        kind = "heartbeat" if path.endswith("/lease/heartbeat") else path.rsplit("/", 1)[-1]
        self.sent.append((time.monotonic(), f"{request.method} {kind}"))

    def figures(self, seconds: float) -> dict[str, Any]:
        """The count in the window, and the rate from the mean gap between requests (a window
        count depends on where the window falls between two 20 s long-polls; the gap does not)."""
        times = [t for t, _ in self.sent]
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        return {
            "seconds": round(seconds, 1),
            "requests": len(times),
            "per_minute": 60 / (sum(gaps) / len(gaps)) if gaps else len(times) * 60 / seconds,
            "by_kind": dict(Counter(kind for _, kind in self.sent)),
        }


def warm(dev: DevProcess) -> None:
    """One request of every route the workers use, one at a time, before anything is measured: the
    first request of each route in a fresh runtime is slow (imports, the composition root), and
    `dovecote dev` mixes up requests in flight together on such a cold path (see the report)."""
    from dovecote.client import DovecoteClient

    with (
        DovecoteClient(dev.endpoint, dev.tokens["caller"]) as caller,
        DovecoteClient(dev.endpoint, dev.tokens["worker"]) as worker,
    ):
        tid = f"warm-{uuid.uuid4().hex[:8]}"
        caller.create_task(tid, "warm up")
        worker.leases()
        fence = int(worker.acquire(tid)["fence"])
        worker.heartbeat(tid, fence)
        worker.accept(tid, 1, fence)
        worker.complete(tid, 2, fence, "warm")
        worker.claim()
        caller.wait_for(tid, "completed", timeout=10)
        list(caller.iter_messages(tid))


def _worker_client(dev: DevProcess, counter: RequestCounter) -> Any:
    from dovecote.client import DovecoteClient

    return DovecoteClient(dev.endpoint, dev.tokens["worker"], event_hooks={"request": [counter]})


def idle(dev: DevProcess, seconds: float, wait_seconds: int) -> dict[str, Any]:
    from dovecote.client.worker import Worker

    counter = RequestCounter()
    worker = Worker(_worker_client(dev, counter), lambda job: None, wait_seconds=wait_seconds)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    time.sleep(1.0)  # past the restart-recovery scan
    counter.counting.set()
    time.sleep(seconds)
    counter.counting.clear()
    worker.stop()
    thread.join(timeout=wait_seconds + 30)
    return counter.figures(seconds)


def busy(dev: DevProcess, seconds: float, lease_timeout: int) -> dict[str, Any]:
    from dovecote.client import DovecoteClient
    from dovecote.client.worker import Job, Worker

    counter = RequestCounter()
    started = threading.Event()
    window: dict[str, float] = {}

    def hold(job: Job) -> None:
        started.set()
        counter.counting.set()
        window["start"] = time.monotonic()
        time.sleep(seconds)  # "working": only the heartbeat thread talks to Dovecote
        counter.counting.clear()
        window["end"] = time.monotonic()
        job.complete("held")

    worker = Worker(_worker_client(dev, counter), hold, wait_seconds=5)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    time.sleep(1.0)  # the worker is in its long-poll claim
    with DovecoteClient(dev.endpoint, dev.tokens["caller"]) as caller:
        tid = f"bench-{uuid.uuid4().hex[:8]}"
        caller.create_task(tid, "hold me", lease_timeout_seconds=lease_timeout)
        if not started.wait(60):
            raise RuntimeError("the worker did not pick the task up")
        caller.wait_for(tid, "completed", timeout=seconds + 60)
    worker.stop()
    thread.join(timeout=60)
    return {**counter.figures(window["end"] - window["start"]), "lease_timeout_seconds": lease_timeout}


def short_poll(dev: DevProcess, seconds: float, pause: float = 0.5) -> dict[str, Any]:
    """The claim loop the echo worker used before long-poll: claim, sleep `pause`, claim again."""
    counter = RequestCounter()
    client = _worker_client(dev, counter)
    counter.counting.set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        client.claim()
        time.sleep(pause)
    counter.counting.clear()
    client.close()
    return {**counter.figures(seconds), "pause": pause}


def workers_report(quick: bool = False) -> dict[str, Any]:
    """Idle and busy requests per minute (60 s windows; 20 s with `quick`) and the short-poll baseline."""
    seconds = 20.0 if quick else 60.0
    dev = DevProcess()
    try:
        warm(dev)
        return {
            "idle (long-poll 20 s)": idle(dev, seconds, wait_seconds=20),
            "busy (1 task, lease timeout 60 s)": busy(dev, seconds, lease_timeout=60),
            "short poll every 0.5 s (no long-poll)": short_poll(dev, min(seconds, 10.0)),
        }
    finally:
        dev.close()


def print_report(report: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    table = Table("worker", "window s", "requests", "per minute", "by kind")
    for label, row in report.items():
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(row.get("by_kind", {}).items()))
        table.add_row(label, f"{row['seconds']:g}", str(row["requests"]), f"{row['per_minute']:.1f}", kinds)
    console.print(table)


if __name__ == "__main__":
    report = workers_report(quick="--quick" in sys.argv)
    print_report(report)
    print(json.dumps(report, indent=2))
