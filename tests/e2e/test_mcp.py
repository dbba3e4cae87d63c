"""`dovecote mcp` end to end: an MCP client session (the `mcp` SDK's stdio client) launches
`python -m dovecote.cli mcp` with DOVECOTE_ENDPOINT / DOVECOTE_TOKEN against a real `dovecote dev`,
lists the tools and calls each one; a streamable HTTP session against `--http PORT` too."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from dovecote.client import DovecoteClient
from tests.conftest import DATA, ROOT
from tests.e2e.conftest import start_dev
from tests.unit.test_mcp import READ_ONLY

TRANSCRIPTS = DATA / "transcripts"
SAMPLE = TRANSCRIPTS / "claude-code" / "obra-episodic-memory__short-conversation.jsonl"

# A caller's tools: every read-only one (the unit suite's list), and the caller's writes.
CALLER_TOOLS = READ_ONLY | {
    "notes_put",
    "notes_delete",
    "tasks_create",
    "tasks_reply",
    "tasks_cancel",
    "memory_submit",
    "memory_judge",
    "webhooks_add",
    "webhooks_delete",
}
WORKER_TOOLS = {
    "tasks_claim",
    "tasks_accept",
    "tasks_request_input",
    "tasks_complete",
    "tasks_fail",
    "tasks_freeze_artifact",
}


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def stdio(dev: dict[str, Any], role: str) -> StdioServerParameters:
    env = {"DOVECOTE_ENDPOINT": dev["endpoint"], "DOVECOTE_TOKEN": dev["tokens"][role]}
    return StdioServerParameters(command=sys.executable, args=["-m", "dovecote.cli", "mcp"], env=env, cwd=str(ROOT))


def session(server: Any, body: Callable[[Client], Awaitable[None]]) -> None:
    async def run() -> None:
        async with Client(server) as client:
            await body(client)

    anyio.run(run)


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A call that must succeed: its structured result, which is the JSON text too."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, (tool, result.content)
    assert result.structured_content is not None
    text = result.content[0]
    assert getattr(text, "type", "") == "text" and json.loads(text.text) == result.structured_content  # type: ignore[union-attr]
    return dict(result.structured_content)


async def fails(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A call that must fail as a tool error whose text is the error envelope."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, (tool, result.content)
    document = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert "Traceback" not in result.content[0].text  # type: ignore[union-attr]
    assert document == result.structured_content
    return dict(document["error"])


@pytest.fixture(scope="module")
def dev_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A runtime of this module's own: claims take the oldest claimable task, and the shared runtime
    holds hundreds left by other tests (whose own workers must not see theirs released by these)."""
    with start_dev(tmp_path_factory.mktemp("dev-mcp")) as runtime:
        yield runtime


async def claim_ours(client: Client, dev: dict[str, Any], task_id: str) -> dict[str, Any]:
    """Claim through the tool until this test's task comes. Other tests' tasks in the same runtime
    may come first: each is released at once (its lease fenced by its owner) for them to take."""
    with DovecoteClient(dev["endpoint"], dev["tokens"]["worker"]) as sdk:
        for _ in range(20):
            assignment = (await call(client, "tasks_claim", wait_seconds=2))["assignment"]
            if assignment is None:
                continue
            if assignment["task"]["id"] == task_id:
                return dict(assignment)
            sdk.release(assignment["task"]["id"], assignment["fence"])
    raise AssertionError(f"task {task_id} never came to a claim")


