"""Cold start, measured honestly: a fresh interpreter imports the handler AND serves its first real
request against the local runtime's AWS endpoint (moto behind real HTTP), compared, in the same run,
with the floor: a fresh interpreter that does `import boto3`, creates a DynamoDB client and makes one
GetItem. The floor is the least any Python Lambda that reads DynamoDB can do.

Each sample is the time inside the child from before its first import to the first response; the
interpreter's own start (identical for both) is left out. Samples are interleaved so machine load
hits both alike; the report is the median of `rounds` runs each and their ratio. The child's CPU
time is reported beside the wall time: on a shared machine it moves less with other processes' load.

The first probe of each case writes its bytecode and is not counted: a deployed function ships its
modules compiled (infra/build.py), as the floor's boto3 is in the runtime, so PYTHONDONTWRITEBYTECODE
is dropped for the children (with it, each sample compiled the project's own modules from source,
and the warm-up warmed nothing).

Every API function is measured, each in the environment the stack deploys it with
(`infra.routes.Function.environment`). `python -m bench.coldstart [FUNCTION...]` runs this section
alone; `--profile FUNCTION` prints the `-X importtime` profile of that function's first request.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dovecote.platform.schema import validated
from dovecote.tasks.bodies import CreateTaskIn

ROOT = Path(__file__).resolve().parent.parent

FLOOR = """
import time, sys
t, cpu = time.perf_counter(), time.process_time()
import boto3
c = boto3.session.Session().client("dynamodb")
c.get_item(TableName=sys.argv[1], Key={"token_id": {"S": "0000000000000000"}}, ConsistentRead=True)
print(time.perf_counter() - t, time.process_time() - cpu)
"""

FIRST_REQUEST = """
import time, sys, json, importlib
t, cpu = time.perf_counter(), time.process_time()
module = importlib.import_module(sys.argv[1])
event = json.loads(sys.argv[2])

class Context:
    function_name = "cold"; memory_limit_in_mb = 1024; aws_request_id = "r"
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:cold"
    log_group_name = "g"; log_stream_name = "s"
    def get_remaining_time_in_millis(self): return 29000

result = module.handler(event, Context())
elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
if "isAuthorized" in result:
    ok = result["isAuthorized"]
elif "batchItemFailures" in result:  # a stream or queue consumer: every record of its batch handled
    ok = not result["batchItemFailures"]
else:
    ok = result.get("statusCode", 500) < 300
