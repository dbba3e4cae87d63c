"""What the tasks table's stream tells the webhook fan-out (tasks/dynamo_stream.py): the events a task
item write appended, read from its new image; the event filter that lets only those writes through
(held to the local runtime's matcher, which the cloud's filter also is)."""

from __future__ import annotations

from typing import Any

from dovecote.tasks.dynamo_stream import EVENT_APPENDS, event_keys
from infra.local.streams import matches


def record(name: str, pk: str, sk: str, image: dict[str, Any] | None) -> dict[str, Any]:
    change: dict[str, Any] = {"Keys": {"pk": {"S": pk}, "sk": {"S": sk}}}
    if image is not None:
        change["NewImage"] = {"pk": {"S": pk}, "sk": {"S": sk}, **image}
    return {"eventName": name, "dynamodb": change}


def test_a_write_that_appended_events_names_them() -> None:
    created = record("INSERT", "T#acme#t1", "T", {"ne": {"N": "1"}, "event_count": {"N": "1"}})
    accepted = record("MODIFY", "T#acme#t1", "T", {"ne": {"N": "1"}, "event_count": {"N": "2"}})
    two = record("MODIFY", "T#acme#t1", "T", {"ne": {"N": "2"}, "event_count": {"N": "7"}})
    assert event_keys(created) == [("acme", "t1", 1)]
    assert event_keys(accepted) == [("acme", "t1", 2)]
    assert event_keys(two) == [("acme", "t1", 6), ("acme", "t1", 7)]
    assert all(matches(EVENT_APPENDS, r) for r in (created, accepted, two))


def test_other_writes_name_none_and_do_not_pass_the_filter() -> None:
    beat = record("MODIFY", "T#acme#t1", "T", {"event_count": {"N": "2"}})  # a heartbeat, a claim
    spilled = record("INSERT", "T#acme#t1", "E#00000000000000000005", {"ev": {"L": []}})  # records moved
    v1_event = record("INSERT", "T#acme#t1", "E#00000000000000000002", {"type": {"S": "task_accepted"}})
    removed = record("REMOVE", "T#acme#t1", "T", None)
    guard = record("INSERT", "MID#acme#m1", "-", {"ne": {"N": "1"}})
    for r in (beat, spilled, v1_event, removed, guard):
        assert event_keys(r) == [] and not matches(EVENT_APPENDS, r), r


def test_a_malformed_image_names_nothing() -> None:
    assert event_keys(record("MODIFY", "T#acme#t1", "T", {"ne": {"N": "3"}, "event_count": {"N": "2"}})) == []
    assert event_keys(record("MODIFY", "T#acme", "T", {"ne": {"N": "1"}, "event_count": {"N": "2"}})) == []
    assert event_keys(record("MODIFY", "T#acme#t1", "T", {"ne": {"S": "x"}, "event_count": {"N": "2"}})) == []
