"""The tasks API's Lambda memory, chosen by measurement: what each command costs in Lambda duration at
128 to 1,024 MB on arm64 (and 1,769 MB, one full vCPU, for reference), and the size that costs least
within a latency bound.

Method. Lambda gives a function CPU in proportion to its memory: one full vCPU at 1,769 MB, M/1,769 of
one below it (AWS Lambda's documentation). A warm command's duration is its own CPU time, stretched
by that share, plus the time it waits on AWS. So:
- the CPU: the deployed handler (functions/tasks_api) serves real API Gateway events in this process,
  against a moto server in another thread (bench/coldstart.prepared: the function's own environment),
  and each command's CPU is the serving thread's CPU time (`time.thread_time`: moto's work, on its
  own threads, is not in it), the least of `rounds` warm commands (on a shared machine, other
  processes slow a thread's own CPU time too, never speed it: the least is the nearest to a quiet
  core); this machine's cores stand in for Graviton's (an assumption: a Graviton core may be
  somewhat slower);
- the wait: the command's AWS requests, counted (botocore events), each at the typical DynamoDB
  latency bench/claims.py assumes (GetItem or TransactGetItems 5 ms, Query 8 ms, TransactWriteItems
  12 ms): assumptions, not measurements;
- duration(M) = CPU × max(1, 1,769 / M) + wait; a cold start adds the first request's CPU in a fresh
  interpreter (imports included; bench/coldstart's probe) stretched the same way;
- price per million = $0.20 a million requests + M/1,024 GB × duration(M) s (billed per started
  ms) × $0.0000133334 a GB-second (arm64, us-east-1).
The choice: the cheapest size (summed over the commands and reads) at which every warm request stays
within 1.5 × its duration at one full vCPU or 10 ms more than it, and the cold start within a
second.
"""

from __future__ import annotations

import json
import math
import time
from types import SimpleNamespace
from typing import Any

from bench.claims import GET_MS, QUERY_MS, TRANSACT_MS

SIZES_MB = (128, 256, 512, 768, 1024)
FULL_VCPU_MB = 1769
# A warm request may take at most 1.5 × its duration at one full vCPU (the bound the repo holds cold
# starts to against their floor), or 10 ms more than it (a read of a few ms may double, unnoticed);
# a cold start at most a second.
LATENCY_BOUND, LATENCY_SLACK_MS, COLD_BOUND_MS = 1.5, 10.0, 1000.0
REQUEST_MS = {
    "dynamodb.GetItem": GET_MS,
    "dynamodb.TransactGetItems": GET_MS,
    "dynamodb.BatchGetItem": GET_MS,
    "dynamodb.Query": QUERY_MS,
    "dynamodb.TransactWriteItems": TRANSACT_MS,
    "dynamodb.PutItem": TRANSACT_MS,
    "dynamodb.UpdateItem": TRANSACT_MS,
}
LAMBDA_REQUEST = 0.20 / 1e6
LAMBDA_GB_SECOND_ARM64 = 0.0000133334


# What Lambda passes the handler as its context: the fields Powertools reads.
CONTEXT = SimpleNamespace(
    function_name="tasks_api",
    memory_limit_in_mb=1024,
    aws_request_id="bench",
    invoked_function_arn="arn:aws:lambda:us-east-1:000000000000:function:tasks_api",
    log_group_name="g",
    log_stream_name="s",
    get_remaining_time_in_millis=lambda: 29_000,
)


def duration_ms(cpu_ms: float, wait_ms: float, memory_mb: int) -> float:
    return cpu_ms * max(1.0, FULL_VCPU_MB / memory_mb) + wait_ms


def price_per_million(memory_mb: int, ms: float) -> float:
    """Lambda's part of a million invocations: requests, and duration billed per started ms."""
    return (LAMBDA_REQUEST + memory_mb / 1024 * math.ceil(ms) / 1000 * LAMBDA_GB_SECOND_ARM64) * 1e6


