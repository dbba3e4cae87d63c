"""The tasks table's layout v2 (tasks/dynamo_inline.py): a command's records inline in the task item
while it stays within the kilobytes its fields need, the oldest spilled to items of their own past
that, each message in its id's guard. Long tasks driven the same way on the fake and on DynamoDB
must read the same after every command (every page of every stream, every message by id, every
receipt replayed), with the task item within its allowance; then the round trips of the reads."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dovecote.platform.cursors import CursorSigner
from dovecote.platform.dynamo import item_bytes
from dovecote.platform.principal import Principal
from dovecote.tasks import dynamo_queries
from dovecote.tasks.dynamo import DynamoTaskStore
from dovecote.tasks.dynamo_inline import InlineMemory, allowance
from dovecote.tasks.dynamo_items import task_pk
from dovecote.tasks.memory import InMemoryTaskStore
from infra.local.metering import count_round_trips
from tests.support.tasks import CALLER, WORKER, Edge, dynamo_store, edge

KEY = b"task-layout-key-0123456789abcdefg"
OTHER = Principal("acme", "worker", "w2")


class Twin:
    """One script, two stores: every command sent to the fake and to DynamoDB alike (the same ids,
    the same clock), every answer compared."""

    def __init__(self, env: dict[str, Any], **store_options: Any) -> None:
        self.now = datetime(2026, 5, 1, tzinfo=UTC)
        clock = self.clock
        self.fake = edge(InMemoryTaskStore(), CursorSigner(KEY), clock=clock)
        self.dynamo = edge(dynamo_store(env, **store_options), CursorSigner(KEY), clock=clock)
        self.env = env
        self.sent: list[tuple[str, Principal, tuple[Any, ...], dict[str, Any]]] = []

    def clock(self) -> datetime:
        self.now += timedelta(milliseconds=7)
        return self.now

    def __call__(self, kind: str, who: Principal, *args: Any) -> dict[str, Any]:
        task_id = args[0]["id"] if kind == "create" else args[0]
        events_before = self._events(task_id) if kind != "create" else 0
        at = self.now
        expected = getattr(self.fake, kind)(who, *args)
        self.now = at  # the same instants on both
        got = getattr(self.dynamo, kind)(who, *args)
        # The write says how many events it appended (`ne`, what the stream tells webhooks), or none.
        appended = self._events(task_id) - events_before
        assert self.item(task_id).get("ne") == ({"N": str(appended)} if appended else None), kind
        if isinstance(got, dict):  # a heartbeat answers its lease, not an outcome
            assert got == expected, kind
            return got
        assert (got.status, got.body) == (expected.status, expected.body), kind
        self.sent.append((kind, who, args, got.body))
        return dict(got.body)

    def _events(self, task_id: str) -> int:
        return int(self.fake.get(CALLER, task_id)["task"]["event_count"])

    def same_reads(self, task_id: str, *, every_page: bool = False) -> None:
        """The task, each stream whole and from a few starts (`every_page`: from every start, at
        limits 1, 2 and the default), each message by id."""
        task = self.fake.get(CALLER, task_id)
        assert self.dynamo.get(CALLER, task_id) == task
        counts = task["task"]
        for read, count in (
            ("events", counts["event_count"]),
            ("messages", counts["message_count"]),
            ("grants", self.fence_of(task_id)),
        ):
            starts = range(count + 1) if every_page else sorted({0, count // 2, max(count - 2, 0), count})
            for after in starts:
                for limit in (1, 2, None) if every_page else (2, None):
                    want = getattr(self.fake, read)(CALLER, task_id, after, limit)
                    assert getattr(self.dynamo, read)(CALLER, task_id, after, limit) == want, (read, after, limit)
        for m in self.fake.messages(CALLER, task_id, None, None)["items"]:
            assert self.dynamo.message(CALLER, task_id, m["id"]) == {"message": m}

    def fence_of(self, task_id: str) -> int:
        grants = self.fake.grants(CALLER, task_id, None, None)["items"]
        return len(grants)

    def item(self, task_id: str) -> dict[str, Any]:
        key = {"pk": {"S": task_pk("acme", task_id)}, "sk": {"S": "T"}}
        return dict(self.env["dynamodb"].get_item(TableName=self.env["settings"].tasks_table, Key=key)["Item"])

    def within_allowance(self, task_id: str) -> int:
        """The task item is within the kilobytes its fields need (at least one): its size."""
        item = self.item(task_id)
        fields = {k: v for k, v in item.items() if k not in ("ev", "gr", "mi")}
        size = item_bytes(item)
        assert size <= allowance(item_bytes(fields)) or not ({"ev", "gr", "mi"} & set(item)), size
        return size

    def own_items(self, task_id: str) -> list[str]:
        """The sort keys of the task's records that have an item of their own."""
        out = self.env["dynamodb"].query(
            TableName=self.env["settings"].tasks_table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": task_pk("acme", task_id)}},
            ConsistentRead=True,
        )["Items"]
        return [i["sk"]["S"] for i in out if i["sk"]["S"] != "T"]


