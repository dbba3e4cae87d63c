"""Task streams (docs/guides/streams.md): commit-to-client latency with 1, 50 and 200 open streams of
one task against `dovecote dev`; what an idle stream costs (store reads per minute, measured on the
stream service in-process; dollars per stream-hour in the cloud, from the prices in bench/cost.py and
the stated assumptions); and resume after a cut connection (lost and duplicated events over N
cut-and-resume cycles while a writer commits).

Latency: from just before the command that commits an event is sent to the moment a stream's
reader sees that event's `id:` line (so it includes the commit's own time, an upper bound on
commit-to-client). All streams follow one task: the case the shared reader (`Tail`) fans out.

Run alone: `python -m bench.streams [--quick]`; `streams_report()` is the entry the main bench calls.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench.common import run_alone
from bench.cost import PRICES
from bench.devstart import Dev
from dovecote.platform.schema import validated
from dovecote.tasks.bodies import CreateTaskIn

MESSAGE = {"parts": [{"media_type": "text/plain", "text": "bench"}]}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Driver:
    """A task driven over HTTP through request-input / reply turns: two events a turn."""

    def __init__(self, http: Any, caller: dict[str, str], worker: dict[str, str]) -> None:
        self.http, self.caller, self.worker = http, caller, worker
        self.task = f"bench-{uuid.uuid4().hex[:10]}"
        body = {"command_id": f"c-{self.task}", "workspace": "w", "id": self.task, "context": "bench"}
        self.http.post(
            "/v1/tasks", json={**body, "message": {**MESSAGE, "id": f"m-{self.task}"}}, headers=caller
        ).raise_for_status()
        lease = self.http.post(f"/v1/tasks/{self.task}/lease", json={"command_id": f"l-{self.task}"}, headers=worker)
        lease.raise_for_status()
        self.fence, self.revision, self.turn = lease.json()["assignment"]["fence"], 1, 0

    def command(self, verb: str, role: dict[str, str], **extra: Any) -> float:
        """Send one command; the moment just before it was sent."""
        self.turn += 1
        body = {"command_id": f"{verb}-{self.task}-{self.turn}", "expected_revision": self.revision, **extra}
        sent = time.monotonic()
        answer = self.http.post(f"/v1/tasks/{self.task}/{verb}", json=body, headers=role)
        answer.raise_for_status()
        self.revision = answer.json()["task"]["revision"]
        return sent

    def accept(self) -> float:
        return self.command("accept", self.worker, fence=self.fence)

    def ask(self) -> float:
        message = {**MESSAGE, "id": f"q-{self.task}-{self.turn}"}
        return self.command("request-input", self.worker, fence=self.fence, message=message)

    def reply(self) -> float:
        return self.command("reply", self.caller, message={**MESSAGE, "id": f"r-{self.task}-{self.turn}"})

    def complete(self) -> float:
        message = {**MESSAGE, "id": f"d-{self.task}"}
        return self.command("complete", self.worker, fence=self.fence, message=message, submission_id=f"s-{self.task}")


class Reader(threading.Thread):
    """One stream's reader: when each `id:` line arrived."""

    def __init__(self, endpoint: str, token: str, task: str, after: int = 0) -> None:
        super().__init__(daemon=True)
        self.url = f"{endpoint}/v1/tasks/{task}/stream"
        self.headers = {"Authorization": f"Bearer {token}", "Last-Event-ID": str(after)}
        self.seen: dict[int, float] = {}
        self.opened = threading.Event()

    def run(self) -> None:
        import httpx

        with httpx.stream("GET", self.url, headers=self.headers, timeout=120) as response:
            for line in response.iter_lines():
                self.opened.set()
                if line.startswith("id: "):
                    self.seen[int(line[4:])] = time.monotonic()