Request = tuple[str, str, str, dict[str, str], dict[str, Any] | None, bool]
PER_TASK = 9  # requests per task in `_commands`


def _commands(rounds: int) -> list[Request]:
    """(label, route, path, path parameters, body, as the worker) for `rounds` tasks, each created,
    claimed, accepted and completed, then read, as bench/cost.py's commands are."""
    out: list[Request] = []
    for i in range(rounds):
        t = f"lm-{i}"
        msg = {"id": f"lm-m{i}", "parts": [{"media_type": "text/plain", "text": "please summarise the design notes"}]}
        done = {"id": f"lm-d{i}", "parts": [{"media_type": "text/plain", "text": "here is the summary " * 10}]}
        create = {"command_id": f"lm-c{i}", "workspace": "w", "id": t, "context": "x", "message": msg}
        out += [
            ("task create", "POST /v1/tasks", "/v1/tasks", {}, create, False),
            ("task claim", "POST /v1/leases/claim", "/v1/leases/claim", {}, {"command_id": f"lm-l{i}"}, True),
            (
                "task accept",
                "POST /v1/tasks/{id}/accept",
                f"/v1/tasks/{t}/accept",
                {"id": t},
                {"command_id": f"lm-a{i}", "expected_revision": 1, "fence": 1},
                True,
            ),
            (
                "task complete",
                "POST /v1/tasks/{id}/complete",
                f"/v1/tasks/{t}/complete",
                {"id": t},
                {
                    "command_id": f"lm-x{i}",
                    "expected_revision": 2,
                    "fence": 1,
                    "submission_id": f"s{i}",
                    "message": done,
                },
                True,
            ),
            # The reads of the task, and an exact retry of its accept.
            ("task get", "GET /v1/tasks/{id}", f"/v1/tasks/{t}", {"id": t}, None, False),
            ("task events page", "GET /v1/tasks/{id}/events", f"/v1/tasks/{t}/events", {"id": t}, None, False),
            ("task messages page", "GET /v1/tasks/{id}/messages", f"/v1/tasks/{t}/messages", {"id": t}, None, False),
            (
                "task message by id",
                "GET /v1/tasks/{id}/messages/{message_id}",
                f"/v1/tasks/{t}/messages/lm-d{i}",
                {"id": t, "message_id": f"lm-d{i}"},
                None,
                False,
            ),
            (
                "task accept, exact retry",
                "POST /v1/tasks/{id}/accept",
                f"/v1/tasks/{t}/accept",
                {"id": t},
                {"command_id": f"lm-a{i}", "expected_revision": 1, "fence": 1},
                True,
            ),
        ]
    return out


