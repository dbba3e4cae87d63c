"""Run every benchmark and print the figures (also written to bench/results/latest.json, and into the
manual's figures page, docs/benchmarks/index.md, by bench/docs_page.py)."""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.common import ROOT, task_body, throughput, write_results
from dovecote.platform.schema import validated
from dovecote.tasks.bodies import ClaimIn, CommandIn, CompleteIn, CreateTaskIn, ReplyIn, RequestInputIn, WorkerCommandIn

console = Console()


# ---- round trips ---------------------------------------------------------------------------------


def round_trips() -> dict[str, int]:
    """AWS requests per notes command, counted through botocore `request-created` events."""
    import hashlib

    import requests

    from bench.common import CURSOR_KEY, moto_resources
    from dovecote.notes.dynamo import DynamoNoteStore
    from dovecote.notes.limits import INLINE_LIMIT
    from dovecote.notes.model import NoteFilter
    from dovecote.notes.service import NotesService, PutNote
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.principal import Principal
    from infra.local.metering import count_round_trips
    from infra.local.resources import DEFAULT_NAMES

    who = Principal("bench", "caller")
    out: dict[str, int] = {}
    with moto_resources() as aws:
        ddb, s3 = aws.ddb, aws.s3
        store = DynamoNoteStore(table=DEFAULT_NAMES["notes_table"], bucket=DEFAULT_NAMES["bucket"], dynamodb=ddb, s3=s3)
        service = NotesService(store, CursorSigner(CURSOR_KEY))
        for i in range(30):
            service.put(who, PutNote(key="k", run=1, name=f"n{i}", text="x"))

        def measure(label: str, fn: Any) -> None:
            with count_round_trips(ddb, s3) as meter:
                fn()
            out[label] = meter.total

        measure("put (inline)", lambda: service.put(who, PutNote(key="k", run=1, name="p", text="hello")))
        ref = service.put(who, PutNote(key="k", run=1, name="p", text="hello")).ref
        measure("get", lambda: service.get(who, ref))
        measure("list, 1 page of 10", lambda: service.list(who, NoteFilter(key="k"), 10, None))
        measure("list, key+run+name page", lambda: service.list(who, NoteFilter(key="k", run=1, name="p"), 10, None))
        measure("delete", lambda: service.delete(who, ref))
        body = b"b" * (INLINE_LIMIT + 1)
        digest = hashlib.sha256(body).hexdigest()
        upload = service.create_upload(who, PutNote(key="k", run=1, name="big", size=len(body), sha256=digest))
        requests.put(upload.upload_url, data=body, timeout=30)
        measure(
            "upload commit", lambda: service.put(who, PutNote(key="k", run=1, name="big", upload=True, sha256=digest))
        )
        measure("get (large, download_url)", lambda: service.get(who, upload.ref))
        task_round_trips(ddb, s3, measure)
    return out


