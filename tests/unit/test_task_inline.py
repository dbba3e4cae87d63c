"""The task item's inline records (tasks/dynamo_inline.py): DynamoDB's item sizes, the allowance, which
records leave the item and when, and the memory of what a read saw."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from bench.cost import item_size
from dovecote.platform.dynamo import item_bytes, value_bytes
from dovecote.tasks.dynamo_inline import Inline, InlineMemory, MessageRef, allowance, fit, inline_of
from dovecote.tasks.dynamo_items import TaskItems
from dovecote.tasks.model import Event, Grant, LeaseEnd, Task


@pytest.fixture
def items() -> TaskItems:
    client = boto3.client("dynamodb", region_name="us-east-1")  # no request is sent
    return TaskItems(table="tasks", bucket="bucket", dynamodb=client, s3=None)


def task(task_id: str = "t1", **changes: Any) -> Task:
    at = "2026-05-01T00:00:00.000Z"
    return Task("acme", task_id, "ws", "ctx", "working", 3, 1, 3, at, at, owner="w1", fence=1, **changes)


def event(n: int) -> Event:
    return Event("t1", n, "input_required", "input_required", n, "2026-05-01T00:00:01.000Z", message=f"m{n}")


def test_item_sizes_follow_dynamodb_s_rules() -> None:
    # Names and strings by UTF-8 length; numbers 1 byte per 2 significant digits + 1 (zeros at either
    # end do not count); lists and maps 3 bytes + 1 per element; binary by length.
    assert value_bytes({"S": "héllo"}) == 6
    assert value_bytes({"N": "12345"}) == 4 and value_bytes({"N": "1200000"}) == 2 and value_bytes({"N": "0"}) == 2
    assert value_bytes({"B": b"\x00" * 10}) == 10
    assert value_bytes({"L": [{"S": "ab"}, {"N": "1"}]}) == 3 + (1 + 2) + (1 + 2)
    assert value_bytes({"M": {"k": {"S": "v"}}}) == 3 + 1 + 1 + 1
    item = {"pk": {"S": "T#acme#t1"}, "sk": {"S": "T"}, "rv": {"N": "3"}, "ev": {"L": [{"M": {"q": {"N": "1"}}}]}}
    assert item_bytes(item) == item_size(item)  # the bench's own count of the same rule agrees


def test_the_allowance_is_the_kilobytes_the_fields_need_at_least_one() -> None:
    assert [allowance(n) for n in (0, 300, 1024, 1025, 2048, 2049)] == [1024, 1024, 1024, 2048, 2048, 3072]


def test_records_stay_inline_while_the_item_is_within_its_allowance(items: TaskItems) -> None:
    t = task()
    inline = Inline(
        (event(1), event(2)), (Grant("t1", "w1", 1, "2026-05-01T00:00:00.000Z"),), (MessageRef(1, "m1", 200),)
    )
    item, spilled = fit(lambda kept: items.task_item(t, kept), inline)
    assert not spilled and inline_of(item) == inline
    assert item_bytes(item.serialize()) <= 1024


def test_past_its_allowance_the_kind_taking_most_bytes_leaves_whole(items: TaskItems) -> None:
    t = task()
    events = tuple(event(n) for n in range(1, 12))
    grants = (Grant("t1", "w1", 1, "2026-05-01T00:00:00.000Z"),)
    refs = (MessageRef(1, "m1", 200), MessageRef(2, "m2", 300))
    inline = Inline(events, grants, refs)
    raw = items.task_item(t, inline).serialize()
    assert value_bytes(raw["ev"]) > value_bytes(raw["gr"]) + value_bytes(raw["mi"])
    item, spilled = fit(lambda kept: items.task_item(t, kept), inline)
    assert spilled == Inline(events=events)  # one item of its own for all of them
    assert inline_of(item) == Inline((), grants, refs)
    assert item_bytes(item.serialize()) <= 1024


def test_fields_past_a_kilobyte_give_the_item_their_kilobytes(items: TaskItems) -> None:
    long = "x" * 128
    end = LeaseEnd(1, "w" * 128, "a" * 24, "b" * 24, "c" * 24, "d" * 24, "released", "w" * 128)
    t = task(long, last_end=end)
    fields = item_bytes(items.task_item(t).serialize())
    assert 1024 < fields <= 2048
    inline = Inline(tuple(event(n) for n in range(1, 4)))
    item, spilled = fit(lambda kept: items.task_item(t, kept), inline)
    assert not spilled and item_bytes(item.serialize()) <= 2048  # within the two KB it takes anyway


def test_with_nothing_left_to_spill_the_item_is_its_fields(items: TaskItems) -> None:
    # A record larger than any room: it leaves; the item is its fields alone.
    previous = LeaseEnd(1, "w" * 128, "a" * 24, "b" * 24, "c" * 24, "d" * 24, "released", "w" * 128)
    big = tuple(Grant("t1", "w" * 128, n, "2026-05-01T00:00:00.000Z", previous) for n in range(1, 5))
    t = task()
    item, spilled = fit(lambda kept: items.task_item(t, kept), Inline(grants=big))
    assert spilled.grants == big and not inline_of(item)


def test_the_memory_recalls_by_version_and_forgets_the_oldest() -> None:
    memory = InlineMemory(capacity=2)
    one, two = Inline((event(1),)), Inline((event(1), event(2)))
    memory.remember(("acme", "t1", 1, 0, ""), one)
    memory.remember(("acme", "t1", 2, 0, ""), two)
    assert memory.recall(("acme", "t1", 1, 0, "")) == one
    assert memory.recall(("acme", "t1", 2, 1, "w1")) is None  # another version: not what was read
    memory.remember(("acme", "t2", 1, 0, ""), one)
    assert memory.recall(("acme", "t1", 1, 0, "")) is None  # the least recently remembered went
    assert memory.recall(("acme", "t1", 2, 0, "")) == two