def text(words: str, message_id: str) -> dict[str, Any]:
    return {"id": message_id, "parts": [{"media_type": "text/plain", "text": words}]}


def conversation(twin: Twin, task_id: str, rounds: int, rng: random.Random, *, check: bool = True) -> None:
    """A task through `rounds` input rounds with leases taken, released and taken again on the way,
    heartbeats, then completed; the reads compared after each round (`check`) and every page of
    them at the end."""
    n, tag = iter(range(1, 10_000)), task_id[:24]  # command and message ids: `tag` and a number
    create = {"command_id": f"{tag}-c0", "workspace": "ws", "id": task_id, "context": "ctx"}
    twin("create", CALLER, {**create, "message": text("do it " * rng.randint(1, 30), f"{tag}-m0")})
    revision, worker = 1, WORKER
    fence = twin("acquire", worker, task_id, {"command_id": f"{tag}-c{next(n)}"})["assignment"]["fence"]
    twin("accept", worker, task_id, {"command_id": f"{tag}-c{next(n)}", "expected_revision": 1, "fence": fence})
    revision = 2
    for r in range(rounds):
        if rng.random() < 0.3:  # the lease changes hands: a grant with the generation before it
            twin("fence", worker, task_id, {"command_id": f"{tag}-c{next(n)}", "fence": fence})
            worker = OTHER if worker is WORKER else WORKER
            body = {"command_id": f"{tag}-c{next(n)}"}
            fence = twin("acquire", worker, task_id, body)["assignment"]["fence"]
        if rng.random() < 0.5:
            twin("heartbeat", worker, task_id, {"fence": fence})
        words = "which one? " * rng.randint(1, 40)
        ask = {"command_id": f"{tag}-c{next(n)}", "expected_revision": revision, "fence": fence}
        twin("request_input", worker, task_id, {**ask, "message": text(words, f"{tag}-a{r}")})
        reply = {"command_id": f"{tag}-c{next(n)}", "expected_revision": revision + 1}
        twin("reply", CALLER, task_id, {**reply, "message": text("that one " * rng.randint(1, 40), f"{tag}-r{r}")})
        revision += 2
        twin.within_allowance(task_id)
        if check:
            twin.same_reads(task_id)
    done = {"command_id": f"{tag}-c{next(n)}", "expected_revision": revision, "fence": fence, "submission_id": "s"}
    twin("complete", worker, task_id, {**done, "message": text("done", f"{tag}-done")})
    twin.within_allowance(task_id)
    twin.same_reads(task_id, every_page=True)


def test_a_short_task_keeps_its_records_in_its_item(moto_env: dict[str, Any]) -> None:
    twin = Twin(moto_env)
    conversation(twin, "short", rounds=0, rng=random.Random(1))  # create, acquire, accept, complete
    assert twin.own_items("short") == []  # everything inline: no record has an item of its own
    item = twin.item("short")
    assert len(item["ev"]["L"]) == 3 and len(item["mi"]["L"]) == 2 and len(item["gr"]["L"]) == 1
    assert "rv" in item and "revision" not in item