def task_round_trips(ddb: Any, s3: Any, measure: Any) -> None:
    from bench.common import CURSOR_KEY
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.principal import Principal
    from dovecote.tasks.dynamo import DynamoTaskStore
    from dovecote.tasks.service import TaskService
    from infra.local.resources import DEFAULT_NAMES

    tasks = TaskService(
        DynamoTaskStore(table=DEFAULT_NAMES["tasks_table"], bucket=DEFAULT_NAMES["bucket"], dynamodb=ddb, s3=s3),
        CursorSigner(CURSOR_KEY),
    )
    gate = tasks.gate  # each body through its command's gate, as the HTTP handler does
    caller, worker = Principal("bench", "caller"), Principal("bench", "worker", "w1")
    msg = {"id": "m1", "parts": [{"media_type": "text/plain", "text": "hi"}]}

    def run(label: str, fn: Any) -> Any:
        result: dict[str, Any] = {}

        def call() -> None:
            result["v"] = fn()

        measure("task " + label, call)
        return result["v"]

    run(
        "create",
        lambda: tasks.create(
            caller,
            gate.create(
                caller,
                validated(
                    CreateTaskIn, {"command_id": "c1", "workspace": "w", "id": "t1", "context": "x", "message": msg}
                ),
            ),
        ),
    )
    fence = run(
        "acquire lease",
        lambda: tasks.acquire(worker, gate.acquire(worker, "t1", validated(CommandIn, {"command_id": "c2"}))),
    ).answer.fence
    accept = {"command_id": "c3", "expected_revision": 1, "fence": fence}
    run("accept", lambda: tasks.accept(worker, gate.accept(worker, "t1", validated(WorkerCommandIn, accept))))
    run(
        "accept, exact replay",
        lambda: tasks.accept(worker, gate.accept(worker, "t1", validated(WorkerCommandIn, accept))),
    )
    run(
        "request_input",
        lambda: tasks.request_input(
            worker,
            gate.request_input(
                worker,
                "t1",
                validated(
                    RequestInputIn,
                    {
                        "command_id": "c4",
                        "expected_revision": 2,
                        "fence": fence,
                        "message": {"id": "m2", "parts": [{"media_type": "text/plain", "text": "?"}]},
                    },
                ),
            ),
        ),
    )
    run(
        "reply",
        lambda: tasks.reply(
            caller,
            gate.reply(
                caller,
                "t1",
                validated(
                    ReplyIn,
                    {
                        "command_id": "c5",
                        "expected_revision": 3,
                        "message": {"id": "m3", "parts": [{"media_type": "text/plain", "text": "!"}]},
                    },
                ),
            ),
        ),
    )
    run(
        "complete",
        lambda: tasks.complete(
            worker,
            gate.complete(
                worker,
                "t1",
                validated(
                    CompleteIn,
                    {
                        "command_id": "c6",
                        "expected_revision": 4,
                        "fence": fence,
                        "submission_id": "s1",
                        "message": {"id": "m4", "parts": [{"media_type": "text/plain", "text": "done"}]},
                    },
                ),
            ),
        ),
    )
    tasks.create(
        caller,
        gate.create(
            caller,
            validated(
                CreateTaskIn,
                {
                    "command_id": "c7",
                    "workspace": "w",
                    "id": "t2",
                    "context": "x",
                    "message": {"id": "m5", "parts": [{"media_type": "text/plain", "text": "hi"}]},
                },
            ),
        ),
    )
    run(
        "claim (uncontended)", lambda: tasks.claim(worker, gate.claim(worker, validated(ClaimIn, {"command_id": "c8"})))
    )
    # The reads of t1: the task's read, then the store's. Its 5 events outgrew its item at the
    # complete (4 message places and a grant stay inline): a page from the start adds a Query.
    run("get", lambda: tasks.get(caller, "t1"))
    run("events page", lambda: tasks.events(caller, "t1", None, None))
    run("messages page", lambda: tasks.messages(caller, "t1", None, None))
    run("message by id", lambda: tasks.message(caller, "t1", "m2"))


# ---- import time ---------------------------------------------------------------------------------

_IMPORT_PROBE = "import time,sys;t=time.perf_counter();__import__(sys.argv[1]);print(time.perf_counter()-t)"


def _import_seconds(module: str) -> float:
    env = {**os.environ, "POWERTOOLS_SERVICE_NAME": "bench", "DOVECOTE_CURSOR_KEY": "x" * 32}
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE, module], capture_output=True, text=True, env=env, cwd=ROOT, check=True
    )
    return float(result.stdout.strip())


def import_ratios(rounds: int) -> dict[str, dict[str, float]]:
    """Median import time of each handler module, in fresh interpreters, interleaved with
    `import boto3` in the same run so machine load affects both alike."""
    modules = {
        "notes_api": "functions.notes_api.handler",
        "tasks_api": "functions.tasks_api.handler",
        "authorizer": "functions.authorizer.handler",
        "admin_api": "functions.admin_api.handler",
        "memory_api": "functions.memory_api.handler",
        "recall_api": "functions.recall_api.handler",
        "a2a_api": "functions.a2a_api.handler",  # a2a-sdk's protobuf types: this function's alone
    }
    samples: dict[str, list[float]] = {name: [] for name in ["boto3", *modules]}
    for module in ("boto3", *modules.values()):  # warm the bytecode caches once
        _import_seconds(module)
    for _ in range(rounds):
        samples["boto3"].append(_import_seconds("boto3"))
        for name, module in modules.items():
            samples[name].append(_import_seconds(module))
    boto3_median = statistics.median(samples["boto3"])
    return {
        name: {"median_ms": statistics.median(values) * 1000, "ratio": statistics.median(values) / boto3_median}
        for name, values in samples.items()
    }


# ---- latency and throughput against the local runtime -----------------------------------------------


