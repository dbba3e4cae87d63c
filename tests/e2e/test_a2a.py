"""A2A 1.0 end to end: a2a-sdk's own client, over both HTTP bindings (JSON-RPC and HTTP+JSON), against
`dovecote dev` and examples/a2a_worker.py (an ordinary Dovecote worker) in a fresh authority of its
own, so the worker claims only these tasks. Blocking and immediate sends, input-required
continuation, cancel, list, get with history, an unknown task, another authority's task, and an
Idempotency-Key replay."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError

from tests.e2e.conftest import TLS
from tests.support.authorities import Authority, fresh_authority
from tests.support.workers import a2a_world

BINDINGS = ["JSONRPC", "HTTP+JSON"]
T = TypeVar("T")


authority, worker = a2a_world("a2a", "a2a-e2e")


def run(call: Callable[[], Any]) -> Any:
    return asyncio.run(call())


async def with_client(endpoint: str, token: str, binding: str, use: Callable[[Any], Any], **headers: str) -> Any:
    """a2a-sdk's client for `binding`, from the public Agent Card, with the caller's bearer token."""
    auth = {"Authorization": f"Bearer {token}", **headers}
    async with httpx.AsyncClient(headers=auth, timeout=40, verify=TLS) as http:  # TLS: conftest's shared context
        card = await A2ACardResolver(http, endpoint).get_agent_card()
        config = ClientConfig(streaming=False, httpx_client=http, supported_protocol_bindings=[binding])
        client = ClientFactory(config).create(card)
        return await use(client)


def message(prefix: str, text: str = "hello", **fields: Any) -> Message:
    return Message(
        message_id=f"{prefix}-{uuid.uuid4().hex[:8]}", role=Role.ROLE_USER, parts=[Part(text=text)], **fields
    )


async def send(client: Any, sent: Message, *, immediately: bool = False) -> Any:
    request = SendMessageRequest(message=sent, configuration=SendMessageConfiguration(return_immediately=immediately))
    answers = [answer async for answer in client.send_message(request)]
    assert len(answers) == 1
    return answers[0]


class A2A:
    """One binding's client calls, each run to completion."""

    def __init__(self, endpoint: str, token: str, binding: str) -> None:
        self.endpoint, self.token, self.binding = endpoint, token, binding

    def call(self, use: Callable[[Any], Any], **headers: str) -> Any:
        return run(lambda: with_client(self.endpoint, self.token, self.binding, use, **headers))

    def send(self, sent: Message, *, immediately: bool = False, **headers: str) -> Any:
        return self.call(lambda c: send(c, sent, immediately=immediately), **headers)

    def task(self, sent: Message, **options: Any) -> Task:
        answer = self.send(sent, **options)
        assert answer.HasField("task"), answer
        return answer.task

    def get(self, task_id: str, history_length: int | None = None) -> Task:
        request = GetTaskRequest(id=task_id)
        if history_length is not None:
            request.history_length = history_length
        return self.call(lambda c: c.get_task(request))

    def cancel(self, task_id: str) -> Task:
        return self.call(lambda c: c.cancel_task(CancelTaskRequest(id=task_id)))

    def list(self, **fields: Any) -> Any:
        return self.call(lambda c: c.list_tasks(ListTasksRequest(**fields)))


@pytest.fixture(params=BINDINGS)
def a2a(request: pytest.FixtureRequest, authority: Authority, worker: subprocess.Popen[str]) -> A2A:
    return A2A(authority.endpoint, authority.token("caller"), request.param)


def state(task: Task) -> str:
    return str(TaskState.Name(task.status.state))


def test_the_agent_card_is_public_and_names_both_bindings(dev_runtime: dict[str, Any]) -> None:
    card = httpx.get(dev_runtime["endpoint"] + "/.well-known/agent-card.json", timeout=30)
    assert card.status_code == 200
    body = card.json()
    interfaces = {i["protocolBinding"]: i for i in body["supportedInterfaces"]}
    assert set(interfaces) == {"JSONRPC", "HTTP+JSON"}
    assert {i["protocolVersion"] for i in interfaces.values()} == {"1.0"}
    assert interfaces["HTTP+JSON"]["url"].endswith("/a2a")
    assert body["capabilities"]["streaming"] is True and body["capabilities"]["pushNotifications"] is True
    assert body["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert [e["uri"] for e in body["capabilities"]["extensions"]] == [
        "urn:dovecote:a2a:idempotency-key:v1",
        "urn:dovecote:a2a:stream-resume:v1",
        "urn:dovecote:a2a:signed-webhooks:v1",
    ]
    # Every other A2A route is behind the authorizer, as the rest of the API
    assert httpx.post(dev_runtime["endpoint"] + "/", json={}, timeout=30).status_code == 401