def latency(dev: Dev, streams: int, turns: int) -> dict[str, Any]:
    import httpx

    caller = {"Authorization": f"Bearer {dev.tokens['caller']}"}
    worker = {"Authorization": f"Bearer {dev.tokens['worker']}"}
    with httpx.Client(base_url=dev.endpoint, timeout=60) as http:
        driver = Driver(http, caller, worker)
        readers = [Reader(dev.endpoint, dev.tokens["caller"], driver.task, after=1) for _ in range(streams)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.opened.wait(60)
        # Each command's event is the next sequence (one event a transition, as the revision counts).
        commands = [driver.accept] + [driver.ask, driver.reply] * turns + [driver.complete]
        sent: dict[int, float] = {}
        for command in commands:
            time.sleep(0.3)
            sequence = driver.revision + 1
            sent[sequence] = command()
        for reader in readers:
            reader.join(60)
    samples = [(r.seen[s] - t) * 1000 for r in readers for s, t in sent.items() if s in r.seen]
    missing = sum(1 for r in readers for s in sent if s not in r.seen)
    return {
        "streams": streams,
        "events": len(sent),
        "samples": len(samples),
        "missing": missing,
        "median_ms": statistics.median(samples),
        "p99_ms": _percentile(samples, 0.99),
    }


def idle_reads(streams: int, window: float) -> dict[str, Any]:
    """Store reads per minute of `streams` idle streams of one task, on the stream service itself
    (in-process, the in-memory store counting its reads), and of `streams` streams of as many tasks."""
    out: dict[str, Any] = {"streams": streams, "window_s": window}
    for layout in ("one task", "a task each"):
        out[layout] = _idle(streams, window, tasks=streams if layout == "a task each" else 1)
    return out


def _idle(streams: int, window: float, *, tasks: int) -> dict[str, float]:
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.principal import Principal
    from dovecote.tasks.memory import InMemoryTaskStore
    from dovecote.tasks.service import TaskService

    store = InMemoryTaskStore()
    counted = {"read": 0, "events": 0}
    read, events = store.read, store.events

    def counting_read(*args: Any, **kw: Any) -> Any:
        counted["read"] += 1
        return read(*args, **kw)

    def counting_events(*args: Any, **kw: Any) -> Any:
        counted["events"] += 1
        return events(*args, **kw)

    store.read, store.events = counting_read, counting_events  # type: ignore[method-assign]
    service = TaskService(store, CursorSigner(b"bench-streams-key-0123456789abcd"), stream_seconds=window + 5)
    caller = Principal("bench", "caller")
    ids = [f"t{i}" for i in range(tasks)]
    for task_id in ids:
        body = {"command_id": f"c-{task_id}", "workspace": "w", "id": task_id, "context": "c"}
        command = service.gate.create(
            caller, validated(CreateTaskIn, {**body, "message": {**MESSAGE, "id": f"m-{task_id}"}})
        )
        service.create(caller, command)
    # Each stream ends by itself at its bound (event: reconnect), shortly after the window.
    threads = [
        threading.Thread(target=lambda t=ids[i % tasks]: list(service.follow(caller, t, 1)), daemon=True)
        for i in range(streams)
    ]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # every stream past its opening read
    before = dict(counted)
    time.sleep(window)
    reads = {k: (counted[k] - before[k]) * 60 / window for k in counted}
    for thread in threads:
        thread.join(30)
    return {"gets_per_min": reads["read"], "event_queries_per_min": reads["events"]}


def stream_hour() -> dict[str, Any]:
    """Dollars per open stream-hour in the cloud, with the assumptions stated."""
    from dovecote.tasks.streams import POLL_SECONDS
    from infra.routes import STREAMS

    gets = 3600 / POLL_SECONDS  # one strongly consistent GetItem (a task item under 4 KB: 1 RRU) a poll
    gb = STREAMS.memory_mb / 1024
    lambda_usd = 3600 * gb * PRICES["lambda_gb_second_arm64"]  # a streaming invocation bills its whole duration
    reads_usd = gets * PRICES["dynamodb_rru"]
    reconnects = 3600 / 840  # one request (REST API, Lambda) per 14-minute stream
    requests_usd = reconnects * (3.50 / 1e6 + PRICES["lambda_request"])
    return {
        "assumptions": (
            f"arm64 {STREAMS.memory_mb} MB streams function billed for the stream's whole duration; a GetItem of "
            f"the task item (<= 4 KB, 1 RRU on demand) every {POLL_SECONDS} s; a new request every 14 min "
            "(REST API $3.50/M); idle: no event bytes; us-east-1 on-demand prices of bench/cost.py"
        ),
        "reads_per_hour": gets,
        "lambda_usd": lambda_usd,
        "dynamodb_usd": reads_usd,
        "requests_usd": requests_usd,
        "usd_per_stream_hour": lambda_usd + reads_usd + requests_usd,
    }


def cut_and_resume(dev: Dev, cycles: int) -> dict[str, Any]:
    """A writer commits turn after turn; a follower reads a few events, cuts the connection, resumes
    with Last-Event-ID, `cycles` times. Then its sequences against the task's own log."""
    import httpx

    caller = {"Authorization": f"Bearer {dev.tokens['caller']}"}
    worker = {"Authorization": f"Bearer {dev.tokens['worker']}"}
    rng = random.Random(7)
    with httpx.Client(base_url=dev.endpoint, timeout=60) as http:
        driver = Driver(http, caller, worker)
        driver.accept()
        done = threading.Event()

        def write() -> None:
            with httpx.Client(base_url=dev.endpoint, timeout=60) as own:
                driver.http = own
                while not done.is_set():
                    driver.ask()
                    driver.reply()
                driver.complete()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        got: list[int] = []
        url = f"/v1/tasks/{driver.task}/stream"
        for cycle in range(cycles + 1):
            take = rng.randint(1, 6) if cycle < cycles else 10**9
            if cycle == cycles:
                done.set()
            headers = {**caller, "Last-Event-ID": str(got[-1] if got else 0)}
            with http.stream("GET", url, headers=headers) as response:
                seen = 0
                for line in response.iter_lines():
                    if line.startswith("id: "):
                        got.append(int(line[4:]))
                        seen += 1
                        if seen >= take:
                            break  # the cut: the connection is closed mid-stream
        writer.join(60)
        log: list[int] = []
        while True:
            page = http.get(f"/v1/tasks/{driver.task}/events", params={"after": len(log)}, headers=caller).json()
            log += [e["sequence"] for e in page["items"]]
            if not page["has_more"]:
                break
    return {
        "cycles": cycles,
        "events": len(log),
        "lost": len(set(log) - set(got)),
        "duplicated": len(got) - len(set(got)),
        "in_order": got == sorted(got),
    }


def streams_report(quick: bool = False) -> dict[str, Any]:
    turns, cycles, window = (3, 20, 10.0) if quick else (8, 100, 30.0)
    report: dict[str, Any] = {"latency": [], "cost": stream_hour()}
    with tempfile.TemporaryDirectory(prefix="dovecote-streams-") as tmp:
        dev = Dev(Path(tmp), Path(tmp) / "data", "--fresh", "--quiet")
        try:
            for streams in (1, 50, 200):
                report["latency"].append(latency(dev, streams, turns))
            report["resume"] = cut_and_resume(dev, cycles)
        finally:
            dev.stop()
    report["idle"] = [idle_reads(n, window) for n in (1, 50)]
    return report


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table("open streams (one task)", "events", "samples", "median ms", "p99 ms", "missing")
    for row in report["latency"]:
        table.add_row(
            str(row["streams"]),
            str(row["events"]),
            str(row["samples"]),
            f"{row['median_ms']:.0f}",
            f"{row['p99_ms']:.0f}",
            str(row["missing"]),
        )
    console.print(table)
    idle = Table("idle streams", "layout", "task GetItems/min", "event Queries/min")
    for row in report["idle"]:
        for layout in ("one task", "a task each"):
            idle.add_row(
                str(row["streams"]),
                layout,
                f"{row[layout]['gets_per_min']:.0f}",
                f"{row[layout]['event_queries_per_min']:.0f}",
            )
    console.print(idle)
    cost = report["cost"]
    console.print(
        f"cloud: ${cost['usd_per_stream_hour']:.4f} per open stream-hour (Lambda ${cost['lambda_usd']:.4f}, "
        f"DynamoDB ${cost['dynamodb_usd']:.4f}, requests ${cost['requests_usd']:.6f}); {cost['assumptions']}"
    )
    resume = report["resume"]
    console.print(
        f"cut and resume: {resume['cycles']} cycles, {resume['events']} events, lost {resume['lost']}, "
        f"duplicated {resume['duplicated']}, in order {resume['in_order']}"
    )


if __name__ == "__main__":
    run_alone("python -m bench.streams", streams_report, print_report, "streams.json")
