"""A2AService over the task service and its in-memory store: every A2A operation is ordinary task
commands (a worker here drives the task through the same service), blocking follows the task's
events on a fake clock, and the errors are the spec's."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    SendMessageRequest,
    TaskState,
)
from google.protobuf import json_format

from dovecote.a2a.errors import A2AError
from dovecote.a2a.service import BLOCK_SECONDS, A2AService
from dovecote.platform.clock import utc_now
from dovecote.platform.cursors import CursorSigner
from dovecote.platform.principal import Principal
from dovecote.tasks.memory import InMemoryTaskStore
from dovecote.tasks.ports import TaskFilter
from dovecote.tasks.service import TaskService
from tests.support.tasks import CALLER, WORKER, Edge

KEY = b"a2a-service-test-key-0123456789abcdef"
_ids = itertools.count(1)


class Clock:
    """A fake clock whose sleep lets the scripted worker act, as a real one would meanwhile."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps = 0
        self.during_sleep: list[Callable[[], None]] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds
        if self.during_sleep:
            self.during_sleep.pop(0)()

    def monotonic(self) -> float:
        return self.now


def _strictly_later() -> Callable[[], datetime]:
    """The wall clock, a millisecond (the stored precision) past the last reading at least: on a quick
    machine two commands land in one millisecond, and the order by latest update would be a tie."""
    last = [utc_now() - timedelta(seconds=1)]

    def now() -> datetime:
        last[0] = max(utc_now(), last[0] + timedelta(milliseconds=1))
        return last[0]

    return now


class World:
    def __init__(self) -> None:
        self.tasks = TaskService(InMemoryTaskStore(), CursorSigner(KEY), clock=_strictly_later())
        self.edge = Edge(self.tasks)
        self.clock = Clock()
        self.a2a = A2AService(self.tasks, sleep=self.clock.sleep, monotonic=self.clock.monotonic)
        self.fences: dict[str, int] = {}

    def send(self, text: str = "hi", *, key: str = "", principal: Principal = CALLER, **fields: Any) -> Any:
        config = fields.pop("configuration", None)
        message = {"messageId": f"tck-{next(_ids)}", "role": "ROLE_USER", "parts": [{"text": text}], **fields}
        request = json_format.ParseDict(
            {"message": message, **({"configuration": config} if config else {})}, SendMessageRequest()
        )
        return self.a2a.send_message(principal, request, key)

    # The worker's side, through the same task service.

    def task(self, task_id: str) -> dict[str, Any]:
        return dict(self.edge.get(CALLER, task_id)["task"])

    def worker(self, task_id: str, kind: str, **extra: Any) -> None:
        if task_id not in self.fences:
            grant = self.edge.acquire(WORKER, task_id, {"command_id": f"w{next(_ids)}"})
            self.fences[task_id] = grant.body["assignment"]["fence"]
        body = {"command_id": f"w{next(_ids)}", "expected_revision": self.task(task_id)["revision"]}
        body.update(fence=self.fences[task_id], **extra)
        getattr(self.edge, kind)(WORKER, task_id, body)

    def latest(self) -> str:
        page = self.tasks.list_tasks(CALLER, TaskFilter(), 1, None)
        return page.items[0].id

    def script(self, *steps: Callable[[str], None]) -> None:
        """Worker steps to run, one per sleep of the blocking wait, on the task created last."""
        self.clock.during_sleep.extend(lambda step=step: step(self.latest()) for step in steps)


def say(text: str, **a2a: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"id": f"w-m{next(_ids)}", "parts": [{"media_type": "text/plain", "text": text}]}
    if a2a:
        message["metadata"] = {"a2a": a2a}
    return message


@pytest.fixture
def world() -> World:
    return World()


def state(task: Any) -> str:
    return str(TaskState.Name(task.status.state))


# ---- SendMessage ----------------------------------------------------------------------------------------


