"""Webhooks (docs/guides/webhooks.md): commit-to-delivery latency against `dovecote dev
--allow-loopback-webhooks` (median and p99); how many notifications one sender sustains (the real
Sender in one thread: the webhook read, the A2A body from the task log, the Ed25519 signature, the
POST to a loopback receiver, the cursor update, on moto in process); and dollars per million
notifications in the cloud, all in, from the prices in bench/cost.py and the stated assumptions.

Latency: from just before the command that commits an event is sent to the moment the receiver has
read that event's notification (so it includes the commit, the stream poll, the fan-out, the queue
and the sender). `dovecote dev`'s stream and queue pollers are woken by writes (infra/local/wakeups.py).

Run alone: `python -m bench.push [--quick]`; `push_report()` is the entry the main bench calls.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, percentile, run_alone
from bench.cost import PRICES
from bench.devstart import Dev


def example_receiver() -> Any:
    """examples/webhook_receiver.py (not a package): its `serve` runs the receivers here."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("webhook_receiver", ROOT / "examples" / "webhook_receiver.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Receiver:
    """A loopback receiver noting when each notification arrived (served by the example's `serve`)."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, str, str]] = []  # (when, webhook-id, state)
        self.lock = threading.Condition()
        self.server = example_receiver().serve(self, 0)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def receive(self, headers: dict[str, str], body: bytes) -> int:
        now = time.monotonic()
        update = json.loads(body).get("statusUpdate") or {}
        state = update.get("status", {}).get("state", "")
        with self.lock:
            self.arrivals.append((now, headers.get("webhook-id", ""), state))
            self.lock.notify_all()
        return 200

    def wait_for(self, count: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        with self.lock:
            while len(self.arrivals) < count and time.monotonic() < deadline:
                self.lock.wait(0.1)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def latency(dev: Dev, turns: int) -> dict[str, Any]:
    """One task driven through `turns` request-input / reply turns (two events a turn), one event at
    a time: each command is sent once the previous event's notification arrived."""
    import httpx

    from bench.streams import Driver

    caller = {"Authorization": f"Bearer {dev.tokens['caller']}"}
    worker = {"Authorization": f"Bearer {dev.tokens['worker']}"}
    receiver = Receiver()
    samples: list[float] = []
    try:
        with httpx.Client(base_url=dev.endpoint, timeout=60) as http:
            driver = Driver(http, caller, worker)
            made = http.post(f"/v1/tasks/{driver.task}/webhooks", json={"url": receiver.url}, headers=caller)
            made.raise_for_status()
            steps = [driver.accept] + [step for _ in range(turns) for step in (driver.ask, driver.reply)]
            for step in steps:
                seen = len(receiver.arrivals)
                sent = step()
                receiver.wait_for(seen + 1)
                if len(receiver.arrivals) > seen:
                    samples.append(receiver.arrivals[seen][0] - sent)
            seen = len(receiver.arrivals)
            sent = driver.complete()
            receiver.wait_for(seen + 1)
            if len(receiver.arrivals) > seen:
                samples.append(receiver.arrivals[seen][0] - sent)
    finally:
        receiver.close()
    return {
        "events": len(steps) + 1,
        "samples": len(samples),
        "missing": len(steps) + 1 - len(samples),
        "median_ms": statistics.median(samples) * 1000 if samples else 0.0,
        "p99_ms": percentile(samples, 99) * 1000 if samples else 0.0,
    }


