"""How many HTTP requests an SDK worker (`dovecote.client.worker.Worker`) makes per minute, counted
by an httpx response hook on its client, against `dovecote dev` started as a separate process:

- idle: nothing to claim, so only long-poll claims (`wait_seconds` 20: about 3 a minute);
- busy: one task held for the whole window, so only heartbeats, at a quarter of the task's
  `lease_timeout_seconds` (60 s here: 4 a minute; the default 300 s gives 0.8);
- for comparison, what a claim loop without long-poll costs (a claim every 0.5 s: 120 a minute).

Worker events (`POST /v1/worker/events`):
- AWS round trips per settled event, by kind (accept, freeze inline and by upload, complete, an
  exact retry of a settled delivery, a NACK), counted with `infra.local.metering.count_round_trips`
  on DynamoDB, S3 and KMS while the tasks function's own composition root settles them in process
  over moto (so nothing else of the runtime, such as the dispatcher or the stream janitor, is
  counted);
- worker events per second over HTTP against `dovecote dev`: tasks created and leased first, then
  only the accept_task + complete_task events timed, one worker sequentially and 4 workers at once.

Wired into `python -m bench` as the `workers` section (`workers_report`, `print_report`); also
`python -m bench.workers [--quick]` alone (`--events` for the worker-event figures only).
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
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

from dovecote.platform.schema import validated
from dovecote.tasks.bodies import ArtifactUploadIn, CommandIn, CreateTaskIn, WorkerDeliveryIn

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
                "--data",  # its own state, never the repo's .dovecote/data (a `make dev` may hold it)
                str(Path(self._dir.name) / "data"),
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


def event_round_trips() -> dict[str, int]:
    """AWS round trips per settled worker event, by kind, through the tasks function's composition
    root (DynamoDB, S3 and KMS clients metered) over moto in this process."""
    from moto import mock_aws

    saved = {k: v for k, v in os.environ.items() if k.startswith(("AWS_", "DOVECOTE_"))}
    os.environ.update(
        {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    )
    os.environ.pop("AWS_ENDPOINT_URL", None)
    os.environ["DOVECOTE_CURSOR_KEY"] = "bench-cursor-key-0123456789abcdefghijklmnop"
    import requests

    from dovecote.platform import aws
    from dovecote.platform.principal import Principal
    from dovecote.platform.settings import get_settings
    from functions.tasks_api import handler
    from infra.local.metering import count_round_trips
    from infra.local.resources import DEFAULT_NAMES, create_all

    out: dict[str, int] = {}
    try:
        with mock_aws():
            aws.reset_clients()
            get_settings.cache_clear()
            handler.service.cache_clear()
            os.environ.update(
                create_all(
                    dynamodb=aws.client("dynamodb"),
                    s3=aws.client("s3"),
                    secretsmanager=None,
                    names=DEFAULT_NAMES,
                    kms=aws.client("kms"),
                )
            )
            get_settings.cache_clear()
            tasks = handler.service()
            clients = (aws.client("dynamodb"), aws.client("s3"), aws.client("kms"))
            caller, worker = Principal("bench", "caller"), Principal("bench", "worker", "w1")
            text = {"id": "m1", "parts": [{"media_type": "text/plain", "text": "hi"}]}

            def settle(label: str, event: dict[str, Any], delivery: str) -> Any:
                with count_round_trips(*clients) as meter:
                    answer = tasks.worker_event(
                        worker,
                        tasks.gate.worker_event(
                            worker, validated(WorkerDeliveryIn, {"delivery_id": delivery, "event": event})
                        ),
                    )
                out[label] = meter.total
                return answer

            def leased(task_id: str) -> int:
                message = {**text, "id": f"m-{task_id}"}
                body = {
                    "command_id": f"c-{task_id}",
                    "workspace": "w",
                    "id": task_id,
                    "context": "x",
                    "message": message,
                }
                tasks.create(caller, tasks.gate.create(caller, validated(CreateTaskIn, body)))
                acquire = tasks.gate.acquire(worker, task_id, validated(CommandIn, {"command_id": f"a-{task_id}"}))
                return tasks.acquire(worker, acquire).answer.fence

            fence = leased("t1")
            accept = {"event_id": "e1", "kind": "accept_task", "task": "t1", "fence": fence, "expected_revision": 1}
            settle("accept_task", accept, "d1")
            settle("accept_task, exact retry of the delivery", accept, "d1")
            payload = {"media_type": "text/plain", "text": "the echo"}
            freeze = {"artifact": "a1", "expected_base_revision": "r0", "payload": payload}
            event = {"event_id": "e2", "kind": "freeze_artifact", "task": "t1", "fence": fence, "expected_revision": 2}
            settle("freeze_artifact (8 bytes inline)", {**event, "freeze": freeze}, "d2")
            complete = {"event_id": "e3", "kind": "complete_task", "task": "t1", "fence": fence, "expected_revision": 3}
            complete.update(message={**text, "id": "m2"}, submission="s1", artifact="a1")
            settle("complete_task (publishes the artifact)", complete, "d3")
            stale = {"event_id": "e4", "kind": "fail_task", "task": "t1", "fence": fence, "expected_revision": 4}
            settle("fail_task on a completed task (NACK)", stale, "d4")

            fence = leased("t2")
            accept2 = {"event_id": "e5", "kind": "accept_task", "task": "t2", "fence": fence, "expected_revision": 1}
            tasks.worker_event(
                worker,
                tasks.gate.worker_event(worker, validated(WorkerDeliveryIn, {"delivery_id": "d5", "event": accept2})),
            )
            body = b"x" * (2 * 1024 * 1024)
            digest = hashlib.sha256(body).hexdigest()
            declared = {"size": len(body), "sha256": digest, "fence": fence}
            upload = tasks.create_artifact_upload(
                worker, tasks.gate.create_artifact_upload(worker, "t2", validated(ArtifactUploadIn, declared))
            )
            requests.put(upload.upload_url, data=body, headers=upload.upload_headers, timeout=60)
            big = {
                "artifact": "a2",
                "expected_base_revision": "r0",
                "payload": {"media_type": "x/y", "upload_sha256": digest},
            }
            event = {"event_id": "e6", "kind": "freeze_artifact", "task": "t2", "fence": fence, "expected_revision": 2}
            settle("freeze_artifact (2 MiB presigned upload)", {**event, "freeze": big}, "d6")
            plain = {"event_id": "e7", "kind": "complete_task", "task": "t2", "fence": fence, "expected_revision": 3}
            plain.update(message={**text, "id": "m3"}, submission="s2", artifact="a2")
            settle("complete_task (2 MiB artifact)", plain, "d7")
            aws.reset_clients()
    finally:
        handler.service.cache_clear()
        for key in [k for k in os.environ if k.startswith(("AWS_", "DOVECOTE_"))]:
            del os.environ[key]
        os.environ.update(saved)
        get_settings.cache_clear()
    return out


def events_per_second(dev: DevProcess, tasks: int, workers: int) -> dict[str, Any]:
    """accept_task + complete_task worker events over HTTP, `workers` threads at once, each with
    its own tasks (created and leased beforehand, untimed): events per second and latency."""
    from concurrent.futures import ThreadPoolExecutor

    from dovecote.client import DovecoteClient

    with (
        DovecoteClient(dev.endpoint, dev.tokens["caller"]) as caller,
        DovecoteClient(dev.endpoint, dev.tokens["worker"]) as worker,
    ):
        leased = []
        for _ in range(tasks):
            tid = f"ev-{uuid.uuid4().hex[:10]}"
            caller.create_task(tid, "echo me")
            leased.append((tid, int(worker.acquire(tid)["fence"])))
        latencies: list[float] = []

        def drive(share: list[tuple[str, int]]) -> int:
            nacks = 0
            for tid, fence in share:
                for kind, revision, extra in (
                    ("accept_task", 1, {}),
                    ("complete_task", 2, {"message": "echo: echo me"}),
                ):
                    event = {"kind": kind, "task": tid, "fence": fence, "expected_revision": revision, **extra}
                    started = time.perf_counter()
                    settlement = worker.worker_event(event)
                    latencies.append(time.perf_counter() - started)
                    nacks += settlement["decision"] != "ack"
            return nacks

        shares = [leased[i::workers] for i in range(workers)]
        started = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            nacks = sum(pool.map(drive, shares))
        wall = time.perf_counter() - started
    ordered = sorted(latencies)
    return {
        "events": len(latencies),
        "nacks": nacks,
        "workers": workers,
        "per_s": len(latencies) / wall,
        "median_ms": statistics.median(ordered) * 1000,
        "p95_ms": ordered[min(len(ordered) - 1, int(0.95 * (len(ordered) - 1)))] * 1000,
    }


def events_report(quick: bool = False, dev: DevProcess | None = None) -> dict[str, Any]:
    """Round trips per worker event (in process, moto) and events per second over HTTP."""
    report: dict[str, Any] = {"round_trips": event_round_trips()}
    own = dev is None
    dev = dev or DevProcess()
    try:
        if own:
            warm(dev)
        tasks = 20 if quick else 100
        # The first events of each kind in a fresh runtime pay its imports: warm them, untimed.
        events_per_second(dev, 2, 1)
        report["1 worker"] = events_per_second(dev, tasks, 1)
        report["4 workers"] = events_per_second(dev, tasks, 4)
    finally:
        if own:
            dev.close()
    return report


def workers_report(quick: bool = False) -> dict[str, Any]:
    """Idle and busy requests per minute (60 s windows; 20 s with `quick`), the short-poll baseline,
    and the worker-event figures (`events`)."""
    seconds = 20.0 if quick else 60.0
    dev = DevProcess()
    try:
        warm(dev)
        return {
            "idle (long-poll 20 s)": idle(dev, seconds, wait_seconds=20),
            "busy (1 task, lease timeout 60 s)": busy(dev, seconds, lease_timeout=60),
            "short poll every 0.5 s (no long-poll)": short_poll(dev, min(seconds, 10.0)),
            "events": events_report(quick, dev),
        }
    finally:
        dev.close()


def print_events(report: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    trips = Table("worker event", "AWS round trips")
    for label, count in report["round_trips"].items():
        trips.add_row(label, str(count))
    console.print(trips)
    rates = Table("worker events over HTTP", "events", "NACKs", "events/s", "median ms", "p95 ms")
    for label in ("1 worker", "4 workers"):
        row = report[label]
        rates.add_row(
            label,
            str(row["events"]),
            str(row["nacks"]),
            f"{row['per_s']:.1f}",
            f"{row['median_ms']:.1f}",
            f"{row['p95_ms']:.1f}",
        )
    console.print(rates)


def print_report(report: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    table = Table("worker", "window s", "requests", "per minute", "by kind")
    for label, row in report.items():
        if label == "events":
            continue
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(row.get("by_kind", {}).items()))
        table.add_row(label, f"{row['seconds']:g}", str(row["requests"]), f"{row['per_minute']:.1f}", kinds)
    console.print(table)
    if "events" in report:
        print_events(report["events"], console)


if __name__ == "__main__":
    if "--events" in sys.argv:
        events = events_report(quick="--quick" in sys.argv)
        print_events(events)
        print(json.dumps(events, indent=2))
    else:
        report = workers_report(quick="--quick" in sys.argv)
        print_report(report)
        print(json.dumps(report, indent=2))
