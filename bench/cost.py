"""Cost per command: DynamoDB capacity from the real item sizes of each command's requests, plus API
Gateway, Lambda and S3 requests, priced per million commands, on-demand and provisioned.

Capacity is computed from what each command actually sends and receives (botocore events on the
client, against moto), with DynamoDB's published sizing rules:
- item size = the sum of attribute name lengths and value sizes (strings and binary by length,
  numbers about 1 byte per 2 digits + 1, lists and maps 3 bytes + their elements);
- a write consumes 1 WRU per 1 KB of item (rounded up per item), a strongly consistent read 1 RRU per
  4 KB (a Query rounds the total it read, an eventually consistent one costs half);
- transactions consume twice (TransactWriteItems 2 WRU per KB, TransactGetItems 2 RRU per 4 KB);
- a delete is priced on the size of the item it deletes.
Index writes are counted apart (`index_wru`): each global secondary index an item enters, stays in
(changed) or leaves costs a write of its projected size (every index here projects the whole item),
two when its index key changed (a delete and a put), at 1 WRU per KB: DynamoDB does not double them
for a transaction (an assumption: its documentation prices the table's items of a transaction).

Provisioned capacity is priced per unit consumed at a stated utilisation: a WCU-hour provisioned at
UTILISATION serves 3,600 × UTILISATION writes of 1 KB (auto scaling's default target is 70 %).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from dovecote.platform.schema import validated
from dovecote.tasks.bodies import ClaimIn, CompleteIn, CreateTaskIn, WorkerCommandIn

# Published on-demand prices, us-east-1 (AWS pricing pages; the figures in force since the
# November 2024 DynamoDB on-demand reduction, still listed in 2025). Prices change: re-check them.
PRICES = {
    "dynamodb_wru": 0.625 / 1e6,
    "dynamodb_rru": 0.125 / 1e6,
    "dynamodb_wcu_hour": 0.00065,
    "dynamodb_rcu_hour": 0.00013,
    "apigw_http_request": 1.00 / 1e6,
    "lambda_request": 0.20 / 1e6,
    "lambda_gb_second_arm64": 0.0000133334,
    "s3_put": 0.005 / 1000,
    "s3_get": 0.0004 / 1000,
    "stepfunctions_standard_transition": 0.025 / 1000,
}
PRICES_AS_OF = (
    "us-east-1 list prices as published in 2025: on-demand (DynamoDB after the Nov 2024 cut) and "
    "provisioned ($0.00065 per WCU-hour, $0.00013 per RCU-hour)"
)
# Provisioned capacity's utilisation: the share of the provisioned units a workload consumes on
# average (auto scaling's default target tracking value).
UTILISATION = 0.70


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
    index_wru: float = 0.0
    s3_put: int = 0
    s3_get: int = 0
    items_written: list[int] = field(default_factory=list)
    # Each TransactWriteItems as (what the item is, its size, the bytes of its attribute names past
    # 2 characters each): the cost levers below fold them.
    transactions: list[list[tuple[str, int, int]]] = field(default_factory=list)
    _schemas: dict[str, tuple[tuple[str, ...], list[tuple[str, ...]]]] = field(default_factory=dict)
    _consistent: bool = True  # the last read's ConsistentRead (the meter counts one thread's calls)

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        name = model.name
        if name in ("GetItem", "Query", "Scan"):
            # An eventually consistent read costs half: the answer does not say which it was.
            self._consistent = bool(params.get("ConsistentRead"))
        elif name == "BatchGetItem":
            self._consistent = any(t.get("ConsistentRead") for t in params["RequestItems"].values())
        elif name == "PutItem":
            size = item_size(params["Item"])
            self.items_written.append(size)
            self.wru += wru(size)
            self.index_wru += self._index_writes(params["TableName"], params["Item"])
        elif name == "TransactWriteItems":
            written: list[tuple[str, int, int]] = []
            for entry in params["TransactItems"]:
                ((kind, op),) = entry.items()
                if kind == "Put":
                    size = item_size(op["Item"])
                    self.items_written.append(size)
                    self.index_wru += self._index_writes(op["TableName"], op["Item"])
                else:  # Delete / Update / ConditionCheck: priced on the item as stored
                    size = self._stored_size(op["TableName"], op["Key"])
                self.wru += 2 * wru(size)
                item = op.get("Item") or op["Key"]
                # The bytes its attribute names take beyond 2 characters each (the `attr_name` lever).
                names = sum(max(0, len(name.encode()) - 2) for name in (item if kind == "Put" else {}))
                written.append((item_role(item), size, names))
            self.transactions.append(written)
        elif name == "UpdateItem" or name == "DeleteItem":
            self.wru += wru(self._stored_size(params["TableName"], params["Key"]))

    def _after(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        name = model.name
        if name == "GetItem":
            size = item_size(parsed.get("Item") or {})
            self.rru += self._read_factor() * rru(size)
        elif name == "TransactGetItems":
            for response in parsed.get("Responses", []):
                self.rru += 2 * rru(item_size(response.get("Item") or {}))
        elif name in ("Query", "Scan"):
            total = sum(item_size(i) for i in parsed.get("Items", []))
            self.rru += self._read_factor() * rru(total)
        elif name == "BatchGetItem":
            for items in parsed.get("Responses", {}).values():
                self.rru += self._read_factor() * sum(rru(item_size(i)) for i in items)

    def _read_factor(self) -> float:
        return 1.0 if self._consistent else 0.5

    def _s3(self, model: Any, **_: Any) -> None:
        if model.name in ("PutObject", "CopyObject"):
            self.s3_put += 1
        elif model.name in ("GetObject", "HeadObject"):
            self.s3_get += 1

    def _stored(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        # Read with a separate client so the measurement does not count itself.
        import boto3

        item = boto3.client("dynamodb").get_item(TableName=table, Key=key).get("Item")
        return dict(item) if item else None

    def _stored_size(self, table: str, key: dict[str, Any]) -> int:
        item = self._stored(table, key)
        return item_size(item) if item else 1

    def _schema(self, table: str) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
        """The table's key attributes, and those of each of its global secondary indexes."""
        if table not in self._schemas:
            import boto3

            described = boto3.client("dynamodb").describe_table(TableName=table)["Table"]
            self._schemas[table] = (
                tuple(k["AttributeName"] for k in described["KeySchema"]),
                [
                    tuple(k["AttributeName"] for k in i["KeySchema"])
                    for i in described.get("GlobalSecondaryIndexes", [])
                ],
            )
        return self._schemas[table]

    def _index_writes(self, table: str, new: dict[str, Any]) -> float:
        """The WRU the table's indexes take for this put (see the module docstring)."""
        key, indexes = self._schema(table)
        if not indexes:
            return 0.0
        old = self._stored(table, {k: new[k] for k in key})
        units = 0.0
        for keys in indexes:
            was = old is not None and all(k in old for k in keys)
            now = all(k in new for k in keys)
            if old is not None and was and now and all(old[k] == new[k] for k in keys):
                units += wru(item_size(new))  # stays, changed: one write
                continue
            if old is not None and was:
                units += wru(item_size(old))  # leaves, or its key moved: a delete
            if now:
                units += wru(item_size(new))
        return units

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


