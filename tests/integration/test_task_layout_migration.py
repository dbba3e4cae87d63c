"""The tasks table written by the v1 layout, read and written by this adapter (layout v2): the
migration is the adapter itself. It reads every v1 form as it stands (a v1 task item has nothing
inline; its events, grants and messages are the items of their own that v2 also reads; a v1 message
id guard names its message item), and a task's next command rewrites its task item in v2, inside
that command's own transaction. No table change, no pass over the table. The table is the one the
v1 adapter really wrote (tests/data/tasks-v1/store.json), with the answers the v1 service gave."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from dovecote.platform.cursors import CursorSigner
from dovecote.platform.principal import Principal
from dovecote.tasks.dynamo_items import message_id_pk, task_pk
from dovecote.tasks.ports import TaskFilter
from tests.support.tasks import CALLER, Edge, code_of, dynamo_store, edge, message, uid
from tests.support.tasks_v1 import load

KEY = b"v1-fixture-key-0123456789abcdefg"  # the v1 service's cursor key (generate.py)
WHO = {"caller": CALLER, "w1": Principal("acme", "worker", "w1"), "w2": Principal("acme", "worker", "w2")}
TASKS = ("t-done", "t-work", "t-fenced", "t-open")


@pytest.fixture
def v1(moto_env: dict[str, Any]) -> tuple[Edge, dict[str, Any], dict[str, Any]]:
    fixture = load(moto_env["dynamodb"], moto_env["settings"].tasks_table)
    # The clock the v1 answers were given at: a lease's deadlines are read relative to nothing, but
    # commands below stamp times after the v1 ones.
    service = edge(dynamo_store(moto_env), CursorSigner(KEY), clock=lambda: datetime(2026, 11, 2, tzinfo=UTC))
    return service, moto_env, fixture


def raw(env: dict[str, Any], pk: str, sk: str) -> dict[str, Any] | None:
    key = {"pk": {"S": pk}, "sk": {"S": sk}}
    return env["dynamodb"].get_item(TableName=env["settings"].tasks_table, Key=key).get("Item")


def reads(service: Edge, task_id: str) -> dict[str, Any]:
    messages = service.messages(CALLER, task_id, None, None)
    return {
        "get": service.get(CALLER, task_id),
        "events": service.events(CALLER, task_id, None, None),
        "messages": messages,
        "messages_after_1_limit_1": service.messages(CALLER, task_id, 1, 1),
        "grants": service.grants(CALLER, task_id, None, None),
        "by_id": {m["id"]: service.message(CALLER, task_id, m["id"]) for m in messages["items"]},
    }


def test_a_v1_table_reads_as_the_v1_service_answered(v1: tuple[Edge, dict[str, Any], dict[str, Any]]) -> None:
    service, env, fixture = v1
    for task_id in TASKS:
        assert reads(service, task_id) == fixture["reads"][task_id], task_id
        assert "revision" in (raw(env, task_pk("acme", task_id), "T") or {})  # still v1: reads write nothing
    assert service.list_tasks(CALLER, TaskFilter(), 100, None)["items"] == fixture["lists"]["tasks"]
    assert service.list_context(CALLER, "ctx-1", 100, None)["items"] == fixture["lists"]["ctx-1"]
    assert service.list_leases(WHO["w1"], None, None)["items"] == fixture["lists"]["leases_w1"]
    assert service.get_lease(WHO["w2"], "t-fenced")["assignment"]["fence"] == 2


def test_every_v1_command_replays_its_answer(v1: tuple[Edge, dict[str, Any], dict[str, Any]]) -> None:
    service, _, fixture = v1
    for command in fixture["commands"]:
        again = getattr(service, command["kind"])(WHO[command["who"]], *command["args"])
        assert (again.body, again.replayed) == (command["body"], True), command["kind"]


def test_ids_taken_under_v1_stay_taken(v1: tuple[Edge, dict[str, Any], dict[str, Any]]) -> None:
    service, _, _ = v1
    create = {"workspace": "ws", "context": "c", "id": uid("t")}
    taken = {**create, "command_id": uid("c"), "message": message("again", message_id="m-done-1")}
    assert code_of(lambda: service.create(CALLER, taken)) == "message_conflict"
    other = {**create, "command_id": "c-done-1", "message": message("other")}
    assert code_of(lambda: service.create(CALLER, other)) == "idempotency_conflict"
    fence = service.get_lease(WHO["w1"], "t-work")["assignment"]["fence"]
    body = {"command_id": uid("c"), "expected_revision": 2, "fence": fence, "submission_id": "s-done"}
    assert code_of(lambda: service.complete(WHO["w1"], "t-work", {**body, "message": message("done")})) == (
        "submission_conflict"
    )


def test_v1_tasks_go_on_in_v2_and_read_whole(v1: tuple[Edge, dict[str, Any], dict[str, Any]]) -> None:
    service, env, fixture = v1
    w1 = WHO["w1"]
    # t-work (working under a v1 claim): an input round, then completed.
    fence = service.get_lease(w1, "t-work")["assignment"]["fence"]
    ask = {
        "command_id": uid("c"),
        "expected_revision": 2,
        "fence": fence,
        "message": message("which?", message_id="m-work-2"),
    }
    service.request_input(w1, "t-work", ask)
    item = raw(env, task_pk("acme", "t-work"), "T")
    assert item is not None and "rv" in item and "revision" not in item  # rewritten in v2 by its command
    assert [e["M"]["q"]["N"] for e in item["ev"]["L"]] == ["3"]  # the new event inline; 1 and 2 stay E# items
    reply = {"command_id": uid("c"), "expected_revision": 3, "message": message("that one", message_id="m-work-3")}
    service.reply(CALLER, "t-work", reply)
    done = {"command_id": uid("c"), "expected_revision": 4, "fence": fence, "submission_id": uid("s")}
    service.complete(w1, "t-work", {**done, "message": message("done", message_id="m-work-4")})
    events = service.events(CALLER, "t-work", None, None)["items"]
    assert [e["sequence"] for e in events] == [1, 2, 3, 4, 5]
    assert events[:2] == fixture["reads"]["t-work"]["events"]["items"]
    assert [e["type"] for e in events[2:]] == ["input_required", "caller_replied", "task_completed"]
    messages = service.messages(CALLER, "t-work", None, None)["items"]
    assert [(m["sequence"], m["id"]) for m in messages] == [(n, f"m-work-{n}") for n in (1, 2, 3, 4)]
    assert messages[0] == fixture["reads"]["t-work"]["messages"]["items"][0]
    for m in messages:  # by id: a v1 guard (through its message item) and v2 guards (holding theirs)
        assert service.message(CALLER, "t-work", m["id"])["message"] == m
    for page_start in range(4):  # pages across the v1 items and the v2 places
        page = service.messages(CALLER, "t-work", page_start, 2)["items"]
        assert page == messages[page_start : page_start + 2]
    assert raw(env, message_id_pk("acme", "m-work-2"), "-")["parts"]  # type: ignore[index]
    assert "parts" not in (raw(env, message_id_pk("acme", "m-work-1"), "-") or {})  # the v1 guard, as it was
    # t-open (submitted, in the v1 claimable index): claimed, accepted, failed.
    claimed = service.claim(WHO["w2"], {"command_id": uid("c")}).body["assignment"]
    assert claimed["task"]["id"] == "t-open" and claimed["fence"] == 1
    accept = {"command_id": uid("c"), "expected_revision": 1, "fence": 1}
    service.accept(WHO["w2"], "t-open", accept)
    grants = service.grants(CALLER, "t-open", None, None)["items"]
    assert [(g["sequence"], g["worker"]) for g in grants] == [(1, "w2")]
    # t-fenced (leased again after a fence under v1): its grant history keeps both generations.
    history = service.grants(CALLER, "t-fenced", None, None)["items"]
    assert history == fixture["reads"]["t-fenced"]["grants"]["items"]
    # The v1 receipts still replay after the tasks moved on in v2.
    test_every_v1_command_replays_its_answer((service, env, fixture))


def test_a_v1_writer_fails_closed_on_a_v2_task_item(v1: tuple[Edge, dict[str, Any], dict[str, Any]]) -> None:
    """A deployment rolling out: a v1 writer's compare-and-swap names `revision`, which a v2 task
    item lacks, so it cannot overwrite the inline records it does not know."""
    service, env, _ = v1
    fence = service.get_lease(WHO["w1"], "t-work")["assignment"]["fence"]
    body = {"command_id": uid("c"), "expected_revision": 2, "fence": fence, "message": message("?")}
    service.request_input(WHO["w1"], "t-work", body)
    before = raw(env, task_pk("acme", "t-work"), "T")
    assert before is not None
    v1_item = {k: v for k, v in before.items() if k not in ("rv", "ev", "gr", "mi")} | {"revision": {"N": "3"}}
    error = env["dynamodb"].exceptions.ConditionalCheckFailedException
    with pytest.raises(error):
        env["dynamodb"].put_item(
            TableName=env["settings"].tasks_table,
            Item=v1_item,
            ConditionExpression="#r = :r AND #o = :o AND #f = :f",
            ExpressionAttributeNames={"#r": "revision", "#o": "owner", "#f": "fence"},
            ExpressionAttributeValues={":r": {"N": "3"}, ":o": {"S": "w1"}, ":f": {"N": str(fence)}},
        )
    assert raw(env, task_pk("acme", "t-work"), "T") == before