def test_a_blocking_send_answers_the_completed_task(a2a: A2A) -> None:
    task = a2a.task(message("tck-complete-task"))
    assert state(task) == "TASK_STATE_COMPLETED"
    assert task.status.message.parts[0].text == "Hello from TCK"
    assert task.status.timestamp.ToJsonString().endswith("Z") and task.context_id


def test_return_immediately_answers_at_once_and_the_task_completes_later(a2a: A2A) -> None:
    task = a2a.task(message("tck-complete-task"), immediately=True)
    assert state(task) == "TASK_STATE_SUBMITTED"
    deadline = time.monotonic() + 60
    while state(a2a.get(task.id)) != "TASK_STATE_COMPLETED":
        assert time.monotonic() < deadline, "the worker did not complete the task"
        time.sleep(0.5)


def test_input_required_then_the_next_message_continues_the_task(a2a: A2A) -> None:
    first = a2a.task(message("tck-input-required", "start"))
    assert state(first) == "TASK_STATE_INPUT_REQUIRED"
    second = a2a.task(message("tck-complete-task", "go on", task_id=first.id))
    assert state(second) == "TASK_STATE_COMPLETED" and second.id == first.id
    assert second.context_id == first.context_id  # inferred from the task
    assert [m.role for m in second.history] == [Role.ROLE_USER, Role.ROLE_AGENT] * 2
    assert [m.parts[0].text for m in a2a.get(first.id, history_length=1).history] == ["Hello from TCK"]
    with pytest.raises(UnsupportedOperationError):  # a completed task takes no more messages
        a2a.send(message("tck-complete-task", task_id=first.id))


def test_cancel_is_idempotent_and_a_completed_task_is_not_cancelable(a2a: A2A) -> None:
    waiting = a2a.task(message("tck-input-required"))
    assert state(a2a.cancel(waiting.id)) == "TASK_STATE_CANCELED"
    assert state(a2a.cancel(waiting.id)) == "TASK_STATE_CANCELED"
    done = a2a.task(message("tck-complete-task"))
    with pytest.raises(TaskNotCancelableError):
        a2a.cancel(done.id)


def test_list_filters_by_context_and_pages(a2a: A2A) -> None:
    context = f"ctx-{uuid.uuid4().hex[:8]}"
    # Blocking sends: the tasks have ended before the listing, so no update reorders them between pages
    made = {a2a.task(message("tck-complete-task", context_id=context)).id for _ in range(3)}
    seen: list[str] = []
    token = ""
    while True:
        page = a2a.list(context_id=context, page_size=2, page_token=token)
        assert page.total_size == 3 and all(not t.artifacts for t in page.tasks)
        seen.extend(t.id for t in page.tasks)
        token = page.next_page_token
        if not token:
            break
    assert sorted(seen) == sorted(made)


def test_an_unknown_task_and_another_authoritys_task_are_not_found(a2a: A2A, dev_runtime: dict[str, Any]) -> None:
    with pytest.raises(TaskNotFoundError):
        a2a.get(f"no-such-task-{uuid.uuid4().hex[:8]}")
    mine = a2a.task(message("tck-complete-task"), immediately=True)
    stranger = A2A(a2a.endpoint, fresh_authority(dev_runtime, "a2a-other").token("caller"), a2a.binding)
    with pytest.raises(TaskNotFoundError):
        stranger.get(mine.id)
    with pytest.raises(TaskNotFoundError):
        stranger.cancel(mine.id)


def test_an_idempotency_key_makes_a_retried_send_create_one_task(a2a: A2A) -> None:
    context = f"ctx-{uuid.uuid4().hex[:8]}"
    sent = message("tck-complete-task", context_id=context)
    key = f"key-{uuid.uuid4().hex}"
    first = a2a.task(sent, immediately=True, **{"Idempotency-Key": key})
    again = a2a.task(sent, **{"Idempotency-Key": key})  # the retry blocks: the task is completed by now
    assert again.id == first.id
    assert [t.id for t in a2a.list(context_id=context).tasks] == [first.id]


