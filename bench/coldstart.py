"""Cold start, measured honestly: a fresh interpreter imports the handler AND serves its first real
request against the local runtime's AWS endpoint (moto behind real HTTP), compared, in the same run,
with the floor: a fresh interpreter that does `import boto3`, creates a DynamoDB client and makes one
GetItem. The floor is the least any Python Lambda that reads DynamoDB can do.

Each sample is the time inside the child from before its first import to the first response; the
interpreter's own start (identical for both) is left out. Samples are interleaved so machine load
hits both alike; the report is the median of `rounds` runs each and their ratio.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

FLOOR = """
import time, sys
t = time.perf_counter()
import boto3
c = boto3.session.Session().client("dynamodb")
c.get_item(TableName=sys.argv[1], Key={"token_id": {"S": "0000000000000000"}}, ConsistentRead=True)
print(time.perf_counter() - t)
"""

FIRST_REQUEST = """
import time, sys, json, importlib
t = time.perf_counter()
module = importlib.import_module(sys.argv[1])
event = json.loads(sys.argv[2])

class Context:
    function_name = "cold"; memory_limit_in_mb = 1024; aws_request_id = "r"
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:cold"
    log_group_name = "g"; log_stream_name = "s"
    def get_remaining_time_in_millis(self): return 29000

result = module.handler(event, Context())
elapsed = time.perf_counter() - t
ok = result.get("isAuthorized") if "isAuthorized" in result else result.get("statusCode", 500) < 300
assert ok, result
print(elapsed)
"""


def _event(route: str, path: str, principal: dict[str, str], params: dict[str, str] | None = None) -> dict[str, Any]:
    method, _ = route.split(" ", 1)
    return {
        "version": "2.0",
        "routeKey": route,
        "rawPath": path,
        "rawQueryString": "",
        "headers": {},
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
    tasks.create(caller, tasks.gate.create(caller, create))
    token, _ = TokenService(DynamoTokenStore(table=s.tokens_table, dynamodb=ddb), audit=lambda *_: None).mint(
        None, "bench", "admin", None
    )
    p = {"authority": "bench", "role": "admin", "worker": "", "agent": "", "token_id": ""}
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
        "a2a_api": {
            "module": "functions.a2a_api.handler",
            "event": {
                **_event("POST /", "/", p),
                "headers": {"a2a-version": "1.0", "content-type": "application/json"},
                "body": json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "cold-t"}}),
            },
            "request": "JSON-RPC GetTask",
        },
        "authorizer": {
            "module": "functions.authorizer.handler",
            "event": {"headers": {"authorization": f"Bearer {token}"}, "routeKey": "GET /v1/notes"},
            "request": "authorize a bearer token",
        },
    }


def _sample(code: str, args: list[str], env: dict[str, str]) -> float:
    out = subprocess.run(  # noqa: S603 - this interpreter, fixed code
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"cold-start probe failed: {out.stderr[-2000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def measure(rounds: int = 9, *, tracing: bool = False) -> dict[str, Any]:
    """Median first-request time per function and the floor, with tracing off (the shipped
    configuration: Lambda's active tracing still records each invocation) or on (Powertools Tracer
    with X-Ray subsegments for every AWS call)."""
    import logging

    from moto.server import ThreadedMotoServer

    from dovecote.platform import aws
    from dovecote.platform.settings import get_settings
    from infra.local.moto_patches import serialize_dynamodb
    from infra.local.resources import DEFAULT_NAMES, create_all

    serialize_dynamodb()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    import urllib.request

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
        env = create_all(dynamodb=aws.client("dynamodb"), s3=aws.client("s3"), secretsmanager=None, names=DEFAULT_NAMES)
        os.environ.update(env)
        get_settings.cache_clear()
        cases = _seed(env)
        child = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("POWERTOOLS_", "AWS_XRAY", "_X_AMZN"))},
            "POWERTOOLS_SERVICE_NAME": "cold",
            "POWERTOOLS_METRICS_NAMESPACE": "Dovecote",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
        }
        if tracing:
            # As in Lambda with active tracing: a sampled trace header and a daemon (a dead port).
            child.update(
                POWERTOOLS_TRACE_DISABLED="false",
                LAMBDA_TASK_ROOT=str(ROOT),
                AWS_LAMBDA_FUNCTION_NAME="cold",
                AWS_XRAY_DAEMON_ADDRESS="127.0.0.1:9",
                AWS_XRAY_CONTEXT_MISSING="IGNORE_ERROR",
                _X_AMZN_TRACE_ID="Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
            )
        else:
            child["POWERTOOLS_TRACE_DISABLED"] = "true"
        samples: dict[str, list[float]] = {"floor": [], **{name: [] for name in cases}}
        tokens_table = env["DOVECOTE_TOKENS_TABLE"]
        _sample(FLOOR, [tokens_table], child)  # warm the bytecode caches once
        for case in cases.values():
            _sample(FIRST_REQUEST, [case["module"], json.dumps(case["event"])], child)
        for _ in range(rounds):
            samples["floor"].append(_sample(FLOOR, [tokens_table], child))
            for name, case in cases.items():
                samples[name].append(_sample(FIRST_REQUEST, [case["module"], json.dumps(case["event"])], child))
    finally:
        os.environ.clear()
        os.environ.update(saved)
        aws.reset_clients()
        get_settings.cache_clear()
        server.stop()
    floor = statistics.median(samples["floor"])
    report: dict[str, Any] = {"floor_ms": floor * 1000, "rounds": rounds, "tracing": tracing, "functions": {}}
    for name, case in cases.items():
        median = statistics.median(samples[name])
        report["functions"][name] = {"request": case["request"], "median_ms": median * 1000, "ratio": median / floor}
    return report