def test_a_blocking_send_waits_for_the_worker_and_answers_the_completed_task(world: World) -> None:
    # Given a worker that accepts, then completes, while SendMessage waits
    world.script(
        lambda t: world.worker(t, "accept"),
        lambda t: world.worker(t, "complete", message=say("done"), submission_id="s1"),
    )
    # When a message is sent without a taskId
    answer = world.send("hello")
    # Then the answer is the completed task, its history both messages, the agent's last word its status
    task = answer.task
    assert state(task) == "TASK_STATE_COMPLETED"
    assert [m.parts[0].text for m in task.history] == ["hello", "done"]
    assert task.status.message.parts[0].text == "done"
    assert task.context_id and task.id != task.context_id  # both generated, both returned


def test_return_immediately_answers_the_submitted_task_at_once(world: World) -> None:
    answer = world.send(configuration={"returnImmediately": True})
    assert state(answer.task) == "TASK_STATE_SUBMITTED" and world.clock.sleeps == 0


def test_a_blocking_send_stops_waiting_at_the_deadline(world: World) -> None:
    answer = world.send()  # no worker: the task stays submitted
    assert state(answer.task) == "TASK_STATE_SUBMITTED"
    assert world.clock.now <= BLOCK_SECONDS
    assert world.clock.sleeps < 70  # backs off to POLL_MAX: not a busy loop


def test_input_required_then_the_callers_next_message_continues_the_task(world: World) -> None:
    world.script(lambda t: world.worker(t, "accept"), lambda t: world.worker(t, "request_input", message=say("more?")))
    first = world.send("start", contextId="ctx-1").task
    assert state(first) == "TASK_STATE_INPUT_REQUIRED" and first.context_id == "ctx-1"
    assert first.status.message.parts[0].text == "more?"
    world.clock.during_sleep.append(
        lambda: world.worker(first.id, "complete", message=say("thanks"), submission_id="s")
    )
    second = world.send("here it is", taskId=first.id).task  # no contextId: the task's
    assert state(second) == "TASK_STATE_COMPLETED" and second.id == first.id and second.context_id == "ctx-1"
    assert [m.parts[0].text for m in second.history] == ["start", "more?", "here it is", "thanks"]


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        ("completed", "UNSUPPORTED_OPERATION"),  # a terminal task takes no more messages
        ("working", "UNSUPPORTED_OPERATION"),  # only input_required waits for the caller
        ("mismatch", "INVALID_PARAMS"),  # another context than the task's
    ],
)
def test_a_message_to_a_task_that_does_not_wait_for_one_is_refused(world: World, setup: str, reason: str) -> None:
    task = world.send(configuration={"returnImmediately": True}).task
    world.worker(task.id, "accept")
    if setup == "completed":
        world.worker(task.id, "complete", message=say("done"), submission_id="s")
    fields: dict[str, Any] = {"taskId": task.id}
    if setup == "mismatch":
        fields["contextId"] = "another-context"
    revision = world.task(task.id)["revision"]
    with pytest.raises(A2AError) as info:
        world.send(**fields)
    assert info.value.reason == reason
    assert world.task(task.id)["revision"] == revision  # nothing stored


@pytest.mark.parametrize("task_id", ["no-such-task", "not a dovecote id!"])
def test_a_message_to_an_unknown_task_is_task_not_found(world: World, task_id: str) -> None:
    with pytest.raises(A2AError) as info:
        world.send(taskId=task_id)
    assert info.value.reason == "TASK_NOT_FOUND" and info.value.kind.jsonrpc == -32001


def test_an_unacceptable_context_id_is_refused_and_none_is_generated(world: World) -> None:
    with pytest.raises(A2AError) as info:
        world.send(contextId="not acceptable/", configuration={"returnImmediately": True})
    assert info.value.reason == "INVALID_PARAMS"
    assert world.edge.list_tasks(CALLER, TaskFilter(), 1, None)["items"] == []


def test_an_idempotency_key_makes_a_retried_send_create_one_task(world: World) -> None:
    # A retry is the same request again: the same message (messageId included) and key
    request = {"configuration": {"returnImmediately": True}, "messageId": "m-retried"}
    first = world.send("once", key="retry-me-1", **request).task
    again = world.send("once", key="retry-me-1", **request).task
    assert again.id == first.id and again.context_id == first.context_id
    page = world.edge.list_tasks(CALLER, TaskFilter(), 10, None)
    assert [t["id"] for t in page["items"]] == [first.id]
    # The same key for another message is the command id reused: a conflict, not a second task
    with pytest.raises(A2AError) as info:
        world.send("something else", key="retry-me-1", **request)
    assert info.value.reason == "IDEMPOTENCY_CONFLICT" and info.value.http()[0] == 409