@pytest.mark.parametrize(
    ("prefix", "kind", "check"),
    [
        ("tck-artifact-text", "text", lambda p: p.text == "Generated text content"),
        (
            "tck-artifact-file",
            "raw",
            lambda p: (p.raw, p.filename, p.media_type) == (b"tck", "output.txt", "text/plain"),
        ),
        (
            "tck-artifact-file-url",
            "url",
            lambda p: (p.url, p.filename) == ("https://example.com/output.txt", "output.txt"),
        ),
        ("tck-artifact-data", "data", lambda p: dict(p.data.struct_value) == {"key": "value", "count": 42}),
    ],
)
def test_a_workers_artifact_reaches_the_client_as_its_part(
    a2a: A2A, prefix: str, kind: str, check: Callable[[Part], bool]
) -> None:
    task = a2a.task(message(prefix))
    assert state(task) == "TASK_STATE_COMPLETED" and len(task.artifacts) == 1
    part = task.artifacts[0].parts[0]
    assert part.WhichOneof("content") == kind and check(part)


def test_a_worker_may_answer_with_a_message(a2a: A2A) -> None:
    answer = a2a.send(message("tck-message-response"))
    assert answer.HasField("message") and answer.message.parts[0].text == "Direct message response"


def test_file_and_data_parts_survive_send_and_get_byte_for_byte(a2a: A2A, authority: Authority) -> None:
    from google.protobuf import json_format

    # Given a message with a file by URL (filename, mediaType), files as bytes (one of a textual type)
    # and a data part
    parts = [
        Part(url="https://example.com/q3/report.pdf?sig=a%20b", media_type="application/pdf", filename="Q3 report.pdf"),
        Part(raw=b"\x00\x01\xfftck", media_type="application/octet-stream", filename="blob.bin"),
        Part(raw=b"plain bytes", media_type="text/plain", filename="notes.txt"),
        json_format.ParseDict({"data": {"key": "välue", "list": [1, None, True], "n": 2.5}}, Part()),
    ]
    sent = Message(message_id=f"tck-complete-task-{uuid.uuid4().hex[:8]}", role=Role.ROLE_USER, parts=parts)
    # When it is sent, and the task read back
    task = a2a.task(sent)
    got = a2a.get(task.id)
    # Then the first message of its history has the same parts, byte for byte
    back = list(got.history[0].parts)
    assert [p.SerializeToString(deterministic=True) for p in back] == [
        p.SerializeToString(deterministic=True) for p in parts
    ]
    # And Dovecote holds the URL and the filenames as the parts' own, readable over its own API
    response = httpx.get(
        f"{authority.endpoint}/v1/tasks/{task.id}/messages",
        headers={"Authorization": f"Bearer {authority.token('caller')}"},
        timeout=30,
    )
    stored = response.json()["items"][0]["parts"]
    assert stored[0] == {
        "media_type": "application/pdf",
        "url": "https://example.com/q3/report.pdf?sig=a%20b",
        "filename": "Q3 report.pdf",
    }
    assert [p.get("filename") for p in stored] == ["Q3 report.pdf", "blob.bin", "notes.txt", None]


# ---- issue 29: every answer bounded; a keyed reply's conflicts; inputs protobuf JSON cannot hold ----------

RPC_HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}