assert ok, result
print(elapsed, cpu)
"""


def _event(
    route: str,
    path: str,
    principal: dict[str, str],
    params: dict[str, str] | None = None,
    *,
    query: dict[str, str] | None = None,
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    method, _ = route.split(" ", 1)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route,
        "rawPath": path,
        "rawQueryString": "&".join(f"{k}={v}" for k, v in (query or {}).items()),
        "headers": {"content-type": "application/json"} if body is not None else {},
        "requestContext": {
            "http": {"method": method, "path": path, "sourceIp": "127.0.0.1", "protocol": "HTTP/1.1", "userAgent": "b"},
            "requestId": "cold",
            "routeKey": route,
            "stage": "$default",
            "authorizer": {"lambda": principal},
        },
        "pathParameters": params or {},
        "isBase64Encoded": False,
    }
    if query:
        event["queryStringParameters"] = query
    if body is not None:
        event["body"] = json.dumps(body)
    return event


def _seed(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """A note, a task and a token in the moto server; the first request of each function."""
    from dovecote.admin.dynamo import DynamoTokenStore
    from dovecote.admin.service import TokenService
    from dovecote.notes.dynamo import DynamoNoteStore
    from dovecote.notes.service import NotesService, PutNote
    from dovecote.platform import aws
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.principal import Principal
    from dovecote.platform.settings import get_settings
    from dovecote.tasks.dynamo import DynamoTaskStore
    from dovecote.tasks.service import TaskService

    s = get_settings()
    ddb, s3 = aws.client("dynamodb"), aws.client("s3")
    caller = Principal("bench", "caller")
    note = NotesService(
        DynamoNoteStore(table=s.notes_table, bucket=s.bucket, dynamodb=ddb, s3=s3), CursorSigner(b"k" * 32)
    ).put(caller, PutNote(key="k", run=1, name="cold", text="hello"))
    tasks = TaskService(
        DynamoTaskStore(table=s.tasks_table, bucket=s.bucket, dynamodb=ddb, s3=s3), CursorSigner(b"k" * 32)
    )
    create = {
        "command_id": "cold-c",
        "workspace": "w",
        "id": "cold-t",
        "context": "c",
        "message": {"id": "cold-m", "parts": [{"media_type": "text/plain", "text": "hi"}]},
    }
    tasks.create(caller, tasks.gate.create(caller, validated(CreateTaskIn, create)))
    push = _seed_push(s, ddb)
    token, _ = TokenService(DynamoTokenStore(table=s.tokens_table, dynamodb=ddb), audit=lambda *_: None).mint(
        None, "bench", "admin", None
    )
    p = {"authority": "bench", "role": "admin", "worker": "", "agent": "", "token_id": ""}
    c = {**p, "role": "caller"}
    return {
        "notes_api": {
            "module": "functions.notes_api.handler",
            "event": _event("GET /v1/notes/{ref}", f"/v1/notes/{note.ref}", p, {"ref": note.ref}),
            "request": "GET /v1/notes/{ref} (inline)",
        },
        "tasks_api": {
            "module": "functions.tasks_api.handler",
            "event": _event("GET /v1/tasks/{id}", "/v1/tasks/cold-t", p, {"id": "cold-t"}),
            "request": "GET /v1/tasks/{id}",
        },
        "admin_api": {
            "module": "functions.admin_api.handler",
            "event": _event("GET /v1/admin/tokens", "/v1/admin/tokens", p),
            "request": "GET /v1/admin/tokens",
        },
        "memory_api": {
            "module": "functions.memory_api.handler",
            "event": _event("GET /v1/memory", "/v1/memory", c, query={"scope": "cold"}),
            "request": "GET /v1/memory?scope=",
        },
        "recall_api": {
            "module": "functions.recall_api.handler",
            "event": _event("POST /v1/transcripts/check", "/v1/transcripts/check", c, body={"sha256": ["0" * 64]}),
            "request": "POST /v1/transcripts/check",
            # The engine the stack deploys (SigV4 to a domain): its client is built, never reached here.
            "env": {"DOVECOTE_OPENSEARCH_URL": "https://127.0.0.1:9", "DOVECOTE_OPENSEARCH_AWS_SERVICE": "es"},
        },
        "a2a_api": {
            "module": "functions.a2a_api.handler",
            "event": {
                **_event("POST /", "/", p),
                "headers": {"a2a-version": "1.0", "content-type": "application/json"},
                "body": json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "cold-t"}}),
            },
            "request": "JSON-RPC GetTask",
        },
        **push,
        "authorizer": {
            "module": "functions.authorizer.handler",
            "event": {"headers": {"authorization": f"Bearer {token}"}, "routeKey": "GET /v1/notes"},
            "request": "authorize a bearer token",
        },
    }


def _seed_push(s: Any, ddb: Any) -> dict[str, dict[str, Any]]:
    """A webhook of the seeded task pointing at a loopback receiver of this process, and the first
    request of each push function: the API's list, the fan-out's stream batch, the sender's delivery
    (a redriven notice: delivered again in every round, whatever the cursor says)."""
    import tempfile
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from dovecote.push.dynamo import DynamoConfigStore
    from dovecote.push.model import Notice, PushConfig

    class Ok(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    receiver.daemon_threads = True
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
    DynamoConfigStore(table=s.push_table, dynamodb=ddb).put(
        PushConfig("bench", "cold-t", "cold-w", url, "2026-01-01T00:00:00.000Z"), limit=10
    )
    c = {"authority": "bench", "role": "caller", "worker": "", "agent": "", "token_id": ""}
    stream_record = {
        "eventName": "INSERT",
        "dynamodb": {"Keys": {"pk": {"S": "T#bench#cold-t"}, "sk": {"S": "E#" + "1".zfill(20)}}, "SequenceNumber": "1"},
    }
    notice = Notice("bench", "cold-t", "cold-w", 1, redrive=1)
    sqs_record = {
        "messageId": "cold-m",
        "receiptHandle": "",
        "body": notice.to_body(),
        "attributes": {"ApproximateReceiveCount": "1", "MessageGroupId": notice.group_id},
        "messageAttributes": {},
        "eventSource": "aws:sqs",
    }
    keys = str(Path(tempfile.mkdtemp(prefix="dovecote-cold-")) / "webhook-keys.json")
    return {
        "push_api": {
            "module": "functions.push_api.handler",
            "event": _event("GET /v1/tasks/{id}/webhooks", "/v1/tasks/cold-t/webhooks", c, {"id": "cold-t"}),
            "request": "GET /v1/tasks/{id}/webhooks",
        },
        "push_fanout": {
            "module": "functions.push_fanout.handler",
            "event": {"Records": [stream_record]},
            "request": "a stream batch of one event insert (a Query, a SendMessageBatch)",
        },
        "push_sender": {
            "module": "functions.push_sender.handler",
            "event": {"Records": [sqs_record]},
            "request": "one notification: built from the log, signed, POSTed to a loopback receiver",
            "env": {"DOVECOTE_ALLOW_LOOPBACK_WEBHOOKS": "true", "DOVECOTE_WEBHOOK_KEY_FILE": keys},
        },
    }


def _sample(code: str, args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds in the child: the CPU time is the child's own (the moto server's work
    is not in it), a check on the wall figure when other processes load the machine."""
    out = subprocess.run(  # noqa: S603 - this interpreter, fixed code
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"cold-start probe failed: {out.stderr[-2000:]}")
    wall, cpu = out.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


