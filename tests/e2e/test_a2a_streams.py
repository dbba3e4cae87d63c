"""A2A streaming against `dovecote dev` plus the example A2A worker: a2a-sdk's own client with
`streaming=True` follows SendStreamingMessage and SubscribeToTask to completion over both bindings,
and every SSE event's `id:` is the task event sequence it reflects, so Last-Event-ID resumes a
subscription with nothing missed and nothing twice."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import uuid
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, SubscribeToTaskRequest, TaskState

from dovecote.platform import sse
from tests.e2e.conftest import TLS
from tests.support.authorities import Authority, fresh_authority
from tests.support.workers import a2a_world

BINDINGS = ["JSONRPC", "HTTP+JSON"]


authority, worker = a2a_world("a2a-streams", "a2a-streams")


def message(prefix: str, text: str = "hello", **fields: Any) -> Message:
    return Message(
        message_id=f"{prefix}-{uuid.uuid4().hex[:8]}", role=Role.ROLE_USER, parts=[Part(text=text)], **fields
    )


async def streamed(authority: Authority, binding: str, use: Any) -> list[Any]:
    auth = {"Authorization": f"Bearer {authority.token('caller')}"}
    async with httpx.AsyncClient(headers=auth, timeout=40, verify=TLS) as http:
        card = await A2ACardResolver(http, authority.endpoint).get_agent_card()
        assert card.capabilities.streaming
        config = ClientConfig(streaming=True, httpx_client=http, supported_protocol_bindings=[binding])
        client = ClientFactory(config).create(card)
        return [item async for item in use(client)]


def kinds(answers: list[Any]) -> list[str]:
    return [str(a.WhichOneof("payload")) for a in answers]


@pytest.mark.parametrize("binding", BINDINGS)
def test_send_streaming_message_follows_the_task_to_completion(
    binding: str, authority: Authority, worker: subprocess.Popen[str]
) -> None:
    answers = asyncio.run(
        streamed(
            authority,
            binding,
            lambda c: c.send_message(SendMessageRequest(message=message("tck-complete-task"))),
        )
    )
    assert kinds(answers)[0] == "task"
    assert kinds(answers)[1:] and set(kinds(answers)[1:]) <= {"status_update", "artifact_update"}
    last = answers[-1].status_update
    assert last.status.state == TaskState.TASK_STATE_COMPLETED
    assert [p.text for p in last.status.message.parts] == ["Hello from TCK"]


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_streamed_reply_follows_an_input_required_task_to_completion(
    binding: str, authority: Authority, worker: subprocess.Popen[str]
) -> None:
    async def flow(client: Any) -> Any:
        first = [a async for a in client.send_message(SendMessageRequest(message=message("tck-input-required")))]
        task = first[0].task
        assert first[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        reply = message("tck-complete-task", "go on", task_id=task.id, context_id=task.context_id)
        # The first stream closed at input_required (an interrupted state); the reply's runs on.
        async for answer in client.send_message(SendMessageRequest(message=reply)):
            yield answer

    answers = asyncio.run(streamed(authority, binding, flow))
    assert answers[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


def worked_while_followed(
    dev_runtime: dict[str, Any], binding: str, name: str, finish: Any
) -> tuple[Authority, str, list[Any]]:
    """A task sent over A2A to a fresh authority with no example worker, a SubscribeToTask stream
    opened on it, then the test as the worker: it acquires and accepts the task and calls
    `finish(worker, task_id, revision, fence)`. Returns the authority, the task id and what the
    stream sent."""
    from dovecote.client import DovecoteClient

    quiet = fresh_authority(dev_runtime, name)
    worker = DovecoteClient(quiet.endpoint, quiet.token("worker", f"{name}-worker"))
    auth = {"Authorization": f"Bearer {quiet.token('caller')}", "A2A-Version": "1.0"}
    body = {
        "message": {"messageId": f"m-{name}", "role": "ROLE_USER", "parts": [{"text": "follow me"}]},
        "configuration": {"returnImmediately": True},
    }
    created = httpx.post(quiet.endpoint + "/a2a/message:send", json=body, headers=auth, timeout=30, verify=TLS)
    task_id = created.json()["task"]["id"]

    async def follow(client: Any) -> Any:
        async def act() -> None:
            await asyncio.sleep(1.0)  # the subscription is open before anything happens to the task
            assignment = await asyncio.to_thread(worker.acquire, task_id)
            task = await asyncio.to_thread(worker.accept, task_id, assignment["task"]["revision"], assignment["fence"])
            await asyncio.to_thread(finish, worker, task_id, task["revision"], assignment["fence"])

        acting = asyncio.create_task(act())
        async for answer in client.subscribe(SubscribeToTaskRequest(id=task_id)):
            yield answer
        await acting

    return quiet, task_id, asyncio.run(streamed(quiet, binding, follow))


@pytest.mark.parametrize("binding", BINDINGS)
def test_subscribe_to_task_follows_a_task_to_completion(binding: str, dev_runtime: dict[str, Any]) -> None:
    def complete(worker: Any, task_id: str, revision: int, fence: int) -> None:
        worker.complete(task_id, revision, fence, "all done")

    _, _, answers = worked_while_followed(dev_runtime, binding, "a2a-sub", complete)
    assert kinds(answers)[0] == "task"
    states = [a.status_update.status.state for a in answers[1:]]
    assert states == [TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED]
    assert [p.text for p in answers[-1].status_update.status.message.parts] == ["all done"]


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_failed_task_streams_the_workers_reason_as_the_status_message_and_get_task_says_it_too(
    binding: str, dev_runtime: dict[str, Any]
) -> None:
    reason = "the disk is full <script>alert(1)</script>"

    def fail(worker: Any, task_id: str, revision: int, fence: int) -> None:
        worker.fail(task_id, revision, fence, reason=reason)

    quiet, task_id, answers = worked_while_followed(dev_runtime, binding, "a2a-fail", fail)
    last = answers[-1].status_update.status
    assert last.state == TaskState.TASK_STATE_FAILED
    assert last.message.role == Role.ROLE_AGENT and [p.text for p in last.message.parts] == [reason]
    # The id is the event's: a resumed stream or a notification's retry carries the same message.
    auth = {"Authorization": f"Bearer {quiet.token('caller')}"}
    events = httpx.get(f"{quiet.endpoint}/v1/tasks/{task_id}/events", headers=auth, timeout=30, verify=TLS).json()
    assert last.message.message_id == f"{task_id}:event:{events['items'][-1]['sequence']}"

    async def get(client: Any) -> Any:
        yield await client.get_task(GetTaskRequest(id=task_id))

    # GetTask explains the failed status with the same message.
    status = asyncio.run(streamed(quiet, binding, get))[0].status
    assert status.state == TaskState.TASK_STATE_FAILED and status.message == last.message


def test_sse_ids_are_sequences_and_last_event_id_resumes_a_subscription(
    authority: Authority, worker: subprocess.Popen[str]
) -> None:
    """Over the raw wire: SendStreamingMessage's ids are the task's event sequences and its stream
    closes at input_required; two SubscribeToTask streams, with Last-Event-ID 0 and the last id,
    each send the Task first (id: the sequence it was read at), then exactly the updates after their
    id, through the reply, to the completion, where they close."""
    auth = {"Authorization": f"Bearer {authority.token('caller')}", "A2A-Version": "1.0"}
    text = {"role": "ROLE_USER", "parts": [{"text": "ask me"}]}
    sent = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": {"messageId": f"tck-input-required-{uuid.uuid4().hex[:6]}", **text}},
    }
    with httpx.Client(base_url=authority.endpoint, headers=auth, timeout=40, verify=TLS) as http:
        answer = http.post("/", json=sent, headers={"Accept": "text/event-stream"})
        assert answer.headers["content-type"].startswith("text/event-stream")
        messages = list(sse.parse(answer.text.split("\n")))
        results = [m.json()["result"] for m in messages]
        task_id = results[0]["task"]["id"]
        ids = [int(m.id) for m in messages if m.id is not None]
        assert ids == sorted(ids) and len(ids) == len(messages)
        events = http.get(f"/v1/tasks/{task_id}/events", headers=auth).json()["items"]
        assert ids[-1] == events[-1]["sequence"] and events[-1]["state"] == "input_required"
        assert results[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        count = len(events)

        got: dict[int, list[sse.Message]] = {0: [], count: []}
        opened = {after: threading.Event() for after in got}

        def subscribe(after: int) -> None:
            url = f"/a2a/tasks/{task_id}:subscribe"
            with http.stream("POST", url, headers={"Last-Event-ID": str(after)}, json={}) as streamed:
                for message in sse.parse(streamed.iter_lines()):
                    got[after].append(message)
                    opened[after].set()

        threads = [threading.Thread(target=subscribe, args=(after,), daemon=True) for after in got]
        for thread in threads:
            thread.start()
        assert all(event.wait(20) for event in opened.values())
        reply = {"messageId": f"tck-complete-task-{uuid.uuid4().hex[:6]}", "taskId": task_id, **text}
        rpc = {"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": reply}}
        assert "result" in http.post("/", json=rpc).json()
        for thread in threads:
            thread.join(30)
            assert not thread.is_alive(), "a subscription did not close at the terminal state"
        every = http.get(f"/v1/tasks/{task_id}/events", headers=auth).json()["items"]
        assert every[-1]["state"] == "completed"
        for after, stream in got.items():
            assert "task" in stream[0].json() and int(stream[0].id or -1) == count
            assert [int(m.id or -1) for m in stream[1:]] == [e["sequence"] for e in every if e["sequence"] > after]
        refused = http.post(f"/a2a/tasks/{task_id}:subscribe", json={})
        assert refused.status_code == 400 and "terminal" in json.dumps(refused.json())


# What a browser may send cross-site without a CORS preflight, and no Content-Type at all.
NOT_JSON = [None, "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded"]


@pytest.mark.parametrize("content_type", NOT_JSON)
def test_a_streaming_request_that_does_not_declare_json_is_refused_as_a_buffered_one(
    authority: Authority, content_type: str | None
) -> None:
    """Every streaming POST, on both bindings, is refused before anything is read or stored, with
    the very answer its buffered sibling gives (ContentTypeNotSupported: JSON-RPC's error object at
    200, HTTP+JSON's 415), never a stream and never a later error such as "message is required"."""
    auth = {"Authorization": f"Bearer {authority.token('caller')}", "A2A-Version": "1.0"}
    headers = {**auth, **({"Content-Type": content_type} if content_type else {})}
    context = f"ctx-{uuid.uuid4().hex[:10]}"
    said = {"messageId": f"m-{uuid.uuid4().hex[:8]}", "contextId": context, "role": "ROLE_USER"}
    sent = {"message": {**said, "parts": [{"text": "hello"}]}}

    def rpc(method: str, params: dict[str, Any]) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).encode()

    # (streaming request, its buffered sibling): path and body.
    pairs = [
        (("/", rpc("SendStreamingMessage", sent)), ("/", rpc("SendMessage", sent))),
        (("/", rpc("SubscribeToTask", {"id": "t-none"})), ("/", rpc("GetTask", {"id": "t-none"}))),
        (("/a2a/message:stream", json.dumps(sent).encode()), ("/a2a/message:send", json.dumps(sent).encode())),
        (("/a2a/tasks/t-none:subscribe", b"{}"), ("/a2a/tasks/t-none:cancel", b"{}")),
    ]
    # HTTP+JSON SubscribeToTask has no body (a2a-sdk's client sends neither body nor Content-Type):
    # without a body, what it declares must still be JSON; declaring nothing is that client's request.
    if content_type:
        pairs.append((("/a2a/tasks/t-none:subscribe", b""), ("/a2a/tasks/t-none:cancel", b"")))
    with httpx.Client(base_url=authority.endpoint, headers=auth, timeout=40, verify=TLS) as http:
        for (path, body), (buffered_path, buffered_body) in pairs:
            buffered = http.post(buffered_path, content=buffered_body, headers=headers)
            # Read only past the status line: a stream that opened would run to its time bound.
            with http.stream("POST", path, content=body, headers=headers) as streamed:
                assert not streamed.headers["content-type"].startswith("text/event-stream"), path
                streamed.read()
            assert (streamed.status_code, streamed.json()) == (buffered.status_code, buffered.json()), path
            error = streamed.json()["error"]
            if path == "/":
                assert streamed.status_code == 200 and error["code"] == -32005, error
            else:
                assert streamed.status_code == 415, error
            assert "requests are JSON" in error["message"], error
        if not content_type:
            bare = http.post("/a2a/tasks/t-none:subscribe", headers=auth)
            assert (bare.status_code, bare.json()["error"]["status"]) == (404, "NOT_FOUND"), bare.text
        # Nothing was stored: the context is empty, and the same message declared JSON is served.
        assert http.get(f"/v1/contexts/{context}/tasks", headers=auth).json()["items"] == []
        served = http.post("/a2a/message:send", json=sent)
        assert served.status_code == 200, served.text
        assert len(http.get(f"/v1/contexts/{context}/tasks", headers=auth).json()["items"]) == 1
