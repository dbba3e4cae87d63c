"""Cost per command: DynamoDB capacity from the real item sizes of each command's requests, plus API
Gateway, Lambda and S3 requests, priced per million commands.

Capacity is computed from what each command actually sends and receives (botocore events on the
client, against moto), with DynamoDB's published sizing rules:
- item size = the sum of attribute name lengths and value sizes (strings and binary by length,
  numbers about 1 byte per 2 digits + 1, lists and maps 3 bytes + their elements);
- a write consumes 1 WRU per 1 KB of item (rounded up per item), a strongly consistent read 1 RRU per
  4 KB (a Query rounds the total it read, an eventually consistent one costs half);
- transactions consume twice (TransactWriteItems 2 WRU per KB, TransactGetItems 2 RRU per 4 KB);
- a delete is priced on the size of the item it deletes.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

# Published on-demand prices, us-east-1 (AWS pricing pages; the figures in force since the
# November 2024 DynamoDB on-demand reduction, still listed in 2025). Prices change: re-check them.
PRICES = {
    "dynamodb_wru": 0.625 / 1e6,
    "dynamodb_rru": 0.125 / 1e6,
    "apigw_http_request": 1.00 / 1e6,
    "lambda_request": 0.20 / 1e6,
    "lambda_gb_second_arm64": 0.0000133334,
    "s3_put": 0.005 / 1000,
    "s3_get": 0.0004 / 1000,
    "stepfunctions_standard_transition": 0.025 / 1000,
}
PRICES_AS_OF = "us-east-1 on-demand list prices as published in 2025 (DynamoDB after the Nov 2024 cut)"


def _value_size(value: dict[str, Any]) -> int:
    ((kind, v),) = value.items()
    if kind == "S":
        return len(v.encode("utf-8"))
    if kind == "N":
        digits = len(str(v).lstrip("-").replace(".", "").lstrip("0")) or 1
        return (digits + 1) // 2 + 1
    if kind == "B":
        return len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + _value_size(x) for x in v)
    if kind == "M":
        return 3 + sum(len(k.encode()) + 1 + _value_size(x) for k, x in v.items())
    if kind in ("SS", "BS", "NS"):
        return sum(_value_size({kind[0]: x}) for x in v)
    raise ValueError(kind)


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode("utf-8")) + _value_size(value) for name, value in item.items())


def wru(size: int) -> int:
    return max(1, math.ceil(size / 1024))


def rru(size: int) -> int:
    return max(1, math.ceil(size / 4096))


@dataclass
class Meter:
    """Capacity units and S3 requests of the commands run while it is attached."""

    dynamodb: Any
    s3: Any
    wru: float = 0.0
    rru: float = 0.0
    s3_put: int = 0
    s3_get: int = 0
    items_written: list[int] = field(default_factory=list)

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        name = model.name
        if name == "PutItem":
            size = item_size(params["Item"])
            self.items_written.append(size)
            self.wru += wru(size)
        elif name == "TransactWriteItems":
            for entry in params["TransactItems"]:
                ((kind, op),) = entry.items()
                if kind == "Put":
                    size = item_size(op["Item"])
                    self.items_written.append(size)
                elif kind == "Delete":
                    size = self._stored_size(op["TableName"], op["Key"])
                else:  # Update / ConditionCheck: priced on the item as stored
                    size = self._stored_size(op["TableName"], op["Key"])
                self.wru += 2 * wru(size)
        elif name == "UpdateItem" or name == "DeleteItem":
            self.wru += wru(self._stored_size(params["TableName"], params["Key"]))

    def _after(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        name = model.name
        if name == "GetItem":
            size = item_size(parsed.get("Item") or {})
            factor = 1.0 if parsed.get("_consistent", True) else 0.5
            self.rru += factor * rru(size)
        elif name == "TransactGetItems":
            for response in parsed.get("Responses", []):
                self.rru += 2 * rru(item_size(response.get("Item") or {}))
        elif name in ("Query", "Scan"):
            total = sum(item_size(i) for i in parsed.get("Items", []))
            self.rru += rru(total)  # counted as consistent; a GSI query is half of this
        elif name == "BatchGetItem":
            for items in parsed.get("Responses", {}).values():
                self.rru += sum(rru(item_size(i)) for i in items)

    def _s3(self, model: Any, **_: Any) -> None:
        if model.name in ("PutObject", "CopyObject"):
            self.s3_put += 1
        elif model.name in ("GetObject", "HeadObject"):
            self.s3_get += 1

    def _stored_size(self, table: str, key: dict[str, Any]) -> int:
        # Read with a separate client so the measurement does not count itself.
        import boto3

        item = boto3.client("dynamodb").get_item(TableName=table, Key=key).get("Item")
        return item_size(item) if item else 1

    def __enter__(self) -> Meter:
        self.dynamodb.meta.events.register("before-parameter-build.dynamodb.*", self._before, unique_id="cost-b")
        self.dynamodb.meta.events.register("after-call.dynamodb.*", self._after, unique_id="cost-a")
        self.s3.meta.events.register("before-call.s3.*", self._s3, unique_id="cost-s3")
        return self

    def __exit__(self, *exc: object) -> None:
        self.dynamodb.meta.events.unregister("before-parameter-build.dynamodb.*", unique_id="cost-b")
        self.dynamodb.meta.events.unregister("after-call.dynamodb.*", unique_id="cost-a")
        self.s3.meta.events.unregister("before-call.s3.*", unique_id="cost-s3")


class _ShardFirst(random.Random):
    """A claim's shard order with `shard` first, the rest in order."""

    def __init__(self, shard: int) -> None:
        super().__init__(0)
        self.shard = shard

    def sample(self, population: Any, k: int, **_: Any) -> list[Any]:
        return [self.shard, *(s for s in population if s != self.shard)][:k]