def sender_rate(tasks: int) -> dict[str, Any]:
    """One Sender, one thread: `tasks` tasks of two events each (submitted, canceled) with a webhook
    from their first event, each caught up by one notice: notifications per second over the whole."""
    from bench.common import CURSOR_KEY, moto_resources, task_body
    from dovecote.a2a.notifications import A2ABodies
    from dovecote.a2a.service import A2AService
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.principal import Principal
    from dovecote.platform.schema import validated
    from dovecote.push.dial import PinnedPoster
    from dovecote.push.dynamo import DynamoConfigStore
    from dovecote.push.keys import FileKeys
    from dovecote.push.memory import MemoryQueue
    from dovecote.push.model import Notice, PushConfig
    from dovecote.push.sender import Sender
    from dovecote.tasks.bodies import CallerCommandIn, CreateTaskIn
    from dovecote.tasks.dynamo import DynamoTaskStore
    from dovecote.tasks.service import TaskService
    from infra.local.moto_patches import serialize_dynamodb
    from infra.local.resources import DEFAULT_NAMES

    caller = Principal("bench", "caller")
    serialize_dynamodb()
    receiver = Receiver()
    try:
        with moto_resources() as aws, tempfile.TemporaryDirectory(prefix="dovecote-push-") as tmp:
            store = DynamoTaskStore(
                table=DEFAULT_NAMES["tasks_table"], bucket=DEFAULT_NAMES["bucket"], dynamodb=aws.ddb, s3=aws.s3
            )
            service = TaskService(store, CursorSigner(CURSOR_KEY))
            configs = DynamoConfigStore(table=DEFAULT_NAMES["push_table"], dynamodb=aws.ddb)
            for i in range(tasks):
                body = task_body(f"t{i}", str(i), "c", "notify me")
                service.create(caller, service.gate.create(caller, validated(CreateTaskIn, body)))
                cancel = validated(CallerCommandIn, {"command_id": f"x{i}", "expected_revision": 1})
                service.cancel(caller, service.gate.cancel(caller, f"t{i}", cancel))
                configs.put(PushConfig("bench", f"t{i}", "w", receiver.url, "2026-01-01T00:00:00.000Z"), limit=10)
            sender = Sender(
                configs,
                MemoryQueue(),
                A2ABodies(A2AService(service)),
                FileKeys(Path(tmp) / "keys.json"),
                PinnedPoster(),
                allow_loopback=True,
            )
            started = time.perf_counter()
            for i in range(tasks):
                sender.deliver(Notice("bench", f"t{i}", "w", 2))
            elapsed = time.perf_counter() - started
    finally:
        receiver.close()
    delivered = len(receiver.arrivals)
    return {
        "tasks": tasks,
        "notifications": delivered,
        "posts": sender.attempts,
        "seconds": elapsed,
        "per_s": delivered / elapsed if elapsed else 0.0,
    }


def sender_ceiling(count: int) -> dict[str, Any]:
    """The sender's own work, storage aside: one thread, in-memory webhook store, a fixed 600-byte
    body, the Ed25519 signature, the SSRF check and the pinned POST to a loopback receiver."""
    from dovecote.push.dial import PinnedPoster
    from dovecote.push.keys import FileKeys
    from dovecote.push.memory import MemoryConfigStore, MemoryQueue
    from dovecote.push.model import Notice, PushConfig
    from dovecote.push.ports import Built
    from dovecote.push.sender import Sender

    class Fixed:
        def built(self, authority: str, task: str, sequence: int) -> Built:
            return Built(
                [b'{"statusUpdate":{"status":{"state":"TASK_STATE_WORKING"}},"pad":"' + b"x" * 540 + b'"}'], False
            )

    receiver = Receiver()
    try:
        with tempfile.TemporaryDirectory(prefix="dovecote-push-") as tmp:
            configs = MemoryConfigStore()
            configs.put(PushConfig("bench", "t", "w", receiver.url, "2026-01-01T00:00:00.000Z"), limit=10)
            sender = Sender(
                configs, MemoryQueue(), Fixed(), FileKeys(Path(tmp) / "keys.json"), PinnedPoster(), allow_loopback=True
            )
            started = time.perf_counter()
            sender.deliver(Notice("bench", "t", "w", count))  # one notice catching up `count` events
            elapsed = time.perf_counter() - started
    finally:
        receiver.close()
    return {"notifications": len(receiver.arrivals), "seconds": elapsed, "per_s": len(receiver.arrivals) / elapsed}