def measure(rounds: int = 15, cold_rounds: int = 3) -> dict[str, Any]:
    """Each command's warm CPU and AWS requests through the deployed handler, and the cold start's
    CPU; then the duration and price at each size, and the size chosen."""
    import importlib
    import os

    from bench.coldstart import FIRST_REQUEST, _event, _sample, prepared
    from dovecote.platform import aws
    from dovecote.platform.settings import get_settings
    from infra.local.metering import count_round_trips

    caller = {"authority": "bench", "role": "caller", "worker": "", "agent": "", "token_id": ""}
    worker = {**caller, "role": "worker", "worker": "w1"}
    cpu: dict[str, list[float]] = {}
    requests: dict[str, dict[str, int]] = {}
    with prepared() as (cases, _):
        case = cases["tasks_api"]
        cold = [
            _sample(FIRST_REQUEST, [case["module"], json.dumps(case["event"])], case["env"])[1]
            for _ in range(cold_rounds)
        ]
        saved = dict(os.environ)
        try:
            os.environ.clear()
            os.environ.update(case["env"])
            aws.reset_clients()
            get_settings.cache_clear()
            # Loaded afresh: another section may have served the module from another runtime (its
            # composition root would still point there).
            handler = importlib.reload(importlib.import_module(case["module"])).handler
            clients = (aws.client("dynamodb"), aws.client("s3"))
            # The probe's seeded task is the oldest claimable: claimed first, so each claim below
            # takes the task just created.
            seeded = _event("POST /v1/leases/claim", "/v1/leases/claim", worker, body={"command_id": "lm-seeded"})
            answer = handler(seeded, CONTEXT)
            assert answer["statusCode"] == 200, answer
            for n, (label, route, path, params, body, as_worker) in enumerate(_commands(rounds)):
                event = _event(route, path, worker if as_worker else caller, params, body=body)
                with count_round_trips(*clients) as meter:
                    start = time.thread_time()
                    answer = handler(event, CONTEXT)
                    spent = time.thread_time() - start
                assert answer["statusCode"] < 300, answer
                if n >= PER_TASK:  # the first task warms the container: not counted
                    cpu.setdefault(label, []).append(spent * 1000)
                requests[label] = dict(meter.calls)
        finally:
            os.environ.clear()
            os.environ.update(saved)
            aws.reset_clients()
            get_settings.cache_clear()
    cold_cpu = min(cold) * 1000
    commands: dict[str, Any] = {}
    for label, samples in cpu.items():
        wait = sum(REQUEST_MS.get(kind, GET_MS) * count for kind, count in requests[label].items())
        row: dict[str, Any] = {"cpu_ms": min(samples), "wait_ms": wait, "requests": requests[label]}
        for size in (*SIZES_MB, FULL_VCPU_MB):
            ms = duration_ms(row["cpu_ms"], wait, size)
            row[f"{size} MB"] = {"ms": ms, "usd_per_million": price_per_million(size, ms)}
        commands[label] = row
    cold = {  # the probe's first request: GET /v1/tasks/{id}, one GetItem
        "first_request_cpu_ms": cold_cpu,
        "wait_ms": GET_MS,
        **{f"{size} MB": duration_ms(cold_cpu, GET_MS, size) for size in (*SIZES_MB, FULL_VCPU_MB)},
    }
    return {
        "method": "duration = CPU (least thread time of the deployed handler, this machine) x max(1, 1769/MB) + "
        "AWS requests x assumed DynamoDB latency; price = $0.20/M requests + GB-s x $0.0000133334 (arm64)",
        "assumed_latency_ms": {"get": GET_MS, "query": QUERY_MS, "transact": TRANSACT_MS},
        "latency_bound": f"every warm request <= max({LATENCY_BOUND} x, +{LATENCY_SLACK_MS:.0f} ms) its duration at "
        f"{FULL_VCPU_MB} MB; the cold start <= {COLD_BOUND_MS:.0f} ms",
        "rounds": rounds,
        "commands": commands,
        "cold_start": cold,
        "chosen_mb": choose(commands, cold),
    }


def measure_apart(rounds: int = 15, cold_rounds: int = 3) -> dict[str, Any]:
    """`measure` in a fresh interpreter: nothing another section left running in this process (a
    local runtime's threads, its warm caches) is in the CPU times."""
    import subprocess
    import sys

    from bench.common import ROOT

    code = f"import json; from bench.lambda_memory import measure; print(json.dumps(measure({rounds}, {cold_rounds})))"
    out = subprocess.run(  # noqa: S603 - this interpreter, fixed code
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"the Lambda memory measurement failed: {out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def choose(commands: dict[str, Any], cold: dict[str, Any]) -> int:
    """The cheapest size (summed over the requests) within the latency bounds."""

    def within(size: int) -> bool:
        if cold[f"{size} MB"] > COLD_BOUND_MS:
            return False
        for row in commands.values():
            full = row[f"{FULL_VCPU_MB} MB"]["ms"]
            if row[f"{size} MB"]["ms"] > max(LATENCY_BOUND * full, full + LATENCY_SLACK_MS):
                return False
        return True

    def cost(size: int) -> float:
        return sum(row[f"{size} MB"]["usd_per_million"] for row in commands.values())

    return min((size for size in SIZES_MB if within(size)), key=cost, default=max(SIZES_MB))