@pytest.mark.parametrize("key", ["valid-command-id-1", "not a Dovecote id / " + "x" * 300])
def test_the_idempotency_key_is_the_command_id_or_hashed_into_one(world: World, key: str) -> None:
    request = {"configuration": {"returnImmediately": True}, "messageId": "m-keyed"}
    first = world.send("once", key=key, **request).task
    assert world.send("once", key=key, **request).task.id == first.id
    receipts = world.tasks.store.receipts  # type: ignore[attr-defined]
    command_ids = [command_id for (_authority, command_id) in receipts]
    if " " in key:
        assert key not in command_ids and len(command_ids) == 1 and command_ids[0].startswith("a2a-")
    else:
        assert command_ids == [key]


def test_a_worker_may_answer_with_a_message_instead_of_the_task(world: World) -> None:
    world.script(
        lambda t: world.worker(t, "accept"),
        lambda t: world.worker(
            t, "complete", message=say("Direct message response", messageResponse=True), submission_id="s"
        ),
    )
    answer = world.send()
    assert answer.WhichOneof("payload") == "message"
    assert answer.message.parts[0].text == "Direct message response" and answer.message.role == 2  # ROLE_AGENT
    assert answer.message.context_id and not answer.message.task_id


# ---- GetTask, CancelTask, ListTasks ----------------------------------------------------------------------


def test_get_task_honours_history_length(world: World) -> None:
    world.script(lambda t: world.worker(t, "accept"), lambda t: world.worker(t, "request_input", message=say("more?")))
    task = world.send("one").task
    got = world.a2a.get_task(CALLER, GetTaskRequest(id=task.id, history_length=1))
    assert [m.parts[0].text for m in got.history] == ["more?"]
    assert len(world.a2a.get_task(CALLER, GetTaskRequest(id=task.id)).history) == 2
    assert not world.a2a.get_task(CALLER, GetTaskRequest(id=task.id, history_length=0)).history
    with pytest.raises(A2AError) as info:
        world.a2a.get_task(CALLER, GetTaskRequest(id=task.id, history_length=-1))
    assert info.value.reason == "INVALID_PARAMS"


def test_history_length_trims_the_history_never_the_status(world: World) -> None:
    world.script(lambda t: world.worker(t, "accept"), lambda t: world.worker(t, "request_input", message=say("more?")))
    task = world.send("one").task
    got = world.a2a.get_task(CALLER, GetTaskRequest(id=task.id, history_length=0))
    assert not got.history and [p.text for p in got.status.message.parts] == ["more?"]


def test_a_failed_tasks_status_says_the_workers_reason_not_its_earlier_question(world: World) -> None:
    world.script(lambda t: world.worker(t, "accept"), lambda t: world.worker(t, "request_input", message=say("which?")))
    task = world.send("one").task
    world.worker(task.id, "fail", reason="gave up waiting")
    for history in (None, 0, 1):
        asked = GetTaskRequest(id=task.id) if history is None else GetTaskRequest(id=task.id, history_length=history)
        status = world.a2a.get_task(CALLER, asked).status
        assert [p.text for p in status.message.parts] == ["gave up waiting"], history
        assert status.message.message_id == f"{task.id}:event:{world.task(task.id)['event_count']}"
    # Without a reason, the agent's last word stays the status's message.
    world.script(lambda t: world.worker(t, "accept"), lambda t: world.worker(t, "request_input", message=say("which?")))
    other = world.send("two").task
    world.worker(other.id, "fail")
    assert [p.text for p in world.a2a.get_task(CALLER, GetTaskRequest(id=other.id)).status.message.parts] == ["which?"]


