"""Lease dispatcher: a scheduled function (EventBridge every minute; `dovecote dev` every second)
that fences leases silent past their lease timeout and grants not accepted within their accept
timeout, so a crashed worker's task becomes claimable again with the next fence. The reference keeps no
wall-clock expiry in the store: this is the "dispatcher fences a disconnected worker explicitly" of
agent-tasks.txt, run serverlessly.

Each run reads the expiry index's EXPIRY_SHARDS partitions (one Query each, reading only overdue
leases: a grant is indexed at its accept deadline until accepted) and fences each with the ordinary
fence command, conditioned on the heartbeat it saw, or on the grant still being unaccepted: a late
heartbeat, accept or worker command wins cleanly, and the worker of a fenced lease gets
`stale_lease` on its next command. Command ids are an HMAC of (authority, task, fence) under the
service's cursor key: a retried run replays, and no one in an authority can take the id first.

Before that, each run keeps the claimable index under the deployment's shard count
(`TaskService.reshard_claimable`): one GetItem when the layout is current; after a deploy that
changed `claim_shards`, a scan of the claimable entries that moves the ones written under the old
count, resumed run after run until a whole pass moves nothing.
"""

from __future__ import annotations

import hashlib
import hmac
from functools import lru_cache
from typing import Any

from dovecote.platform import gc_pause
from dovecote.platform.observability import logger, metrics
from dovecote.tasks.limits import EXPIRY_SHARDS
from dovecote.tasks.model import Task

PAGE = 100


@lru_cache(maxsize=1)
def service() -> Any:
    from dovecote.tasks.wiring import task_service

    return task_service(sealed=False)


@lru_cache(maxsize=1)
def _key() -> bytes:
    from dovecote.platform import aws

    return hashlib.sha256(b"lease-dispatcher|" + aws.cursor_key()).digest()


def command_id(task: Task) -> str:
    material = f"{task.authority}|{task.id}|{task.fence}".encode()
    return "lease-expiry-" + hmac.new(_key(), material, hashlib.sha256).hexdigest()[:32]


def dispatch(tasks: Any, *, time_left_ms: Any = lambda: 10**9) -> dict[str, int]:
    totals = {"fenced": 0, "lost": 0}
    for shard in range(EXPIRY_SHARDS):
        while time_left_ms() > 5_000:
            result = tasks.expire_silent_leases(shard, limit=PAGE, command_id=command_id)
            for name, count in result.items():
                totals[name] += count
            # A short page is the end of the shard; a page of only lost races means the index has
            # not caught up with heartbeats yet: the next run will see it.
            if result["fenced"] + result["lost"] < PAGE or result["fenced"] == 0:
                break
    return totals


@gc_pause.resumes_gc
@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    from aws_lambda_powertools.metrics import MetricUnit

    tasks = service()
    layout = tasks.reshard_claimable(time_left_ms=context.get_remaining_time_in_millis)
    if layout["moved"] or not layout["done"]:
        logger.info("claimable index resharded", extra=layout)
    totals = dispatch(tasks, time_left_ms=context.get_remaining_time_in_millis)
    metrics.add_metric(name="LeasesFenced", unit=MetricUnit.Count, value=totals["fenced"])
    if totals["fenced"]:
        logger.info("silent leases fenced", extra=totals)
    return {**totals, "resharded": layout["moved"]}