@contextmanager
def prepared(*, tracing: bool = False) -> Iterator[tuple[dict[str, dict[str, Any]], dict[str, str]]]:
    """A moto server seeded for every case; yields the cases (each with the environment its probe
    runs in: the deployed function's own, from infra/routes.py) and the floor's environment."""
    import logging
    import urllib.request

    from moto.server import ThreadedMotoServer

    from dovecote.platform import aws
    from dovecote.platform.settings import get_settings
    from infra.local.moto_patches import serialize_dynamodb
    from infra.local.resources import DEFAULT_NAMES, create_all
    from infra.routes import AUTHORIZER, FUNCTIONS, PUSH_FANOUT, PUSH_SENDER

    serialize_dynamodb()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    # moto's backends are process-wide: start every measurement from an empty account.
    urllib.request.urlopen(urllib.request.Request(f"http://{host}:{port}/moto-api/reset", method="POST"))  # noqa: S310
    saved = dict(os.environ)
    try:
        os.environ.update(
            AWS_ENDPOINT_URL=f"http://{host}:{port}",
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
            AWS_DEFAULT_REGION="us-east-1",
            AWS_REGION="us-east-1",
            DOVECOTE_CURSOR_KEY="cold-start-cursor-key-0123456789",
        )
        aws.reset_clients()
        get_settings.cache_clear()
        env = create_all(
            dynamodb=aws.client("dynamodb"),
            s3=aws.client("s3"),
            secretsmanager=None,
            sqs=aws.client("sqs"),
            names=DEFAULT_NAMES,
        )
        os.environ.update(env)
        get_settings.cache_clear()
        cases = _seed(env)
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("POWERTOOLS_", "AWS_XRAY", "_X_AMZN")) and k != "PYTHONDONTWRITEBYTECODE"
        }
        # Lambda names the function in every environment it runs (dovecote.platform.gc_pause reads it).
        base["AWS_LAMBDA_FUNCTION_NAME"] = "cold"
        if tracing:
            # As in Lambda with active tracing: a sampled trace header and a daemon (a dead port).
            base.update(
                LAMBDA_TASK_ROOT=str(ROOT),
                AWS_XRAY_DAEMON_ADDRESS="127.0.0.1:9",
                AWS_XRAY_CONTEXT_MISSING="IGNORE_ERROR",
                _X_AMZN_TRACE_ID="Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
            )
        specs = {AUTHORIZER.name: AUTHORIZER, PUSH_FANOUT.name: PUSH_FANOUT, PUSH_SENDER.name: PUSH_SENDER, **FUNCTIONS}
        for name, case in cases.items():
            case["env"] = {**base, **specs[name].environment(subsegments=tracing), **case.get("env", {})}
        yield cases, base
    finally:
        os.environ.clear()
        os.environ.update(saved)
        aws.reset_clients()
        get_settings.cache_clear()
        server.stop()