def test_another_authoritys_task_is_not_found(world: World) -> None:
    task = world.send(configuration={"returnImmediately": True}).task
    stranger = Principal("globex", "caller")
    for call in (
        lambda: world.a2a.get_task(stranger, GetTaskRequest(id=task.id)),
        lambda: world.a2a.cancel_task(stranger, CancelTaskRequest(id=task.id)),
        lambda: world.send(taskId=task.id, principal=stranger),
    ):
        with pytest.raises(A2AError) as info:
            call()
        assert info.value.reason == "TASK_NOT_FOUND"
    assert world.task(task.id)["state"] == "submitted"


def test_cancel_is_idempotent_and_refused_once_the_task_ended_otherwise(world: World) -> None:
    task = world.send(configuration={"returnImmediately": True}).task
    canceled = world.a2a.cancel_task(CALLER, CancelTaskRequest(id=task.id))
    assert state(canceled) == "TASK_STATE_CANCELED"
    again = world.a2a.cancel_task(CALLER, CancelTaskRequest(id=task.id))
    assert state(again) == "TASK_STATE_CANCELED" and world.task(task.id)["revision"] == 2  # one cancel command
    done = world.send(configuration={"returnImmediately": True}).task
    world.worker(done.id, "accept")
    world.worker(done.id, "complete", message=say("done"), submission_id="s")
    with pytest.raises(A2AError) as info:
        world.a2a.cancel_task(CALLER, CancelTaskRequest(id=done.id))
    assert info.value.reason == "TASK_NOT_CANCELABLE" and info.value.http()[0] == 409


def test_cancel_reads_again_when_the_task_moved_between_its_read_and_its_command(world: World) -> None:
    task = world.send(configuration={"returnImmediately": True}).task
    real_get, moved = world.tasks.get, []

    def get_then_move(principal: Principal, task_id: str) -> Any:
        found = real_get(principal, task_id)
        if not moved:  # the worker accepts right after the first read: the cancel's CAS misses
            moved.append(True)
            world.worker(task_id, "accept")
        return found

    world.tasks.get = get_then_move  # type: ignore[method-assign]
    canceled = world.a2a.cancel_task(CALLER, CancelTaskRequest(id=task.id))
    assert state(canceled) == "TASK_STATE_CANCELED" and world.task(task.id)["revision"] == 3


def test_list_tasks_filters_pages_and_leaves_artifacts_out(world: World) -> None:
    made = [world.send(contextId="ctx-list", configuration={"returnImmediately": True}).task.id for _ in range(3)]
    world.send(contextId="ctx-other", configuration={"returnImmediately": True})
    world.worker(made[0], "accept")
    seen: list[str] = []
    token = ""
    while True:
        page = world.a2a.list_tasks(CALLER, ListTasksRequest(context_id="ctx-list", page_size=2, page_token=token))
        assert page.total_size == 3 and page.page_size == 2
        seen.extend(t.id for t in page.tasks)
        assert all(not t.artifacts and not t.history for t in page.tasks)
        token = page.next_page_token
        if not token:
            break
    assert sorted(seen) == sorted(made) and seen[0] == made[0]  # the latest update first
    working = world.a2a.list_tasks(CALLER, ListTasksRequest(status=TaskState.TASK_STATE_WORKING))
    assert [t.id for t in working.tasks] == [made[0]]
    for size in (0, 101):
        with pytest.raises(A2AError) as info:
            world.a2a.list_tasks(CALLER, ListTasksRequest(page_size=size))
        assert info.value.reason == "INVALID_PARAMS"


def test_a_published_artifact_is_the_tasks_artifact(world: World) -> None:
    task = world.send(configuration={"returnImmediately": True}).task
    world.worker(task.id, "accept")
    freeze = {
        "artifact_id": "a-1",
        "expected_base_revision": "empty",
        "payload": {"media_type": "text/plain", "text": "out"},
    }
    world.worker(task.id, "freeze", **freeze)
    assert not world.a2a.get_task(CALLER, GetTaskRequest(id=task.id)).artifacts  # frozen: not yet the output
    world.worker(task.id, "complete", message=say("done"), submission_id="s", artifact_id="a-1")
    got = world.a2a.get_task(CALLER, GetTaskRequest(id=task.id))
    assert [(a.artifact_id, a.parts[0].text) for a in got.artifacts] == [("a-1", "out")]
    listed = world.a2a.list_tasks(CALLER, ListTasksRequest(include_artifacts=True)).tasks
    assert listed[0].artifacts[0].artifact_id == "a-1"


