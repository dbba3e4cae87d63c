"""The lease dispatcher's cost per run: AWS requests and items read, with N open leases of which K are
overdue (moto, in process; requests counted through botocore events, items as the store returns them).

The expiry index is keyed by (shard, expiry time), so a run reads EXPIRY_SHARDS partitions from their
oldest expiry up to now: what it reads is the overdue leases, never the open ones. The figures show it:
the cost does not grow with N. `python -m bench.dispatcher [--quick]`.
"""

from __future__ import annotations

import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from dovecote.platform.schema import validated
from dovecote.tasks.bodies import CommandIn, CreateTaskIn

PER_MINUTE = 1  # EventBridge runs the dispatcher once a minute in the cloud


def measure(open_leases: int, overdue: int) -> dict[str, Any]:
    from bench.common import CURSOR_KEY, moto_resources
    from dovecote.platform.clock import rfc3339
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.principal import Principal
    from dovecote.tasks.dynamo import DynamoTaskStore
    from dovecote.tasks.limits import EXPIRY_SHARDS
    from dovecote.tasks.service import TaskService
    from infra.local.metering import count_round_trips
    from infra.local.moto_patches import serialize_dynamodb
    from infra.local.resources import DEFAULT_NAMES

    now = [datetime(2026, 3, 1, 12, 0, tzinfo=UTC)]
    caller, worker = Principal("bench", "caller"), Principal("bench", "worker", "w1")
    serialize_dynamodb()  # moto's own transactions copy the whole table each time
    with moto_resources() as aws:
        ddb, s3 = aws.ddb, aws.s3
        store = DynamoTaskStore(table=DEFAULT_NAMES["tasks_table"], bucket=DEFAULT_NAMES["bucket"], dynamodb=ddb, s3=s3)
        service = TaskService(store, CursorSigner(CURSOR_KEY), clock=lambda: now[0])
        for i in range(open_leases):
            # The first `overdue` leases time out after 60 s; the rest after an hour.
            timeout = 60 if i < overdue else 3600
            task_id = f"t{i}"
            create = {
                "command_id": f"c{i}",
                "workspace": "w",
                "id": task_id,
                "context": "c",
                "lease_timeout_seconds": timeout,
                # Never accepted here: no accept deadline, so only the lease timeouts above fall due.
                "accept_timeout_seconds": 0,
                "message": {"id": f"m{i}", "parts": [{"media_type": "text/plain", "text": "x"}]},
            }
            service.create(caller, service.gate.create(caller, validated(CreateTaskIn, create)))
            service.acquire(
                worker, service.gate.acquire(worker, task_id, validated(CommandIn, {"command_id": f"a{i}"}))
            )
        now[0] += timedelta(seconds=120)
        read = 0
        with count_round_trips(ddb, s3) as meter:
            for shard in range(EXPIRY_SHARDS):
                found = list(store.expired(shard, rfc3339(now[0]), 100))
                read += len(found)
        queries = meter.total
        fenced = 0
        with count_round_trips(ddb, s3) as meter:
            for shard in range(EXPIRY_SHARDS):
                out = service.expire_silent_leases(shard, limit=100, command_id=lambda t: f"x-{uuid.uuid4().hex}")
                fenced += out["fenced"]
    return {
        "open_leases": open_leases,
        "overdue": overdue,
        "queries": queries,
        "items_read": read,
        "fenced": fenced,
        "requests_per_run": meter.total,
        "requests_per_minute": meter.total * PER_MINUTE,
    }


def dispatcher_report(quick: bool = False) -> list[dict[str, Any]]:
    cases = [(100, 0), (1000, 0), (1000, 10)] if quick else [(1000, 0), (3000, 0), (3000, 30)]
    return [measure(n, k) for n, k in cases]


def print_report(rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("open leases", "overdue", "expiry queries", "items read", "fenced", "AWS requests per run")
    for r in rows:
        table.add_row(
            *(str(r[k]) for k in ("open_leases", "overdue", "queries", "items_read", "fenced")),
            str(r["requests_per_run"]),
        )
    Console().print(table)


if __name__ == "__main__":
    print_report(dispatcher_report("--quick" in sys.argv))