def test_caller_session_lists_tools_without_worker_tools_and_notes_round_trip(dev_runtime: dict[str, Any]) -> None:
    key = uid("k")

    async def body(client: Client) -> None:
        listed = await client.list_tools()
        names = {tool.name for tool in listed.tools}
        assert names == CALLER_TOOLS  # a caller token: the worker tools are not offered
        for tool in listed.tools:
            assert tool.description and tool.input_schema["type"] == "object"
        put = next(t for t in listed.tools if t.name == "notes_put")
        assert set(put.input_schema["required"]) == {"key", "run", "name", "text"}
        assert "description" in put.input_schema["properties"]["key"]

        stored = await call(client, "notes_put", key=key, run=1, name="plan.md", text="step one")
        assert stored["size"] == len("step one") and stored["key"] == key
        by_coordinates = await call(client, "notes_get", key=key, run=1, name="plan.md")
        by_ref = await call(client, "notes_get", ref=stored["ref"])
        assert by_coordinates["text"] == by_ref["text"] == "step one"
        for i in range(3):
            await call(client, "notes_put", key=key, run=2, name=f"n{i}", text=str(i))
        first = await call(client, "notes_list", key=key, limit=2)
        assert len(first["items"]) == 2 and first["cursor"]
        rest = await call(client, "notes_list", key=key, limit=2, cursor=first["cursor"])
        assert len(first["items"] + rest["items"]) == 4 and not rest.get("cursor")

        resource = await client.read_resource(f"dovecote://notes/{stored['ref']}")
        assert resource.contents[0].text == "step one"  # type: ignore[union-attr]

        assert await call(client, "notes_delete", ref=stored["ref"]) == {"ref": stored["ref"], "deleted": True}
        missing = await fails(client, "notes_get", ref=stored["ref"])
        assert missing["code"] == "not_found" and missing["status"] == 404
        usage = await fails(client, "notes_get", key=key)
        assert usage["code"] == "invalid_argument" and usage["details"]["missing"] == ["run", "name"]
        bad = await fails(client, "notes_put", key=key, run="one", name="x", text="y")
        assert bad["code"] == "invalid_argument" and bad["details"]["errors"][0]["field"] == "run"

    session(stdio(dev_runtime, "caller"), body)


def test_an_admin_session_is_not_steered_into_the_admin_routes(dev_runtime: dict[str, Any]) -> None:
    """Issue 15 item 1's reproduction, over MCP with an admin token: a ref that walks out of the
    notes route neither revokes a token nor lists them, and the token still authenticates."""
    with DovecoteClient(dev_runtime["endpoint"], dev_runtime["tokens"]["admin"]) as admin:
        victim = admin.create_token("dev", "caller")
    log = Path(dev_runtime["log"])

    def admin_requests() -> list[str]:
        return [line for line in log.read_text(errors="replace").splitlines() if "/v1/admin/" in line]

    before = admin_requests()
    assert any(" POST /v1/admin/tokens 201 " in line for line in before)  # the log does show them

    async def body(client: Client) -> None:
        revoke = await fails(client, "notes_delete", ref=f"../admin/tokens/{victim['token_id']}")
        assert revoke["code"] == "invalid_argument" and revoke["status"] == 0
        listing = await fails(client, "notes_get", ref="../admin/tokens?")
        assert listing["code"] == "invalid_argument"
        # Encoded by the model itself: sent as one segment of the notes route, refused there.
        encoded = await fails(client, "notes_delete", ref=f"..%2Fadmin%2Ftokens%2F{victim['token_id']}")
        assert encoded["status"] == 404 and encoded["code"] == "not_found"
        dotted = await fails(client, "notes_get", ref="%2e%2e")
        assert dotted["status"] == 404

    session(stdio(dev_runtime, "admin"), body)
    assert admin_requests() == before
    with DovecoteClient(dev_runtime["endpoint"], victim["token"]) as still_valid:
        assert "items" in still_valid.list_notes(limit=1)