def item_role(item: dict[str, Any]) -> str:
    """What a task-table item is, from its key: the task, a receipt, an event, a message, or one of
    the uniqueness guards (a message id, a submission id)."""
    pk, sk = item.get("pk", {}).get("S", ""), item.get("sk", {}).get("S", "")
    if pk.startswith("C#"):
        return "receipt"
    if pk.startswith(("MID#", "S#")):
        return "guard"
    if pk.startswith("T#"):
        # A grant ("G#", the lease history) is the claim's event.
        return {"T": "task", "E": "event", "G": "event", "M": "message"}.get(sk[:1], "other")
    return "other"


# What folding more of a command's transaction into its task item would save, computed from the items
# the commands really write (a transaction costs 2 WRU per item per started KB, however small the
# item). The layout built (issue [24/24], tasks/dynamo_inline.py) already folds the events, grants
# and message places; what is left to fold is a guarantee each: the receipt is keyed by the command
# id because command ids are one namespace per authority, and the id guards (a message's holds the
# message) because message and submission ids are unique across the authority.
EVERYTHING = frozenset({"receipt", "event", "message", "guard"})
LEVERS: dict[str, tuple[frozenset[str], bool]] = {
    "as built": (frozenset(), False),
    "2-character attribute names": (frozenset(), True),
    "receipt in the task item (command ids per task)": (frozenset({"receipt"}), False),
    "id guards in the task item (message, submission ids per task)": (frozenset({"guard"}), False),
    "everything in the task item, 2-character names": (EVERYTHING, True),
}


def folded_wru(transactions: list[list[tuple[str, int, int]]], folded: frozenset[str], short_names: bool) -> float:
    """The WRU of these transactions if the items whose role is in `folded` lived in the task item,
    and (`short_names`) every attribute name were 2 characters (PynamoDB's `attr_name`)."""
    total = 0.0
    for items in transactions:
        sizes = [(role, size - names if short_names else size) for role, size, names in items]
        task = sum(size for role, size in sizes if role == "task" or role in folded)
        kept = [size for role, size in sizes if role != "task" and role not in folded]
        total += sum(2 * wru(size) for size in kept + ([task] if task else []))
    return total