def measure(rounds: int = 9, *, tracing: bool = False, only: set[str] | None = None) -> dict[str, Any]:
    """Median first-request time per function and the floor, with tracing off (the shipped
    configuration: Lambda's active tracing still records each invocation) or on (Powertools Tracer
    with X-Ray subsegments for every AWS call)."""
    load = os.getloadavg()[0]
    with prepared(tracing=tracing) as (cases, floor_env):
        cases = {name: case for name, case in cases.items() if only is None or name in only}
        samples: dict[str, list[tuple[float, float]]] = {"floor": [], **{name: [] for name in cases}}
        tokens_table = floor_env["DOVECOTE_TOKENS_TABLE"]
        _sample(FLOOR, [tokens_table], floor_env)  # warm the bytecode caches once
        for case in cases.values():
            _sample(FIRST_REQUEST, [case["module"], json.dumps(case["event"])], case["env"])
        for _ in range(rounds):
            samples["floor"].append(_sample(FLOOR, [tokens_table], floor_env))
            for name, case in cases.items():
                samples[name].append(_sample(FIRST_REQUEST, [case["module"], json.dumps(case["event"])], case["env"]))
    floor = statistics.median(wall for wall, _ in samples["floor"])
    floor_cpu = statistics.median(cpu for _, cpu in samples["floor"])
    report: dict[str, Any] = {
        "floor_ms": floor * 1000,
        "floor_cpu_ms": floor_cpu * 1000,
        "rounds": rounds,
        "tracing": tracing,
        "load": load,
        "functions": {},
    }
    for name, case in cases.items():
        median = statistics.median(wall for wall, _ in samples[name])
        cpu = statistics.median(cpu for _, cpu in samples[name])
        report["functions"][name] = {
            "request": case["request"],
            "median_ms": median * 1000,
            "ratio": median / floor,
            "cpu_ms": cpu * 1000,
            "cpu_ratio": cpu / floor_cpu,
        }
    return report


def instructions(*, only: set[str] | None = None) -> dict[str, float]:
    """Each probe's executed instructions (valgrind callgrind, less a bare interpreter's) as a ratio to
    the floor's: a count that does not move with the machine's load (about 15 s a probe)."""
    import re
    import shutil

    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind on PATH")

    def count(args: list[str], env: dict[str, str]) -> int:
        out = subprocess.run(  # noqa: S603 - valgrind on this interpreter, fixed code
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, *args],  # noqa: S607
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            check=False,
        )
        found = re.search(r"Collected : (\d+)", out.stderr)
        if out.returncode != 0 or found is None:
            raise RuntimeError(f"callgrind probe failed: {out.stderr[-2000:]}")
        return int(found.group(1))

    with prepared() as (cases, floor_env):
        table = floor_env["DOVECOTE_TOKENS_TABLE"]
        _sample(FLOOR, [table], floor_env)  # bytecode written, as in measure()
        bare = count(["-c", "pass"], floor_env)
        floor = count(["-c", FLOOR, table], floor_env) - bare
        ratios = {"floor_instructions": float(floor)}
        for name, case in cases.items():
            if only is not None and name not in only:
                continue
            args = [case["module"], json.dumps(case["event"])]
            _sample(FIRST_REQUEST, args, case["env"])
            ratios[name] = (count(["-c", FIRST_REQUEST, *args], case["env"]) - bare) / floor
    return ratios


def profile(name: str, *, tracing: bool = False) -> str:
    """`python -X importtime` of one function's first request: the modules it loads, by cumulative
    microseconds (the tool for deciding what to load later)."""
    with prepared(tracing=tracing) as (cases, _):
        case = cases[name]
        _sample(FIRST_REQUEST, [case["module"], json.dumps(case["event"])], case["env"])  # writes the bytecode
        out = subprocess.run(  # noqa: S603 - this interpreter, fixed code
            [sys.executable, "-X", "importtime", "-c", FIRST_REQUEST, case["module"], json.dumps(case["event"])],
            capture_output=True,
            text=True,
            env=case["env"],
            cwd=ROOT,
            check=True,
        )
    return out.stderr


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.coldstart", description=__doc__)
    parser.add_argument("functions", nargs="*", help="only these (default: every API function)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--tracing", action="store_true", help="with X-Ray subsegments")
    parser.add_argument("--profile", metavar="FUNCTION", help="print the import profile of its first request")
    parser.add_argument("--instructions", action="store_true", help="count instructions instead (valgrind)")
    args = parser.parse_args()
    if args.instructions:
        ratios = instructions(only=set(args.functions) or None)
        print(f"floor        {ratios.pop('floor_instructions') / 1e6:,.0f} million instructions")
        for name, ratio in ratios.items():
            print(f"{name:<12} {ratio:.2f}x")
        return
    if args.profile:
        print(profile(args.profile, tracing=args.tracing), end="")
        return
    result = measure(args.rounds, tracing=args.tracing, only=set(args.functions) or None)
    print(f"load average {result['load']:.2f}, median of {result['rounds']} rounds")
    print(f"floor        {result['floor_ms']:6.0f} ms         CPU {result['floor_cpu_ms']:6.0f} ms")
    for name, row in result["functions"].items():
        print(
            f"{name:<12} {row['median_ms']:6.0f} ms  {row['ratio']:.2f}x  "
            f"CPU {row['cpu_ms']:6.0f} ms  {row['cpu_ratio']:.2f}x  {row['request']}"
        )


if __name__ == "__main__":
    main()