def test_a_send_is_parsed_from_protobuf_json(world: World) -> None:
    # The request type's JSON form: camelCase or the proto field names, as the spec allows
    message = json_format.ParseDict({"message_id": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}, Message())
    answer = world.a2a.send_message(
        CALLER, SendMessageRequest(message=message, configuration={"return_immediately": True})
    )
    assert state(answer.task) == "TASK_STATE_SUBMITTED"


# ---- what a worker stored that protobuf JSON cannot hold (issue 29) --------------------------------------


def unheld_message() -> dict[str, Any]:
    """A worker's message the task gate accepts (a text part, valid JSON to Python) that A2A reads as
    data (its hint says so) and protobuf JSON cannot hold."""
    return {
        "id": f"w-m{next(_ids)}",
        "parts": [
            {"media_type": "application/json", "text": "[1e999, NaN]"},
            {"media_type": "text/plain", "text": "and the rest"},
        ],
        "metadata": {"a2a": {"partsVersion": 2, "parts": [{"kind": "data"}, {}]}},
    }


def test_a_reply_that_committed_is_answered_though_the_history_holds_what_protobuf_cannot(world: World) -> None:
    from dovecote.a2a import mapping

    # Given a task whose worker asked for input with a part protobuf JSON cannot hold
    world.script(
        lambda t: world.worker(t, "accept"), lambda t: world.worker(t, "request_input", message=unheld_message())
    )
    first = world.send("start").task
    assert state(first) == "TASK_STATE_INPUT_REQUIRED"
    # When the caller replies (the reply commits), the answer, GetTask and a ListTasks page serialize
    world.clock.during_sleep.append(lambda: world.worker(first.id, "complete", message=say("ok"), submission_id="s"))
    answer = json_format.MessageToDict(world.send("here", taskId=first.id))
    assert answer["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    got = json_format.MessageToDict(world.a2a.get_task(CALLER, GetTaskRequest(id=first.id)))
    listed = json_format.MessageToDict(world.a2a.list_tasks(CALLER, ListTasksRequest(history_length=10)))
    for task in (answer["task"], got, listed["tasks"][0]):
        asked = task["history"][1]
        # Then the part is its bytes, marked, and the rest of the message is as stored
        assert asked["parts"][0]["metadata"][mapping.UNREPRESENTABLE].startswith("data[0] is Infinity")
        assert asked["parts"][1]["text"] == "and the rest"
    assert world.task(first.id)["state"] == "completed"


def test_an_artifact_that_is_no_a2a_artifact_does_not_fail_the_task_or_its_list_page(world: World) -> None:
    from dovecote.a2a import mapping

    done, other = (world.send(configuration={"returnImmediately": True}).task for _ in range(2))
    world.worker(done.id, "accept")
    payload = {"media_type": mapping.ARTIFACT_MEDIA_TYPE, "text": '{"parts": [{"data": NaN}]}'}
    world.worker(done.id, "freeze", artifact_id="a-bad", expected_base_revision="empty", payload=payload)
    world.worker(done.id, "complete", message=say("done"), submission_id="s", artifact_id="a-bad")
    got = json_format.MessageToDict(world.a2a.get_task(CALLER, GetTaskRequest(id=done.id)))
    assert mapping.UNREPRESENTABLE in got["artifacts"][0]["metadata"]
    page = json_format.MessageToDict(world.a2a.list_tasks(CALLER, ListTasksRequest(include_artifacts=True)))
    assert {t["id"] for t in page["tasks"]} == {done.id, other.id}


# ---- a reply under an Idempotency-Key (issue 29) ----------------------------------------------------------


def waiting_task(world: World) -> Any:
    world.script(lambda t: world.worker(t, "accept"), lambda t: world.worker(t, "request_input", message=say("more?")))
    task = world.send("start").task
    assert state(task) == "TASK_STATE_INPUT_REQUIRED"
    return task


def test_an_exact_retry_of_a_keyed_reply_replays_after_the_task_moved_on(world: World) -> None:
    task = waiting_task(world)
    reply = {"taskId": task.id, "messageId": "m-reply", "configuration": {"returnImmediately": True}}
    first = world.send("here", key="reply-key-1", **reply).task
    world.worker(task.id, "complete", message=say("done"), submission_id="s")
    again = world.send("here", key="reply-key-1", **reply).task  # the same request: the answer was lost
    assert again.id == first.id and state(again) == "TASK_STATE_COMPLETED"
    assert world.task(task.id)["message_count"] == 4  # start, more?, here, done: one reply


@pytest.mark.parametrize("change", ["another text", "another task", "the create's key"])
def test_another_body_under_a_used_key_is_an_idempotency_conflict(world: World, change: str) -> None:
    task = waiting_task(world)
    reply = {"taskId": task.id, "messageId": "m-reply", "configuration": {"returnImmediately": True}}
    if change == "the create's key":
        created = world.send("created", key="create-key-1", configuration={"returnImmediately": True}).task
        world.worker(created.id, "accept")
        world.worker(created.id, "request_input", message=say("more?"))
        target, key, text = created.id, "create-key-1", "a reply"
    else:
        world.send("here", key="reply-key-2", **reply)
        other = waiting_task(world) if change == "another task" else task
        target, key, text = other.id, "reply-key-2", "here" if change == "another task" else "another text"
    revision = world.task(target)["revision"]
    with pytest.raises(A2AError) as info:
        world.send(text, key=key, **{**reply, "taskId": target})
    assert info.value.reason == "IDEMPOTENCY_CONFLICT" and info.value.http()[0] == 409
    assert world.task(target)["revision"] == revision  # nothing stored


# ---- every answer bounded (issue 29): as /v1's pages, within 4 MiB, far below Lambda's 6 MB --------------

PART = 8000  # inline in a message page (parts over 8 KiB are stored apart, served by URL)


def big(letter: str) -> dict[str, Any]:
    """A message of 32 inline parts: 256,000 bytes, the most a page carries inline per message."""
    return {"id": f"m-{next(_ids)}", "parts": [{"media_type": "text/plain", "text": letter * PART}] * 32}


def grow(world: World, task_id: str, rounds: int, last: str = "q") -> None:
    """`rounds` questions of the worker, each answered by the caller, then one more question."""
    for i in range(rounds + 1):
        world.worker(task_id, "request_input", message=big(last if i == rounds else "q"))
        if i < rounds:
            reply = {"command_id": f"r{next(_ids)}", "expected_revision": world.task(task_id)["revision"]}
            world.edge.reply(CALLER, task_id, {**reply, "message": big("r")})


def weight_of(answer: Any) -> int:
    from dovecote.a2a import mapping

    return mapping.weight(answer)


def test_a_list_page_stops_before_its_answer_would_pass_the_bound_and_continues_there(world: World) -> None:
    from dovecote.a2a import mapping

    # Given six tasks of about 1.5 MB of history each, listed 100 at a time with 100 messages each
    made = set()
    for _ in range(6):
        task = world.send(configuration={"returnImmediately": True}).task
        world.worker(task.id, "accept")
        grow(world, task.id, 2)
        made.add(task.id)
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        page = world.a2a.list_tasks(CALLER, ListTasksRequest(page_size=100, history_length=100, page_token=token))
        pages += 1
        # Then every page is within the bound, of whole tasks, and the pages list each task once
        assert weight_of(page) <= mapping.ANSWER_BYTES and 1 <= len(page.tasks) <= 3
        assert all(len(t.history) == 6 and mapping.TRUNCATED not in t.metadata for t in page.tasks)
        seen.extend(t.id for t in page.tasks)
        token = page.next_page_token
        if not token:
            break
    assert sorted(seen) == sorted(made) and pages == 3  # 9 MB of tasks: two a page


def test_a_task_keeps_its_latest_messages_within_the_bound_and_says_what_it_left_out(world: World) -> None:
    from dovecote.a2a import mapping

    # Given a task of 41 messages, 10 MB of them inline
    task = world.send(configuration={"returnImmediately": True}).task
    world.worker(task.id, "accept")
    grow(world, task.id, 19, last="z")
    # When it is read with its whole history, and when a reply (that commits) is answered
    got = world.a2a.get_task(CALLER, GetTaskRequest(id=task.id, history_length=100))
    world.clock.during_sleep.append(lambda: world.worker(task.id, "request_input", message=big("y")))
    answer = world.send("and again", taskId=task.id).task
    # Then each is within the bound with the latest messages, and says what it left out
    for one, latest in ((got, "z"), (answer, "y")):
        assert weight_of(one) <= mapping.ANSWER_BYTES
        assert one.history[-1].parts[0].text[0] == latest and one.status.message.parts[0].text[0] == latest
        assert 10 < len(one.history) < 20 and "oldest" in one.metadata[mapping.TRUNCATED]


def test_an_artifact_with_no_room_inline_is_served_by_its_url(world: World) -> None:
    import base64

    from dovecote.a2a import mapping

    task = world.send(configuration={"returnImmediately": True}).task
    world.worker(task.id, "accept")
    payload = {"media_type": "application/octet-stream", "data_b64": base64.b64encode(b"\x00" * (3900 * 1024)).decode()}
    world.worker(task.id, "freeze", artifact_id="a-big", expected_base_revision="empty", payload=payload)
    world.worker(task.id, "complete", message=say("done"), submission_id="s", artifact_id="a-big")
    got = world.a2a.get_task(CALLER, GetTaskRequest(id=task.id))
    assert weight_of(got) <= mapping.ANSWER_BYTES
    part = got.artifacts[0].parts[0]
    assert part.WhichOneof("content") == "url" and mapping.TRUNCATED in got.artifacts[0].metadata
    assert [m.parts[0].text for m in got.history][-1] == "done"


# ---- blocking waits: bounded per authority, and within the gateway's limit under load (issue 29) ---------


def test_past_the_authoritys_bound_a_blocking_send_answers_at_once(world: World) -> None:
    from dovecote.a2a.waits import MemoryWaits

    world.a2a.waits = waits = MemoryWaits(2, clock=lambda: 1_900_000_000.0)
    held = [waits.take("acme"), waits.take("acme")]  # two sends of the authority wait elsewhere
    answer = world.send()  # blocking, no worker
    assert state(answer.task) == "TASK_STATE_SUBMITTED" and world.clock.sleeps == 0  # no wait at all
    # Another authority still waits (its own bound), and gives its slot back when done
    other = Principal("globex", "caller")
    world.send(principal=other)
    assert world.clock.sleeps > 0 and waits.held["globex"] == set()
    # A slot given back lets the authority's next send wait
    waits.give_back("acme", str(held[0]))
    before = world.clock.sleeps
    world.send()
    assert world.clock.sleeps > before and len(waits.held["acme"]) == 1


def test_when_the_bound_cannot_be_read_a_blocking_send_answers_at_once(world: World) -> None:
    from dovecote.platform.errors import Unavailable

    class Down:
        def take(self, authority: str) -> str | None:
            raise Unavailable("DynamoDB is unavailable")

        def give_back(self, authority: str, entry: str) -> None:
            raise AssertionError("nothing was taken")

    world.a2a.waits = Down()
    answer = world.send()  # the create committed: an answer, not an error the client would retry
    assert state(answer.task) == "TASK_STATE_SUBMITTED" and world.clock.sleeps == 0


def test_a_blocking_send_answers_within_the_gateways_limit_when_reads_are_slow(world: World) -> None:
    # Under load every read of the store takes 2 s: the wait keeps room for its next poll and for
    # the answer's reads, so the answer comes within BLOCK_SECONDS, far inside API Gateway's 30 s.
    # (At 25 s and without that room it came at 29.75 s: past the function's 29 s timeout.)
    slow = 2.0
    for name in ("events", "get", "messages", "list_tasks"):
        real = getattr(world.tasks, name)

        def slowed(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            world.clock.now += slow
            return _real(*args, **kwargs)

        setattr(world.tasks, name, slowed)
    answer = world.send()
    assert state(answer.task) == "TASK_STATE_SUBMITTED"
    assert BLOCK_SECONDS / 2 <= world.clock.now <= BLOCK_SECONDS < 29  # it waited, and answered in time