def cost_per_million() -> dict[str, Any]:
    """Dollars per million notifications in the cloud, all in, with the assumptions stated."""
    from infra.routes import PUSH_FANOUT, PUSH_SENDER

    # DynamoDB, per notification: the fan-out's Query of the task's webhooks (1 RRU, amortised over
    # the events of a batch: counted whole here), the sender's GetItem of the webhook (1 RRU, strong),
    # the A2A body's reads (the task item 1 RRU, the event Query 1 RRU, the agent's message on a
    # waiting or final state: 1 RRU on half of them), its cursor UpdateItem (1 WRU), and the stream
    # record (DynamoDB Streams reads by Lambda are free).
    rru = 1 + 1 + 1 + 1 + 0.5
    wru = 1
    dynamo = rru * PRICES["dynamodb_rru"] + wru * PRICES["dynamodb_wru"]
    # SQS FIFO: SendMessageBatch (10 a request: 0.1), the mapping's receive and delete (batches of 10:
    # 0.2), $0.50 per million FIFO requests.
    sqs = (0.1 + 0.2) * 0.50 / 1e6
    # KMS: the webhook's secrets open with a cached data key (one Decrypt per container per 5 minutes:
    # nothing per notification); Secrets Manager read every 5 minutes per container (~0).
    # Lambda: the fan-out, 100 records a batch, ~150 ms at 256 MB; the sender, a batch of 10 in
    # ~10 x 60 ms (a receiver answering in 50 ms) at 512 MB.
    fanout_gb_s = (PUSH_FANOUT.memory_mb / 1024) * 0.150 / 100
    sender_gb_s = (PUSH_SENDER.memory_mb / 1024) * 0.060
    lambda_usd = (fanout_gb_s + sender_gb_s) * PRICES["lambda_gb_second_arm64"] + (1 / 100 + 1 / 10) * PRICES[
        "lambda_request"
    ]
    # Data out: a 2 KB notification at $0.09/GB.
    egress = 2 * 1024 / 1e9 * 0.09
    per = dynamo + sqs + lambda_usd + egress
    return {
        "assumptions": (
            "us-east-1 on-demand prices of bench/cost.py; one webhook per task; per notification 4.5 RRU "
            "(fan-out Query, webhook GetItem, task GetItem, event Query, the agent's message on half) and 1 WRU "
            "(the cursor); SQS FIFO $0.50/M requests, sent 10 a batch, received and deleted 10 a batch; "
            f"fan-out {PUSH_FANOUT.memory_mb} MB arm64, 100 records in 150 ms; sender {PUSH_SENDER.memory_mb} MB "
            "arm64, 60 ms a notification (a receiver answering in 50 ms: a slow receiver costs proportionally "
            "more); 2 KB a notification out at $0.09/GB; no retries (each retry adds a sender invocation "
            "and the POST); KMS and Secrets Manager reads cached per container"
        ),
        "dynamodb_usd": dynamo * 1e6,
        "sqs_usd": sqs * 1e6,
        "lambda_usd": lambda_usd * 1e6,
        "egress_usd": egress * 1e6,
        "usd_per_million": per * 1e6,
    }


def push_report(quick: bool = False) -> dict[str, Any]:
    turns, tasks = (5, 50) if quick else (25, 300)
    report: dict[str, Any] = {"cost": cost_per_million()}
    with tempfile.TemporaryDirectory(prefix="dovecote-push-") as tmp:
        dev = Dev(Path(tmp), Path(tmp) / "data", "--fresh", "--quiet", "--allow-loopback-webhooks")
        try:
            report["latency"] = latency(dev, turns)
        finally:
            dev.stop()
    report["sender"] = sender_rate(tasks)
    report["ceiling"] = sender_ceiling(tasks * 4)
    return report


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console()
    lat, rate, cost = report["latency"], report["sender"], report["cost"]
    console.print(
        f"commit → delivery ({lat['samples']} of {lat['events']} events): median {lat['median_ms']:.0f} ms, "
        f"p99 {lat['p99_ms']:.0f} ms"
    )
    console.print(
        f"one sender, one thread (moto in process): {rate['notifications']} notifications in {rate['seconds']:.1f} s "
        f"= {rate['per_s']:.0f}/s"
    )
    ceiling = report["ceiling"]
    console.print(
        f"one sender, its own work only (in-memory store, fixed body): {ceiling['notifications']} in "
        f"{ceiling['seconds']:.1f} s = {ceiling['per_s']:.0f}/s"
    )
    console.print(f"cloud: ${cost['usd_per_million']:.2f} per million notifications ({cost['assumptions']})")


if __name__ == "__main__":
    run_alone("python -m bench.push", push_report, print_report, "push.json")