def rpc(endpoint: str, token: str, method: str, params: Any, request_id: int = 5, **headers: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return httpx.post(
        endpoint + "/",
        json=body,
        headers={**RPC_HEADERS, "Authorization": f"Bearer {token}", **headers},
        timeout=60,
    )


def test_a_list_of_large_tasks_stays_within_lambdas_answer_limit(dev_runtime: dict[str, Any]) -> None:
    # 25 tasks of 256 KB of inline parts each: pageSize=100 with historyLength=100 was 6.4 MB in one
    # answer, over Lambda's 6 MB (the local gateway answers that 500, as API Gateway does)
    owner = fresh_authority(dev_runtime, "a2a-big")
    caller = owner.token("caller")
    parts = [{"media_type": "text/plain", "text": "p" * 8000}] * 32
    made = set()
    with httpx.Client(base_url=owner.endpoint, headers={"Authorization": f"Bearer {caller}"}, timeout=60) as http:
        for _ in range(25):
            task_id = f"big-{uuid.uuid4().hex[:8]}"
            body = {"command_id": f"c-{task_id}", "workspace": "ws", "id": task_id, "context": "big"}
            created = http.post("/v1/tasks", json={**body, "message": {"id": f"m-{task_id}", "parts": parts}})
            assert created.status_code == 201, created.text
            made.add(task_id)
    seen: list[str] = []
    token = ""
    while True:
        answer = rpc(owner.endpoint, caller, "ListTasks", {"pageSize": 100, "historyLength": 100, "pageToken": token})
        assert answer.status_code == 200 and len(answer.content) < 4_300_000, (answer.status_code, len(answer.content))
        page = answer.json()["result"]
        assert all(len(t["history"]) == 1 for t in page["tasks"])
        seen.extend(t["id"] for t in page["tasks"])
        token = page["nextPageToken"]
        if not token:
            break
    assert sorted(seen) == sorted(made)


def test_a_reply_under_a_used_key_is_replayed_or_refused_never_dropped(a2a: A2A) -> None:
    first = a2a.task(message("tck-input-required", "start"), immediately=False)
    assert state(first) == "TASK_STATE_INPUT_REQUIRED"
    key = f"reply-{uuid.uuid4().hex}"
    sent = message("tck-input-required", "the reply", task_id=first.id)
    assert state(a2a.task(sent, **{"Idempotency-Key": key})) == "TASK_STATE_INPUT_REQUIRED"
    again = a2a.task(sent, **{"Idempotency-Key": key})  # an exact retry: replays, no second reply
    assert again.id == first.id and len(a2a.get(first.id).history) == 4
    other = message("tck-input-required", "another reply", task_id=first.id)
    with pytest.raises(Exception, match="IDEMPOTENCY_CONFLICT|409|already used"):
        a2a.send(other, **{"Idempotency-Key": key})
    assert len(a2a.get(first.id).history) == 4  # nothing stored


@pytest.mark.parametrize(
    "part",
    ['{"data": 1e999}', '{"data": NaN}', '{"data": ' + "9" * 400 + "}", '{"text": "x", "metadata": {"k": NaN}}'],
)
def test_what_protobuf_json_cannot_hold_is_invalid_params_with_the_request_id(authority: Authority, part: str) -> None:
    body = (
        '{"jsonrpc": "2.0", "id": 77, "method": "SendMessage", "params": {"configuration": {"returnImmediately": true},'
        f' "message": {{"messageId": "m-{uuid.uuid4().hex[:8]}", "role": "ROLE_USER", "parts": [{part}]}}}}}}'
    )
    token = authority.token("caller")
    answer = httpx.post(
        authority.endpoint + "/", content=body, headers={**RPC_HEADERS, "Authorization": f"Bearer {token}"}, timeout=60
    )
    assert answer.status_code == 200 and answer.json()["id"] == 77
    assert answer.json()["error"]["code"] == -32602
    for role in (5, -1, "-5"):
        wrong = {"messageId": "m-role", "role": role, "parts": [{"text": "x"}]}
        refused = rpc(authority.endpoint, token, "SendMessage", {"message": wrong}, request_id=78)
        assert refused.json()["id"] == 78 and refused.json()["error"]["code"] == -32602


def test_one_authoritys_blocking_sends_are_bounded_the_rest_answer_at_once(dev_runtime: dict[str, Any]) -> None:
    import threading

    # Given an authority without a worker, and 12 blocking sends of it at once (the bound is 8)
    owner = fresh_authority(dev_runtime, "a2a-waits")
    caller = owner.token("caller")
    answers: list[tuple[float, dict[str, Any]]] = []
    lock = threading.Lock()
    started = time.monotonic()

    def send_one(i: int) -> None:
        sent = {"messageId": f"m-{i}", "role": "ROLE_USER", "parts": [{"text": f"wait {i}"}]}
        answer = rpc(owner.endpoint, caller, "SendMessage", {"message": sent}, request_id=i)
        with lock:
            answers.append((time.monotonic() - started, answer.json()))

    threads = [threading.Thread(target=send_one, args=(i,), daemon=True) for i in range(12)]
    for thread in threads:
        thread.start()
    # Then four answer at once, with the task as it stands, while eight wait
    deadline = time.monotonic() + 15
    while len(answers) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)
    with lock:
        early = list(answers)
    assert len(early) == 4, early
    assert {a["result"]["task"]["status"]["state"] for _, a in early} == {"TASK_STATE_SUBMITTED"}
    # And another authority is served meanwhile
    assert rpc(owner.endpoint, dev_runtime["tokens"]["caller"], "ListTasks", {"pageSize": 1}).status_code == 200
    # When the waiting tasks are canceled, the waits end with them
    listed = rpc(owner.endpoint, caller, "ListTasks", {"pageSize": 100}).json()["result"]["tasks"]
    assert len(listed) == 12
    for task in listed:
        assert rpc(owner.endpoint, caller, "CancelTask", {"id": task["id"]}).json()["result"]
    for thread in threads:
        thread.join(timeout=30)
    late = answers[4:]
    assert len(late) == 8 and {a["result"]["task"]["status"]["state"] for _, a in late} == {"TASK_STATE_CANCELED"}
    assert all(at < 25 for at, _ in answers)