def capacity_per_command() -> dict[str, dict[str, Any]]:
    """WRU, RRU and S3 requests for the commands the manual prices, on moto with real item sizes."""
    from bench.common import moto_resources
    from dovecote.notes.dynamo import DynamoNoteStore
    from dovecote.notes.service import NotesService, PutNote
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.principal import Principal
    from dovecote.tasks.dynamo import DynamoTaskStore
    from dovecote.tasks.service import TaskService
    from dovecote.tasks.storage import claim_shard
    from infra.local.resources import DEFAULT_NAMES

    out: dict[str, dict[str, Any]] = {}
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
                "index_wru": meter.index_wru,
                "s3_put": meter.s3_put,
                "s3_get": meter.s3_get,
                "largest_item_bytes": max(meter.items_written, default=0),
                "transactions": meter.transactions,
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
                    caller,
                    validated(
                        CreateTaskIn, {"command_id": "c1", "workspace": "w", "id": "t1", "context": "x", "message": msg}
                    ),
                ),
            ),
        )
        # A claim from a backlog finds its task in one of the two shards it reads first; with this one
        # task, that takes fixing the shards' order (else the figure would depend on a random sweep).
        tasks.leases.rng = _ShardFirst(claim_shard("bench", "t1", tasks.store.claim_shards))
        assignment = measure(
            "task claim",
            lambda: tasks.claim(worker, tasks.gate.claim(worker, validated(ClaimIn, {"command_id": "c2"}))),
        ).answer
        fence = assignment.fence
        measure(
            "task accept",
            lambda: tasks.accept(
                worker,
                tasks.gate.accept(
                    worker,
                    "t1",
                    validated(WorkerCommandIn, {"command_id": "c3", "expected_revision": 1, "fence": fence}),
                ),
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
                    validated(
                        CompleteIn,
                        {
                            "command_id": "c4",
                            "expected_revision": 2,
                            "fence": fence,
                            "submission_id": "s1",
                            "message": done,
                        },
                    ),
                ),
            ),
        )
        # The reads, and an exact retry (what the idempotent replay costs).
        measure("task get", lambda: tasks.get(caller, "t1"))
        measure("task events page", lambda: tasks.events(caller, "t1", None, None))
        measure("task messages page", lambda: tasks.messages(caller, "t1", None, None))
        measure("task message by id", lambda: tasks.message(caller, "t1", "m2"))
        accept = {"command_id": "c3", "expected_revision": 1, "fence": fence}
        again = validated(WorkerCommandIn, accept)
        measure("task accept, exact retry", lambda: tasks.accept(worker, tasks.gate.accept(worker, "t1", again)))
    return out


def price_per_million(
    capacity: dict[str, float], *, memory_mb: int, duration_ms: float, provisioned: bool = False
) -> dict[str, float]:
    """Dollars per million commands, by component: DynamoDB's table capacity on-demand or (with
    `provisioned`) provisioned at UTILISATION, its index writes apart, API Gateway, Lambda (arm64,
    its duration billed per started millisecond), S3 requests. `total` is what the goals are stated
    in (the table's capacity, not its index writes); `total_with_indexes` adds them."""
    if provisioned:
        wru = PRICES["dynamodb_wcu_hour"] / (3600 * UTILISATION)
        rru = PRICES["dynamodb_rcu_hour"] / (3600 * UTILISATION)
    else:
        wru, rru = PRICES["dynamodb_wru"], PRICES["dynamodb_rru"]
    lambda_gb_s = (memory_mb / 1024) * (math.ceil(duration_ms) / 1000)
    parts = {
        "dynamodb": capacity["wru"] * wru + capacity["rru"] * rru,
        "api_gateway": PRICES["apigw_http_request"],
        "lambda": PRICES["lambda_request"] + lambda_gb_s * PRICES["lambda_gb_second_arm64"],
        "s3": capacity["s3_put"] * PRICES["s3_put"] + capacity["s3_get"] * PRICES["s3_get"],
    }
    indexes = capacity.get("index_wru", 0.0) * wru
    out = {k: v * 1e6 for k, v in parts.items()} | {"total": sum(parts.values()) * 1e6}
    return out | {"dynamodb_indexes": indexes * 1e6, "total_with_indexes": (sum(parts.values()) + indexes) * 1e6}