def capacity_per_command() -> dict[str, dict[str, float]]:
    """WRU, RRU and S3 requests for the commands the README prices, on moto with real item sizes."""
    from bench.common import moto_resources
    from dovecote.notes.dynamo import DynamoNoteStore
    from dovecote.notes.service import NotesService, PutNote
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.principal import Principal
    from dovecote.tasks.dynamo import DynamoTaskStore
    from dovecote.tasks.service import TaskService
    from dovecote.tasks.storage import claim_shard
    from infra.local.resources import DEFAULT_NAMES

    out: dict[str, dict[str, float]] = {}
    caller, worker = Principal("bench", "caller"), Principal("bench", "worker", "w1")
    signer = CursorSigner(b"cost-key-0123456789abcdefghijklm")
    with moto_resources() as aws:
        ddb, s3 = aws.ddb, aws.s3
        notes = NotesService(
            DynamoNoteStore(table=DEFAULT_NAMES["notes_table"], bucket=DEFAULT_NAMES["bucket"], dynamodb=ddb, s3=s3),
            signer,
        )
        tasks = TaskService(
            DynamoTaskStore(table=DEFAULT_NAMES["tasks_table"], bucket=DEFAULT_NAMES["bucket"], dynamodb=ddb, s3=s3),
            signer,
        )

        def measure(label: str, fn: Any) -> Any:
            with Meter(ddb, s3) as meter:
                result = fn()
            out[label] = {
                "wru": meter.wru,
                "rru": meter.rru,
                "s3_put": meter.s3_put,
                "s3_get": meter.s3_get,
                "largest_item_bytes": max(meter.items_written, default=0),
            }
            return result

        body = "x" * 1024
        meta = measure(
            "note put (1 KiB inline)",
            lambda: notes.put(caller, PutNote(key="k", run=1, name="n", author="a", text=body)),
        )
        measure("note get", lambda: notes.get(caller, meta.ref))
        measure("note delete", lambda: notes.delete(caller, meta.ref))
        msg = {"id": "m1", "parts": [{"media_type": "text/plain", "text": "please summarise the design notes"}]}
        measure(
            "task create",
            lambda: tasks.create(
                caller,
                tasks.gate.create(
                    caller, {"command_id": "c1", "workspace": "w", "id": "t1", "context": "x", "message": msg}
                ),
            ),
        )
        # A claim from a backlog finds its task in one of the two shards it reads first; with this one
        # task, that takes fixing the shards' order (else the figure would depend on a random sweep).
        tasks.leases.rng = _ShardFirst(claim_shard("bench", "t1", tasks.store.claim_shards))
        assignment = measure(
            "task claim", lambda: tasks.claim(worker, tasks.gate.claim(worker, {"command_id": "c2"}))
        ).body["assignment"]
        fence = assignment["fence"]
        measure(
            "task accept",
            lambda: tasks.accept(
                worker, tasks.gate.accept(worker, "t1", {"command_id": "c3", "expected_revision": 1, "fence": fence})
            ),
        )
        done = {"id": "m2", "parts": [{"media_type": "text/plain", "text": "here is the summary " * 10}]}
        measure(
            "task complete",
            lambda: tasks.complete(
                worker,
                tasks.gate.complete(
                    worker,
                    "t1",
                    {
                        "command_id": "c4",
                        "expected_revision": 2,
                        "fence": fence,
                        "submission_id": "s1",
                        "message": done,
                    },
                ),
            ),
        )
    return out


def price_per_million(capacity: dict[str, float], *, memory_mb: int, duration_ms: float) -> dict[str, float]:
    """Dollars per million commands, by component."""
    lambda_gb_s = (memory_mb / 1024) * (duration_ms / 1000)
    parts = {
        "dynamodb": capacity["wru"] * PRICES["dynamodb_wru"] + capacity["rru"] * PRICES["dynamodb_rru"],
        "api_gateway": PRICES["apigw_http_request"],
        "lambda": PRICES["lambda_request"] + lambda_gb_s * PRICES["lambda_gb_second_arm64"],
        "s3": capacity["s3_put"] * PRICES["s3_put"] + capacity["s3_get"] * PRICES["s3_get"],
    }
    return {k: v * 1e6 for k, v in parts.items()} | {"total": sum(parts.values()) * 1e6}