def test_records_that_outgrow_the_item_leave_it_together(moto_env: dict[str, Any]) -> None:
    # An input round more: at the complete, the events (the kind taking the most bytes inline)
    # leave the task item together, for one item keyed by the last of them.
    twin = Twin(moto_env)
    conversation(twin, "round", rounds=1, rng=random.Random(1))
    assert twin.own_items("round") == ["E#00000000000000000005"]
    assert "ev" not in twin.item("round") and len(twin.item("round")["mi"]["L"]) == 4


@pytest.mark.parametrize(("seed", "check"), [(3, True), (11, False)])
def test_a_long_task_spills_its_oldest_records_and_reads_the_same(
    moto_env: dict[str, Any], seed: int, check: bool
) -> None:
    twin = Twin(moto_env)
    conversation(twin, f"long-{seed}", rounds=9, rng=random.Random(seed), check=check)
    own = twin.own_items(f"long-{seed}")
    assert any(k.startswith("E#") for k in own) and any(k.startswith("M#") for k in own)  # v1's keys
    # Every command replays its answer, the first ones after many more (their records long spilled).
    for kind, who, args, body in twin.sent:
        if kind != "heartbeat":
            again = getattr(twin.dynamo, kind)(who, *args)
            assert (again.body, again.replayed) == (body, True), kind


def test_long_ids_give_the_item_more_kilobytes_never_fewer_records(moto_env: dict[str, Any]) -> None:
    twin = Twin(moto_env)
    task_id = "t" * 128  # the longest id: the task item's own fields pass a kilobyte
    conversation(twin, task_id, rounds=2, rng=random.Random(5))
    fields = {k: v for k, v in twin.item(task_id).items() if k not in ("ev", "gr", "mi")}
    assert item_bytes(fields) > 1024 and twin.within_allowance(task_id) <= allowance(item_bytes(fields))


def test_a_commit_whose_read_is_forgotten_reads_the_task_item_again(moto_env: dict[str, Any]) -> None:
    """Nothing remembered (a capacity of 0): each commit reads its task item once more, and the
    records it rewrites are still all there."""
    twin = Twin(moto_env)
    store: Any = twin.dynamo.store
    store.inline = InlineMemory(capacity=0)
    conversation(twin, "forgetful", rounds=2, rng=random.Random(7), check=False)
    create = {"command_id": "f2-c0", "workspace": "ws", "id": "f2", "context": "ctx", "message": text("x", "f2-m0")}
    twin("create", CALLER, create)
    fence = twin("acquire", WORKER, "f2", {"command_id": "f2-c1"})["assignment"]["fence"]
    with count_round_trips(moto_env["dynamodb"]) as meter:
        twin.dynamo.accept(WORKER, "f2", {"command_id": "f2-c2", "expected_revision": 1, "fence": fence})
    # The command's read, the task item read again (nothing remembered), the transaction.
    assert meter.calls == {"dynamodb.TransactGetItems": 1, "dynamodb.GetItem": 1, "dynamodb.TransactWriteItems": 1}
    assert twin.dynamo.get(CALLER, "f2")["task"]["state"] == "working"
    assert [e["type"] for e in twin.dynamo.events(CALLER, "f2", None, None)["items"]] == [
        "task_submitted",
        "task_accepted",
    ]


