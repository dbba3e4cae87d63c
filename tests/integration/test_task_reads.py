"""Reads of a task on both TaskStores (the fake and DynamoDB on moto): one message by id, the byte
budget of a message page, and fail-closed reads: an aggregate that breaks an invariant is never
served (500 corrupt_store, facts reported) — tested by editing the stored items directly."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dovecote.platform.cursors import CursorSigner
from dovecote.platform.errors import CorruptStore, NotFound
from dovecote.tasks import model as task_model
from dovecote.tasks.dynamo import task_pk
from dovecote.tasks.dynamo_items import message_id_pk
from dovecote.tasks.memory import InMemoryTaskStore
from tests.support.tasks import CALLER, WORKER, Edge, Flow, edge, message, store_of, uid

KEY = b"task-reads-key-0123456789abcdefgh"


class Backend:
    def __init__(self, kind: str, service: Edge, env: dict[str, Any] | None) -> None:
        self.kind = kind
        self.service = service
        self.env = env
        self.reported: list[tuple[str, dict[str, Any]]] = []

    def corrupt_task(self, task_id: str, **changes: Any) -> None:
        """Change stored fields behind the service's back (as a bad migration or hand edit would)."""
        if self.kind == "memory":
            store = self.service.store
            store.tasks[("acme", task_id)] = store.tasks[("acme", task_id)].evolve(**changes)
            return
        assert self.env is not None
        names = {f"#{k}": k for k in changes}
        values = {f":{k}": ({"N": str(v)} if isinstance(v, int) else {"S": v}) for k, v in changes.items()}
        self.env["dynamodb"].update_item(
            TableName=self.env["settings"].tasks_table,
            Key={"pk": {"S": task_pk("acme", task_id)}, "sk": {"S": "T"}},
            UpdateExpression="SET " + ", ".join(f"#{k} = :{k}" for k in changes),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def corrupt_message_author(self, task_id: str, sequence: int, author: str) -> None:
        if self.kind == "memory":
            from dataclasses import replace

            store = self.service.store
            stored = store.messages_by_task[("acme", task_id)]
            stored[sequence - 1] = replace(stored[sequence - 1], author=author)
            return
        assert self.env is not None
        # The message is in its id's guard item (tasks/dynamo_inline.py: the layout's v2).
        message_id = self.service.messages(CALLER, task_id, sequence - 1, 1)["items"][0]["id"]
        self.env["dynamodb"].update_item(
            TableName=self.env["settings"].tasks_table,
            Key={"pk": {"S": message_id_pk("acme", message_id)}, "sk": {"S": "-"}},
            UpdateExpression="SET author = :a",
            ExpressionAttributeValues={":a": {"S": author}},
        )

    def drop_grant(self, task_id: str, fence: int) -> None:
        if self.kind == "memory":
            del self.service.store.grants[("acme", task_id, fence)]
            return
        assert self.env is not None
        table, key = self.env["settings"].tasks_table, {"pk": {"S": task_pk("acme", task_id)}, "sk": {"S": "T"}}
        # The latest grants are inline in the task item (v2), earlier ones G# items of their own.
        inline = self.env["dynamodb"].get_item(TableName=table, Key=key)["Item"].get("gr", {"L": []})["L"]
        at = [i for i, g in enumerate(inline) if g["M"]["f"]["N"] == str(fence)]
        if at:
            self.env["dynamodb"].update_item(TableName=table, Key=key, UpdateExpression=f"REMOVE gr[{at[0]}]")
            return
        self.env["dynamodb"].delete_item(
            TableName=table, Key={"pk": {"S": task_pk("acme", task_id)}, "sk": {"S": f"G#{fence:020d}"}}
        )


@pytest.fixture(params=["memory", "dynamo"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    env = request.getfixturevalue("moto_env") if request.param == "dynamo" else None
    store = store_of(request)
    holder: list[Backend] = []
    service = edge(store, CursorSigner(KEY), on_corrupt=lambda kind, facts: holder[0].reported.append((kind, facts)))
    holder.append(Backend(request.param, service, env))
    yield holder[0]


def test_one_message_by_id(backend: Backend) -> None:
    svc = backend.service
    flow = Flow(svc)
    first = message("first", uid("m"))
    svc.create(
        CALLER, {"command_id": uid("c"), "workspace": "ws", "id": flow.task_id, "context": "c", "message": first}
    )
    got = svc.message(CALLER, flow.task_id, first["id"])["message"]
    assert got["id"] == first["id"] and got["sequence"] == 1 and got["parts"][0]["text"] == "first"
    other = Flow(svc).to_state("submitted")
    with pytest.raises(NotFound):
        svc.message(CALLER, other.task_id, first["id"])  # an id of another task
    with pytest.raises(NotFound):
        svc.message(CALLER, flow.task_id, "no-such-message")
    with pytest.raises(NotFound):
        svc.message(
            __import__("dovecote.platform.principal", fromlist=["P"]).Principal("globex", "caller"),
            flow.task_id,
            first["id"],
        )


def test_message_metadata_is_stored_and_returned_as_given(backend: Backend) -> None:
    # Given a task created with a message carrying metadata, and a reply without any
    svc = backend.service
    flow = Flow(svc)
    first = {**message("first", uid("m")), "metadata": {"a2a": {"messageId": "tck-x", "parts": [{"kind": "text"}]}}}
    svc.create(
        CALLER, {"command_id": uid("c"), "workspace": "ws", "id": flow.task_id, "context": "c", "message": first}
    )
    # Then one read by id and the page both carry it, unchanged; a message without any has none
    got = svc.message(CALLER, flow.task_id, first["id"])["message"]
    assert got["metadata"] == first["metadata"]
    assert svc.messages(CALLER, flow.task_id, 0, None)["items"][0]["metadata"] == first["metadata"]
    plain = Flow(svc)
    plain.create()
    assert "metadata" not in svc.messages(CALLER, plain.task_id, 0, None)["items"][0]


def test_a_message_page_stops_at_its_byte_budget(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    from dovecote.tasks import reads

    monkeypatch.setattr(reads, "MESSAGE_PAGE_BYTES", 5000)
    svc = backend.service
    flow = Flow(svc)
    flow.create()
    flow.acquire()
    flow.worker_cmd("accept")
    for _ in range(3):  # three rounds of 3,000-byte texts (under the 8 KiB inline size)
        flow.worker_cmd("request_input", message=message("a" * 3000))
        flow.caller_cmd("reply", message=message("c" * 3000))
    page = svc.messages(CALLER, flow.task_id, None, 100)
    # 1 small + one 3,000-byte message fit in 5,000 bytes; the next would not.
    assert [m["sequence"] for m in page["items"]] == [1, 2] and page["has_more"] and page["next"] == 2
    rest = svc.messages(CALLER, flow.task_id, page["next"], 100)
    assert [m["sequence"] for m in rest["items"]] == [3]  # a page always holds at least one message


@pytest.mark.parametrize(
    ("changes", "what"),
    [
        ({"event_count": 7}, "revision 1 != event count 7"),
        ({"state": "completed"}, "completed without a submission"),
        ({"message_count": 5}, "message count 5 > revision 1"),
    ],
)
def test_a_task_that_breaks_an_invariant_is_never_served(backend: Backend, changes: dict[str, Any], what: str) -> None:
    flow = Flow(backend.service).to_state("submitted")
    backend.corrupt_task(flow.task_id, **changes)
    for read in (
        lambda: backend.service.get(CALLER, flow.task_id),
        lambda: backend.service.snapshot(CALLER, flow.task_id),
        lambda: backend.service.events(CALLER, flow.task_id, None, None),
        lambda: flow.caller_cmd("cancel"),  # nor changed
    ):
        with pytest.raises(CorruptStore) as caught:
            read()
        assert caught.value.status == 500 and caught.value.details == {"record": "task"}
    kind, facts = backend.reported[0]
    assert kind == "task" and facts["task"] == flow.task_id and what in facts["violations"]


def test_authors_that_do_not_alternate_are_never_served(backend: Backend) -> None:
    flow = Flow(backend.service).to_state("input_required")
    backend.corrupt_message_author(flow.task_id, 2, "caller")
    with pytest.raises(CorruptStore):
        backend.service.messages(CALLER, flow.task_id, None, None)
    assert backend.reported[0][0] == "message"


def test_a_lease_without_its_grant_record_is_never_served(backend: Backend) -> None:
    flow = Flow(backend.service).to_state("submitted")
    flow.acquire()
    assert backend.service.get_lease(WORKER, flow.task_id)["assignment"]["fence"] == flow.fence
    backend.drop_grant(flow.task_id, flow.fence)
    with pytest.raises(CorruptStore):
        backend.service.get_lease(WORKER, flow.task_id)
    assert backend.reported[0][1]["granted_to"] is None


def test_invariants_hold_for_every_state() -> None:
    """The checks accept every state the service produces (no false alarm)."""
    service = edge(InMemoryTaskStore(), CursorSigner(KEY))
    for state in ("submitted", "working", "input_required", "completed", "canceled", "rejected", "failed"):
        flow = Flow(service).to_state(state)
        task = service.store.read("acme", None, flow.task_id).task
        assert task_model.task_violations(task) == [], state


def test_a_task_list_continues_after_any_of_its_items(backend: Backend) -> None:
    # An A2A answer bounded in size cuts a page after some task: the cursor after that task, on
    # either store, continues exactly where the cut left off.
    from dovecote.tasks.ports import TaskFilter

    svc, context = backend.service, uid("ctx")
    for _ in range(5):
        Flow(svc, context=context).create()
    listed = TaskFilter(context=context)
    whole = svc.list_tasks(CALLER, listed, 5, None)["items"]
    assert len(whole) == 5
    for cut in range(1, 5):
        cursor = svc.list_tasks_after(CALLER, listed, whole[cut - 1])
        rest = svc.list_tasks(CALLER, listed, 5, cursor)["items"]
        assert [t["id"] for t in rest] == [t["id"] for t in whole[cut:]]
    # The cursor is bound to its list: another filter refuses it
    with pytest.raises(Exception, match="cursor"):
        svc.list_tasks(CALLER, TaskFilter(context=context, state="working"), 5, cursor)