def test_task_path_caller_then_worker_and_revision_conflict(dev_runtime: dict[str, Any]) -> None:
    created: dict[str, Any] = {}
    context = uid("ctx")

    async def as_caller(client: Client) -> None:
        command = uid("c")
        answer = await call(client, "tasks_create", text="summarize the log", context=context, command_id=command)
        assert set(answer) == {"task"}  # the HTTP answer's envelope and keys
        task = answer["task"]
        assert task["state"] == "submitted" and task["id"].startswith("t-")
        # The same command id again replays: the same task, not a second one.
        again = await call(client, "tasks_create", text="summarize the log", context=context, command_id=command)
        assert again["task"]["id"] == task["id"]
        listed = await call(client, "tasks_list", context=context)
        assert [t["id"] for t in listed["items"]] == [task["id"]]
        conflict = await fails(client, "tasks_cancel", task_id=task["id"], expected_revision=task["revision"] + 5)
        assert conflict["code"] == "revision_conflict" and conflict["status"] == 409
        assert conflict["details"]["expected"] == task["revision"] + 5
        assert conflict["details"]["actual"] == task["revision"]
        snapshot = await client.read_resource(f"dovecote://tasks/{task['id']}")
        assert json.loads(snapshot.contents[0].text)["task"]["id"] == task["id"]  # type: ignore[union-attr]
        created.update(task)

    session(stdio(dev_runtime, "caller"), as_caller)

    async def as_worker(client: Client) -> None:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == CALLER_TOOLS | WORKER_TOOLS
        assignment = await claim_ours(client, dev_runtime, created["id"])
        task, fence = assignment["task"], assignment["fence"]
        accepted = (
            await call(client, "tasks_accept", task_id=task["id"], expected_revision=task["revision"], fence=fence)
        )["task"]
        assert accepted["state"] == "working"
        frozen = await call(
            client,
            "tasks_freeze_artifact",
            task_id=task["id"],
            expected_revision=accepted["revision"],
            fence=fence,
            artifact_id=uid("a"),
            expected_base_revision="rev-1",
            text="--- a\n+++ b\n",
        )
        assert frozen["artifact"]["state"] and frozen["task"]["revision"] > accepted["revision"]
        done = await call(
            client,
            "tasks_complete",
            task_id=task["id"],
            expected_revision=frozen["task"]["revision"],
            fence=fence,
            text="3 errors, all timeouts",
            artifact_id=frozen["artifact"]["id"],
        )
        assert done["task"]["state"] == "completed"
        stale = await fails(
            client, "tasks_fail", task_id=task["id"], expected_revision=done["task"]["revision"], fence=fence
        )
        assert stale["code"] in ("terminal_task", "stale_lease", "invalid_transition")

    session(stdio(dev_runtime, "worker"), as_worker)

    async def follow(client: Client) -> None:
        events = await call(client, "tasks_events", task_id=created["id"])
        assert [e["state"] for e in events["items"]][-1] == "completed"
        messages = await call(client, "tasks_messages", task_id=created["id"])
        texts = [p.get("text") for m in messages["items"] for p in m["parts"]]
        assert texts == ["summarize the log", "3 errors, all timeouts"]
        answer = messages["items"][1]
        one = await call(client, "tasks_message", task_id=created["id"], message_id=answer["id"])
        assert one == {"message": answer}
        got = await call(client, "tasks_get", task_id=created["id"])
        assert got["task"]["state"] == "completed"

    session(stdio(dev_runtime, "caller"), follow)


def test_input_required_reply_and_fail(dev_runtime: dict[str, Any]) -> None:
    with DovecoteClient(dev_runtime["endpoint"], dev_runtime["tokens"]["caller"]) as sdk:
        task = sdk.create_task(uid("t"), "which log?", context=uid("ctx"))
    worker = stdio(dev_runtime, "worker")
    state: dict[str, Any] = {}

    async def ask(client: Client) -> None:
        assignment = await claim_ours(client, dev_runtime, task["id"])
        fence, rev = assignment["fence"], assignment["task"]["revision"]
        rev = (await call(client, "tasks_accept", task_id=task["id"], expected_revision=rev, fence=fence))["task"][
            "revision"
        ]
        asked = await call(
            client, "tasks_request_input", task_id=task["id"], expected_revision=rev, fence=fence, text="which one?"
        )
        assert asked["task"]["state"] == "input_required"
        state.update(fence=fence, revision=asked["task"]["revision"])

    session(worker, ask)

    async def reply(client: Client) -> None:
        replied = await call(
            client, "tasks_reply", task_id=task["id"], expected_revision=state["revision"], text="the API's"
        )
        assert replied["task"]["state"] == "working"
        state["revision"] = replied["task"]["revision"]

    session(stdio(dev_runtime, "caller"), reply)

    async def give_up(client: Client) -> None:
        failed = await call(
            client,
            "tasks_fail",
            task_id=task["id"],
            expected_revision=state["revision"],
            fence=state["fence"],
            reason="the API has no such endpoint",
        )
        assert failed["task"]["state"] == "failed"

    session(worker, give_up)

    async def read_why(client: Client) -> None:
        last = (await call(client, "tasks_events", task_id=task["id"]))["items"][-1]
        assert (last["type"], last["reason"]) == ("task_failed", "the API has no such endpoint")

    session(stdio(dev_runtime, "caller"), read_why)

    async def cancel_other(client: Client) -> None:
        other = (await call(client, "tasks_create", text="never mind"))["task"]
        cancelled = await call(client, "tasks_cancel", task_id=other["id"], expected_revision=other["revision"])
        assert cancelled["task"]["state"] == "canceled"

    session(stdio(dev_runtime, "caller"), cancel_other)