def local_runtime(count: int, workers: int) -> dict[str, dict[str, float]]:
    import concurrent.futures

    import httpx

    from infra.local.runtime import LocalRuntime

    runtime = LocalRuntime(port=0, tokens_file=ROOT / ".dovecote" / "bench-tokens.json").start()
    headers = {"Authorization": f"Bearer {runtime.tokens['caller']}"}
    results: dict[str, dict[str, float]] = {}
    try:
        with httpx.Client(base_url=runtime.endpoint, headers=headers, timeout=30) as http:

            def timed(label: str, calls: list[Any]) -> list[Any]:
                latencies, answers = [], []
                start = time.perf_counter()
                for call in calls:
                    t = time.perf_counter()
                    response = call()
                    latencies.append(time.perf_counter() - t)
                    assert response.status_code < 300, response.text
                    answers.append(response)
                results[label] = throughput(latencies, time.perf_counter() - start)
                return answers

            puts = timed(
                "put (1 KiB, sequential)",
                [
                    (
                        lambda i=i: http.put(
                            "/v1/notes", json={"key": "bench", "run": 1, "name": f"n{i}", "text": "x" * 1024}
                        )
                    )
                    for i in range(count)
                ],
            )
            refs = [r.json()["ref"] for r in puts]
            timed("get (sequential)", [(lambda r=r: http.get(f"/v1/notes/{r}")) for r in refs])
            timed(
                "list key, 100 per page",
                [
                    (lambda: http.get("/v1/notes", params={"key": "bench", "limit": 100}))
                    for _ in range(max(10, count // 10))
                ],
            )

        def put_one(i: int) -> float:
            t = time.perf_counter()
            response = httpx.put(
                runtime.endpoint + "/v1/notes",
                headers=headers,
                timeout=30,
                json={"key": "bench-par", "run": 1, "name": f"n{i}", "text": "x" * 1024},
            )
            assert response.status_code == 200, response.text
            return time.perf_counter() - t

        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            latencies = list(pool.map(put_one, range(count)))
        results[f"put ({workers} concurrent clients)"] = throughput(latencies, time.perf_counter() - start)
        results.update(task_figures(runtime, count, workers))
    finally:
        runtime.stop()
    return results


def task_figures(runtime: Any, count: int, workers: int) -> dict[str, dict[str, float]]:
    """Command latency over HTTP, then claim throughput with `workers` concurrent worker tokens."""
    import concurrent.futures
    import uuid

    import httpx

    admin = {"Authorization": f"Bearer {runtime.tokens['admin']}"}
    caller = {"Authorization": f"Bearer {runtime.tokens['caller']}"}
    worker = {"Authorization": f"Bearer {runtime.tokens['worker']}"}
    latencies: dict[str, list[float]] = {k: [] for k in ("create", "lease", "accept", "complete")}
    results: dict[str, dict[str, float]] = {}
    with httpx.Client(base_url=runtime.endpoint, timeout=30) as http:

        def timed(label: str, method: str, path: str, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
            t = time.perf_counter()
            response = http.request(method, path, json=body, headers=headers)
            latencies[label].append(time.perf_counter() - t)
            assert response.status_code < 300, response.text
            return dict(response.json())

        for i in range(count // 3):
            tid = f"lat-{i}"
            msg = {"id": f"lat-m{i}", "parts": [{"media_type": "text/plain", "text": "x"}]}
            timed(
                "create",
                "POST",
                "/v1/tasks",
                caller,
                {"command_id": f"lc{i}", "workspace": "w", "id": tid, "context": "bench", "message": msg},
            )
            fence = timed("lease", "POST", f"/v1/tasks/{tid}/lease", worker, {"command_id": f"ll{i}"})["assignment"][
                "fence"
            ]
            timed(
                "accept",
                "POST",
                f"/v1/tasks/{tid}/accept",
                worker,
                {"command_id": f"la{i}", "expected_revision": 1, "fence": fence},
            )
            timed(
                "complete",
                "POST",
                f"/v1/tasks/{tid}/complete",
                worker,
                {
                    "command_id": f"lx{i}",
                    "expected_revision": 2,
                    "fence": fence,
                    "submission_id": f"ls{i}",
                    "message": {"id": f"lat-r{i}", "parts": [{"media_type": "text/plain", "text": "done"}]},
                },
            )
        for label, values in latencies.items():
            results[f"task {label}"] = throughput(values, sum(values))
        tokens = [
            http.post(
                "/v1/admin/tokens", json={"authority": "dev", "role": "worker", "worker": f"bench-{i}"}, headers=admin
            ).json()["token"]
            for i in range(workers)
        ]
        for i in range(count):
            http.post(
                "/v1/tasks",
                headers=caller,
                json=task_body(f"claim-{i}", f"claim-{i}", "claims"),
            )

    def claim_all(token: str) -> list[float]:
        took = []
        with httpx.Client(base_url=runtime.endpoint, timeout=60, headers={"Authorization": f"Bearer {token}"}) as c:
            while True:
                t = time.perf_counter()
                response = c.post("/v1/leases/claim", json={"command_id": f"claim-{uuid.uuid4().hex}"})
                if response.status_code == 404:
                    return took
                assert response.status_code == 200, response.text
                took.append(time.perf_counter() - t)

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        per_worker = list(pool.map(claim_all, tokens))
    wall = time.perf_counter() - start
    claims = [t for worker_claims in per_worker for t in worker_claims]
    results[f"claim ({workers} concurrent workers)"] = throughput(claims, wall)
    return results


# ---- the sections ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    quick: bool
    count: int  # requests per local-runtime figure
    rounds: int  # fresh interpreters per import / cold-start figure


def _print_round_trips(figures: dict[str, int]) -> None:
    table = Table("command", "AWS round trips")
    for label, n in figures.items():
        table.add_row(label, str(n))
    console.print(table)


def _print_imports(figures: dict[str, dict[str, float]]) -> None:
    table = Table("module", "median ms", "× import boto3")
    for name, row in figures.items():
        table.add_row(name, f"{row['median_ms']:.0f}", f"{row['ratio']:.2f}")
    console.print(table)


def _print_local(figures: dict[str, dict[str, float]]) -> None:
    table = Table("operation", "n", "median ms", "p95 ms", "req/s")
    for label, row in figures.items():
        table.add_row(label, str(row["n"]), f"{row['median_ms']:.1f}", f"{row['p95_ms']:.1f}", f"{row['per_s']:.0f}")
    console.print(table)


def cold_start(report: dict[str, Any], run: Run) -> None:
    from bench.coldstart import measure

    for tracing in (False, True):
        result = measure(run.rounds, tracing=tracing)
        report["cold_start" + ("_tracing" if tracing else "")] = result
        label = "X-Ray subsegments on (Powertools Tracer)" if tracing else "shipped: tracing SDK not loaded"
        table = Table("function", "first request", "median ms", "× floor", "CPU ms", "CPU × floor", title=label)
        table.add_row(
            "floor",
            "import boto3 + client + GetItem",
            f"{result['floor_ms']:.0f}",
            "1.00",
            f"{result['floor_cpu_ms']:.0f}",
            "1.00",
        )
        for name, row in result["functions"].items():
            table.add_row(
                name,
                row["request"],
                f"{row['median_ms']:.0f}",
                f"{row['ratio']:.2f}",
                f"{row['cpu_ms']:.0f}",
                f"{row['cpu_ratio']:.2f}",
            )
        console.print(table)


def cost(report: dict[str, Any], run: Run) -> None:
    from bench import lambda_memory
    from bench.cost import (
        LEVERS,
        PRICES,
        PRICES_AS_OF,
        UTILISATION,
        capacity_per_command,
        folded_wru,
        price_per_million,
    )
    from infra.routes import FUNCTIONS

    local = report.get("local_runtime")
    capacity = capacity_per_command()
    memory = lambda_memory.measure_apart(rounds=15, cold_rounds=3 if run.quick else 5)
    tasks_mb = FUNCTIONS["tasks_api"].memory_mb
    latency = {"note put (1 KiB inline)": "put (1 KiB, sequential)", "note get": "get (sequential)"}
    table = Table(
        "command", "WRU", "RRU", "index WRU", "DynamoDB $", "Lambda $", "total $/M", "provisioned $/M", "+ indexes $/M"
    )
    report["cost"] = {
        "prices": PRICES,
        "prices_as_of": PRICES_AS_OF,
        "provisioned_utilisation": UTILISATION,
        "lambda_duration": f"task rows: the model of bench/lambda_memory.py at the tasks API's {tasks_mb} MB; "
        "note rows: the local runtime's median latency (30 ms without it)",
        "commands": {},
    }
    for label, cap in capacity.items():
        modelled = memory["commands"].get(label)
        if modelled is not None:
            mb, duration = tasks_mb, modelled[f"{tasks_mb} MB"]["ms"] if f"{tasks_mb} MB" in modelled else 30.0
        else:
            mb = FUNCTIONS["notes_api"].memory_mb
            duration = (local or {}).get(latency.get(label, ""), {}).get("median_ms", 30.0)
        price = price_per_million(cap, memory_mb=mb, duration_ms=duration)
        provisioned = price_per_million(cap, memory_mb=mb, duration_ms=duration, provisioned=True)
        report["cost"]["commands"][label] = {
            **cap,
            "duration_ms": duration,
            "usd_per_million": price,
            "usd_per_million_provisioned": provisioned,
        }
        table.add_row(
            label,
            f"{cap['wru']:.0f}",
            f"{cap['rru']:.1f}",
            f"{cap['index_wru']:.0f}",
            f"{price['dynamodb']:.2f}",
            f"{price['lambda']:.2f}",
            f"{price['total']:.2f}",
            f"{provisioned['total']:.2f}",
            f"{price['total_with_indexes']:.2f}",
        )
    console.print(table)
    console.print(
        f"API Gateway $1.00 a million in every row; provisioned at {UTILISATION:.0%} utilisation; "
        "'+ indexes': on-demand with the index writes"
    )
    _print_lambda_memory(memory)
    report["cost"]["lambda_memory"] = memory
    # What folding more into the task item would cost (computed from the items written, not built).
    levers = Table("task command", *LEVERS, title="WRU / all-in $ per million, by layout")
    report["cost"]["levers"] = {}
    for label, cap in capacity.items():
        if not label.startswith("task") or not cap["transactions"]:
            continue
        duration = report["cost"]["commands"][label]["duration_ms"]
        row = {}
        for lever, (folded, short_names) in LEVERS.items():
            if label == "task claim":  # its replay finds the receipt by command id, before the task is known
                folded = folded - {"receipt"}
            units = folded_wru(cap["transactions"], folded, short_names)
            price = price_per_million({**cap, "wru": units}, memory_mb=tasks_mb, duration_ms=duration)
            row[lever] = {"wru": units, "usd_per_million": price["total"]}
        report["cost"]["levers"][label] = row
        levers.add_row(label, *(f"{v['wru']:.0f} / {v['usd_per_million']:.2f}" for v in row.values()))
    console.print(levers)
    transition = PRICES["stepfunctions_standard_transition"] * 1e6
    console.print(f"for comparison: one Step Functions Standard state transition is ${transition:.2f} per million")
    console.print(f"prices: {PRICES_AS_OF}")


def _print_lambda_memory(memory: dict[str, Any]) -> None:
    from bench.lambda_memory import FULL_VCPU_MB, SIZES_MB

    sizes = (*SIZES_MB, FULL_VCPU_MB)
    title = f"tasks API Lambda (arm64): warm ms / $ per million by memory; chosen {memory['chosen_mb']} MB"
    table = Table("request", "CPU ms", "AWS wait ms", *(f"{s} MB" for s in sizes), title=title)
    for label, row in memory["commands"].items():
        cells = [f"{row[f'{s} MB']['ms']:.0f} / {row[f'{s} MB']['usd_per_million']:.2f}" for s in sizes]
        table.add_row(label, f"{row['cpu_ms']:.1f}", f"{row['wait_ms']:.0f}", *cells)
    cold = memory["cold_start"]
    cells = (f"{cold[f'{s} MB']:.0f}" for s in sizes)
    table.add_row("cold start (GET a task)", f"{cold['first_request_cpu_ms']:.0f}", f"{cold['wait_ms']:.0f}", *cells)
    console.print(table)
    console.print(memory["method"])


def figures(
    key: str, measure: Callable[[Run], Any], show: Callable[[Any], None]
) -> Callable[[dict[str, Any], Run], None]:
    """A section that measures one figure set, stores it under `key` and prints it."""

    def section(report: dict[str, Any], run: Run) -> None:
        report[key] = measure(run)
        show(report[key])

    return section


def module(name: str, measure: str) -> Callable[[dict[str, Any], Run], None]:
    """A section whose figures come from bench/<name>.py, stored under `name`: its `measure(quick)`,
    then its `print_report` (the module is imported only when the section runs)."""

    def section(report: dict[str, Any], run: Run) -> None:
        bench = importlib.import_module(f"bench.{name}")
        report[name] = getattr(bench, measure)(run.quick)
        bench.print_report(report[name])

    return section


# What runs, in this order, and the title it prints ({count} and {rounds} filled in).
SECTIONS: dict[str, Callable[[dict[str, Any], Run], None]] = {
    "round_trips": figures("round_trips", lambda run: round_trips(), _print_round_trips),
    "imports": figures("imports", lambda run: import_ratios(run.rounds), _print_imports),
    "coldstart": cold_start,
    "local": figures("local_runtime", lambda run: local_runtime(run.count, workers=8), _print_local),
    "cost": cost,
    "recall": module("recall", "recall_report"),
    "recall-dev": module("recall_dev", "recall_dev_report"),
    "semantic": module("semantic", "semantic_report"),
    "memory": module("memory", "memory_figures"),
    "workers": module("workers", "workers_report"),
    "mcp": module("mcp", "mcp_report"),
    "devstart": module("devstart", "devstart_report"),
    "devidle": module("devidle", "devidle_report"),
    "dispatcher": module("dispatcher", "dispatcher_report"),
    "cli": module("cli", "cli_report"),
    "claims": module("claims", "claims_report"),
    "streams": module("streams", "streams_report"),
    "push": module("push", "push_report"),
}
TITLES = {
    "round_trips": "AWS round trips per command (moto, botocore request-created events)",
    "imports": "handler import time vs `import boto3` (median of {rounds} fresh interpreters; secondary)",
    "coldstart": "cold start: import + first request vs the floor (median of {rounds} fresh interpreters)",
    "local": "latency and throughput against the local runtime ({count} requests each)",
    "cost": "cost per command: capacity from real item sizes, dollars per million commands",
    "recall": "recall: ingest, search/read/outline latency, retrieval quality per ranker",
    "recall-dev": "recall on real conversations (LoCoMo, limit 30): each ranker's recall@k and MRR, Kendall's tau"
    " against the held-out table's order",
    "semantic": "recall's semantic tier: quality of each fusion beside the lexical rankers, embed rate, latency on/off",
    "memory": "memory: round trips per command, detection cost by store size, writes/s end to end",
    "workers": "an SDK worker's requests per minute: idle (long-poll), busy (heartbeats)",
    "mcp": "MCP round trip vs the SDK's direct HTTP call (notes get, recall search)",
    "devstart": "`dovecote dev --data DIR` start time: empty, seeded, after kill -9 (snapshot + journal)",
    "devidle": "`dovecote dev` at rest: CPU share of an idle runtime, fresh and with a few hundred notes and tasks",
    "dispatcher": "lease dispatcher: AWS requests and items read per run, by open and overdue leases",
    "cli": "the dovecote command: --version and notes get, new processes, median of 9, beside python -c pass",
    "streams": "task streams: commit-to-client latency with 1, 50, 200 open streams; idle cost; cut-and-resume",
    "push": "webhooks: commit-to-delivery latency; notifications per second one sender sustains; $ per million",
    "claims": "claims per second per authority on DynamoDB, modelled (the claim's request sequence; assumed latencies);"
    " 32 threads draining a backlog on moto (exactly once, requests per claim)",
}


def main() -> None:
    names = list(SECTIONS)
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="fewer samples (CI smoke run)")
    parser.add_argument("--only", default=",".join(names), help=f"comma-separated subset of {','.join(names)}")
    args = parser.parse_args()
    only = set(args.only.split(","))
    count, rounds = (40, 3) if args.quick else (300, 9)
    run = Run(args.quick, count, rounds)
    report: dict[str, Any] = {
        "python": sys.version.split()[0],
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    for name, section in SECTIONS.items():
        if name in only:
            console.print(f"\n[bold]{TITLES[name].format(count=count, rounds=rounds)}[/bold]")
            section(report, run)
    console.print(f"written: {write_results('latest.json', report)}")
    from bench.docs_page import update  # the manual's figures page (docs/benchmarks/index.md)

    console.print(f"written: {update(report, quick=args.quick)}")


if __name__ == "__main__":
    main()