def test_a_message_page_stops_at_its_byte_budget_and_goes_on(
    moto_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    twin = Twin(moto_env)
    conversation(twin, "paged", rounds=2, rng=random.Random(9), check=False)
    whole = twin.fake.messages(CALLER, "paged", None, None)["items"]
    guard = int(twin.item("paged")["mi"]["L"][-1]["M"]["z"]["N"])
    monkeypatch.setattr(dynamo_queries, "MESSAGE_READ_BYTES", guard + 1)  # about one guard a page
    got, after = [], 0
    while True:
        page = twin.dynamo.messages(CALLER, "paged", after, None)
        got += page["items"]
        assert page["items"], "a page always holds at least one message"
        if not page["has_more"]:
            break
        after = page["next"]
    assert got == whole and len(got) == 6


def test_round_trips_of_the_reads(moto_env: dict[str, Any]) -> None:
    twin = Twin(moto_env)
    conversation(twin, "rt", rounds=0, rng=random.Random(2))  # everything inline
    service: Edge = twin.dynamo
    ddb = moto_env["dynamodb"]
    calls = {
        "events": lambda: service.events(CALLER, "rt", None, None),
        "messages": lambda: service.messages(CALLER, "rt", None, None),
        "message": lambda: service.message(CALLER, "rt", "rt-m0"),
        "grants": lambda: service.grants(CALLER, "rt", None, None),
        "get": lambda: service.get(CALLER, "rt"),
    }
    counted = {}
    for name, call in calls.items():
        with count_round_trips(ddb) as meter:
            call()
        counted[name] = meter.calls
    # A stream page: the task's read, whose inline tail the store pages from (no second read).
    assert counted["events"] == {"dynamodb.GetItem": 1}
    assert counted["grants"] == {"dynamodb.GetItem": 1}
    # Messages: the same, then their guards in one BatchGetItem.
    assert counted["messages"] == {"dynamodb.GetItem": 1, "dynamodb.BatchGetItem": 1}
    assert counted["message"] == {"dynamodb.GetItem": 1}  # its guard holds it (v1: two)
    assert counted["get"] == {"dynamodb.GetItem": 1}


def test_a_stream_page_past_the_inline_tail_reads_the_items_of_their_own(moto_env: dict[str, Any]) -> None:
    twin = Twin(moto_env)
    conversation(twin, "deep", rounds=8, rng=random.Random(4), check=False)
    with count_round_trips(moto_env["dynamodb"]) as meter:
        twin.dynamo.events(CALLER, "deep", 0, 3)
    assert meter.calls == {"dynamodb.GetItem": 1, "dynamodb.Query": 1}
    store: DynamoTaskStore = twin.dynamo.store  # type: ignore[assignment]
    with count_round_trips(moto_env["dynamodb"]) as meter:
        store.events("acme", "deep", 0, 3)
    assert meter.calls == {"dynamodb.GetItem": 1, "dynamodb.Query": 1}


def test_a_failure_reason_of_2_kib_reads_back_whether_inline_or_not(moto_env: dict[str, Any]) -> None:
    # The largest event: its reason alone passes what the task item has room for, so the events
    # leave the item with it; a short one stays inline.
    twin = Twin(moto_env)
    for task_id, reason in (("failed-long", "r" * 2048), ("failed-short", "out of disk")):
        create = {"command_id": f"{task_id}-c0", "workspace": "ws", "id": task_id, "context": "ctx"}
        twin("create", CALLER, {**create, "message": text("x", f"{task_id}-m0")})
        fence = twin("acquire", WORKER, task_id, {"command_id": f"{task_id}-c1"})["assignment"]["fence"]
        twin("accept", WORKER, task_id, {"command_id": f"{task_id}-c2", "expected_revision": 1, "fence": fence})
        body = {"command_id": f"{task_id}-c3", "expected_revision": 2, "fence": fence, "reason": reason}
        twin("fail", WORKER, task_id, body)
        twin.same_reads(task_id, every_page=True)
        assert twin.dynamo.events(CALLER, task_id, 2, None)["items"][0]["reason"] == reason
        twin.within_allowance(task_id)
    assert twin.own_items("failed-long") == ["E#00000000000000000003"]
    assert twin.own_items("failed-short") == []


def test_a_stream_page_whose_read_is_forgotten_reads_the_task_item_again(moto_env: dict[str, Any]) -> None:
    # The store pages from the service's read only while it remembers that version's records.
    twin = Twin(moto_env)
    conversation(twin, "gone", rounds=0, rng=random.Random(6))  # everything inline
    store: DynamoTaskStore = twin.dynamo.store  # type: ignore[assignment]
    remembered = twin.dynamo.events(CALLER, "gone", None, None)
    store.inline = InlineMemory(capacity=0)
    with count_round_trips(moto_env["dynamodb"]) as meter:
        forgotten = twin.dynamo.events(CALLER, "gone", None, None)
    assert meter.calls == {"dynamodb.GetItem": 2}
    assert forgotten == remembered == twin.fake.events(CALLER, "gone", None, None)


class StaleReplica:
    """A read replica behind the leader, at botocore level: an eventually consistent GetItem or
    BatchGetItem answers as if the item were not written yet; a strongly consistent one goes on."""

    def __init__(self) -> None:
        self.stale = 0

    def __call__(self, model: Any, params: dict[str, Any], **_: Any) -> Any:
        sent = _sent(params)
        if model.name == "GetItem" and not sent.get("ConsistentRead"):
            self.stale += 1
            return _http_200(), {}
        if model.name == "BatchGetItem" and not any(t.get("ConsistentRead") for t in sent["RequestItems"].values()):
            self.stale += 1
            return _http_200(), {"Responses": {table: [] for table in sent["RequestItems"]}, "UnprocessedKeys": {}}
        return None


def _sent(request: dict[str, Any]) -> dict[str, Any]:
    """The API parameters of a request as botocore is about to send it (DynamoDB's JSON body)."""
    return json.loads(request["body"] or b"{}")


def _http_200() -> Any:
    from botocore.awsrequest import AWSResponse

    return AWSResponse("https://dynamodb", 200, {}, None)


def test_guards_read_from_a_replica_behind_are_read_again_strongly(moto_env: dict[str, Any]) -> None:
    # A message's guard is read eventually consistent (half the price): a replica that has not
    # seen it yet costs a second, strong read, never a short page or a missing message.
    twin = Twin(moto_env)
    conversation(twin, "lag", rounds=2, rng=random.Random(8))
    ddb = moto_env["dynamodb"]
    whole = twin.fake.messages(CALLER, "lag", None, None)
    first = whole["items"][0]["id"]
    replica = StaleReplica()
    ddb.meta.events.register_first("before-call.dynamodb.*", replica, unique_id="stale-replica")
    try:
        with count_round_trips(ddb) as meter:
            page = twin.dynamo.messages(CALLER, "lag", None, None)
            one = twin.dynamo.message(CALLER, "lag", first)
    finally:
        ddb.meta.events.unregister("before-call.dynamodb.*", unique_id="stale-replica")
    assert page == whole and one == twin.fake.message(CALLER, "lag", first)
    # Two reads answered by the replica (the guards' BatchGetItem, the message's GetItem), then
    # what reached the leader: the task's read and the two strong reads again.
    assert replica.stale == 2
    assert meter.calls == {"dynamodb.GetItem": 2, "dynamodb.BatchGetItem": 1}


def test_guards_are_read_eventually_consistent_first(moto_env: dict[str, Any]) -> None:
    twin = Twin(moto_env)
    conversation(twin, "ec", rounds=1, rng=random.Random(9))
    ddb = moto_env["dynamodb"]
    seen: list[tuple[str, bool]] = []

    def note(model: Any, params: dict[str, Any], **_: Any) -> None:
        sent = _sent(params)
        if model.name == "GetItem":
            seen.append((model.name, bool(sent.get("ConsistentRead"))))
        elif model.name == "BatchGetItem":
            seen.extend((model.name, bool(t.get("ConsistentRead"))) for t in sent["RequestItems"].values())

    ddb.meta.events.register("before-call.dynamodb.*", note, unique_id="note-consistency")
    try:
        first = twin.dynamo.messages(CALLER, "ec", None, None)["items"][0]["id"]
        twin.dynamo.message(CALLER, "ec", first)
    finally:
        ddb.meta.events.unregister("before-call.dynamodb.*", unique_id="note-consistency")
    # The task item strongly (a caller reads its own writes), the guards eventually consistent.
    assert seen == [("GetItem", True), ("BatchGetItem", False), ("GetItem", False)]