def test_recall_tools_after_pushing_a_transcript(dev_runtime: dict[str, Any]) -> None:
    project = uid("proj")
    with DovecoteClient(dev_runtime["endpoint"], dev_runtime["tokens"]["caller"]) as sdk:
        pushed = sdk.push_transcript(SAMPLE, "claude-code-jsonl", project=project)
    assert pushed["messages_indexed"] > 0

    async def body(client: Client) -> None:
        found = await call(client, "recall_search", q="Employee dataclass", project=project)
        # The completeness report and the warnings are data in the result.
        assert "complete" in found and "warnings" in found and isinstance(found["warnings"], list)
        assert found["results"], found
        ref = found["results"][0]["read_ref"]
        read = await call(client, "recall_read", ref=ref, budget=300)
        assert read["messages"]
        assert sum(len(m["text"]) for m in read["messages"]) <= 300
        outline = await call(client, "recall_outline", session=pushed["session_id"])
        assert outline["session_id"] if "session_id" in outline else outline
        topics = await call(client, "recall_topics", project=project)
        assert isinstance(topics, dict)
        bad = await fails(client, "recall_read", ref=ref, budget=-1)
        assert bad["code"] == "invalid_argument"

    session(stdio(dev_runtime, "caller"), body)


def test_memory_tools_submit_wait_list_relations_judge(dev_runtime: dict[str, Any]) -> None:
    scope = uid("scope")

    async def body(client: Client) -> None:
        first = await call(
            client, "memory_submit", scope=scope, content="The retry limit is 5", tags=["subject:retry-limit"]
        )
        assert first["status"] == "queued" and first["id"].startswith("mw-")
        second = await call(
            client, "memory_submit", scope=scope, content="The retry limit is 7", tags=["subject:retry-limit"]
        )
        settled = await call(client, "memory_status", write_id=first["id"], wait=20)
        assert settled["status"] == "complete"
        status = await call(client, "memory_status", write_id=second["id"], wait=20)
        assert status["status"] == "complete" and status["evidence"]["candidates"]
        page = await call(client, "memory_list", scope=scope, limit=1)
        rest = await call(client, "memory_list", scope=scope, limit=1, cursor=page["cursor"])
        assert [m["id"] for m in page["items"] + rest["items"]] == [first["id"], second["id"]]
        relations = await call(client, "memory_relations", scope=scope, status="pending")
        (relation,) = relations["items"]
        command = uid("c")
        judged = await call(
            client, "memory_judge", relation_id=relation["id"], decision="confirmed", note="7 holds", command_id=command
        )
        assert set(judged) == {"relation"} and judged["relation"]["status"] == "confirmed"
        replay = await call(
            client,
            "memory_judge",
            relation_id=relation["id"],
            decision="confirmed",
            note="7 holds",
            command_id=command,
        )
        assert replay["relation"] == judged["relation"]
        conflict = await fails(client, "memory_judge", relation_id=relation["id"], decision="dismissed")
        assert conflict["code"] == "judgment_conflict"

    session(stdio(dev_runtime, "caller"), body)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server(dev_runtime: dict[str, Any], tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")}
    env.update(DOVECOTE_ENDPOINT=dev_runtime["endpoint"], DOVECOTE_TOKEN=dev_runtime["tokens"]["caller"])
    log = (tmp_path / "mcp.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "dovecote.cli", "mcp", "--http", str(port)], cwd=ROOT, env=env, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert process.poll() is None, (tmp_path / "mcp.log").read_text()
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def test_streamable_http_session(http_server: str) -> None:
    key = uid("k")

    async def body(client: Client) -> None:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == CALLER_TOOLS
        stored = await call(client, "notes_put", key=key, run=1, name="over-http", text="hi")
        assert (await call(client, "notes_get", ref=stored["ref"]))["text"] == "hi"

    session(http_server, body)
