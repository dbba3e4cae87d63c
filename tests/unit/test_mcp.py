"""The MCP server's own rules, in process (the `mcp` SDK's in-memory client, no Dovecote behind
it): tool schemas from typed parameters, ref resolution, and every failure as the error envelope."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ValidationError

from dovecote.client import DovecoteClient, DovecoteError, note_ref
from dovecote.mcp.errors import DovecoteToolError, error_document, failure_document, tool_error
from dovecote.mcp.notes import resolve_ref
from dovecote.mcp.server import build_server, may_work

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens, the connection is refused


def offline_client() -> DovecoteClient:
    return DovecoteClient(UNREACHABLE, "dvc_token", max_attempts=1, timeout=2)


def call(tool: str, arguments: dict[str, Any], *, worker_tools: bool = True) -> Any:
    async def run() -> Any:
        async with Client(build_server(offline_client(), worker_tools=worker_tools)) as client:
            return await client.call_tool(tool, arguments)

    return anyio.run(run)


def schemas(worker_tools: bool) -> dict[str, dict[str, Any]]:
    async def run() -> dict[str, dict[str, Any]]:
        tools = await build_server(offline_client(), worker_tools=worker_tools).list_tools()
        return {tool.name: tool.input_schema for tool in tools}

    return anyio.run(run)


def described(prop: dict[str, Any]) -> bool:
    return bool(prop.get("description")) or any(option.get("description") for option in prop.get("anyOf", []))


def test_every_parameter_of_every_tool_is_typed_and_described() -> None:
    tools = schemas(worker_tools=True)
    assert len(tools) == 33
    for name, schema in tools.items():
        assert schema["type"] == "object", name
        for field, prop in schema["properties"].items():
            assert described(prop), (name, field)
            assert "type" in prop or "anyOf" in prop or "enum" in prop or "$ref" in prop, (name, field)


def test_parameter_names_follow_the_http_api() -> None:
    tools = schemas(worker_tools=True)
    assert {"key", "run", "name", "text", "author"} <= set(tools["notes_put"]["properties"])
    assert set(tools["tasks_reply"]["required"]) == {"task_id", "expected_revision", "text"}
    assert "command_id" in tools["tasks_reply"]["properties"]
    assert set(tools["tasks_complete"]["required"]) == {"task_id", "expected_revision", "fence", "text"}
    assert tools["recall_search"]["required"] == ["q"]
    assert tools["tasks_claim"]["properties"]["wait_seconds"]["maximum"] == 20
    assert tools["memory_judge"]["properties"]["decision"]["enum"] == ["confirmed", "dismissed"]


def test_worker_tools_exist_only_when_asked_for() -> None:
    assert not {n for n in schemas(worker_tools=False) if n in ("tasks_claim", "tasks_complete")}
    assert {"tasks_claim", "tasks_complete"} <= set(schemas(worker_tools=True))


def test_may_work_is_false_when_the_api_cannot_answer() -> None:
    assert may_work(offline_client()) is False


@pytest.mark.parametrize(
    ("ref", "key", "run", "name", "expected"),
    [
        ("a" * 64, None, None, None, "a" * 64),
        (None, "k", 1, "n", note_ref("k", 1, "n", "me")),
        (None, "k", 0, "n", note_ref("k", 0, "n", "me")),  # run 0 is a run, not a missing one
    ],
)
def test_resolve_ref(ref: str | None, key: str | None, run: int | None, name: str | None, expected: str) -> None:
    assert resolve_ref(ref, key, run, name, "me") == expected


@pytest.mark.parametrize(
    ("ref", "key", "run", "name", "missing"),
    [
        (None, "k", None, None, ["run", "name"]),
        (None, None, None, None, ["key", "run", "name"]),
        ("a", "k", 1, "n", None),
    ],
)
def test_resolve_ref_refuses_both_or_neither(
    ref: str | None, key: str | None, run: int | None, name: str | None, missing: list[str] | None
) -> None:
    with pytest.raises(DovecoteError) as caught:
        resolve_ref(ref, key, run, name, "")
    assert caught.value.code == "invalid_argument"
    assert caught.value.details.get("missing") == missing


def test_error_document_carries_code_facts_and_the_command_to_retry() -> None:
    conflict = DovecoteError(409, "revision_conflict", "expected 3, actual 4", {"expected": 3, "actual": 4})
    assert error_document(conflict) == {
        "error": {
            "code": "revision_conflict",
            "message": "expected 3, actual 4",
            "details": {"expected": 3, "actual": 4},
            "status": 409,
            "retryable": False,
        }
    }
    cut = DovecoteError(0, "unavailable", "cannot reach Dovecote", command_id="c-1")
    error = error_document(cut)["error"]
    assert error["retryable"] is True and error["command_id"] == "c-1" and "command_id c-1" in error["message"]
    crash = error_document(KeyError("task"))["error"]
    assert crash["code"] == "internal" and crash["message"] == "KeyError: 'task'"


def test_failure_document_finds_ours_validation_and_unknown_tools() -> None:
    ours = tool_error(DovecoteError(404, "not_found", "note not found"))
    wrapped = ToolError("Error executing tool notes_get: ...")
    wrapped.__cause__ = ours
    assert failure_document(wrapped) == ours.document

    class Args(BaseModel):
        run: int

    with pytest.raises(ValidationError) as invalid:
        Args.model_validate({"run": "one"})
    bad = ToolError("Error executing tool notes_put: ...")
    bad.__cause__ = invalid.value
    error = failure_document(bad)["error"]
    assert error["code"] == "invalid_argument" and error["details"]["errors"][0]["field"] == "run"
    assert "one" not in json.dumps(error)  # the rejected value is the caller's data: not echoed

    assert failure_document(ToolError("Unknown tool: nope"))["error"]["code"] == "unknown_tool"
    assert isinstance(ours, DovecoteToolError) and json.loads(str(ours)) == ours.document


def test_a_call_that_cannot_reach_dovecote_is_a_tool_error_with_its_command_id() -> None:
    result = call("tasks_cancel", {"task_id": "t1", "expected_revision": 1, "command_id": "c-fixed"})
    assert result.is_error
    document = json.loads(result.content[0].text)
    assert document == result.structured_content
    assert document["error"]["code"] == "unavailable" and document["error"]["retryable"] is True
    assert document["error"]["command_id"] == "c-fixed"
    assert "Traceback" not in result.content[0].text


def test_bad_arguments_and_unknown_tools_are_tool_errors_not_protocol_errors() -> None:
    bad = call("tasks_claim", {"wait_seconds": 99})
    assert bad.is_error and json.loads(bad.content[0].text)["error"]["details"]["errors"][0]["field"] == "wait_seconds"
    unknown = call("tasks_claim", {}, worker_tools=False)
    assert unknown.is_error and json.loads(unknown.content[0].text)["error"]["code"] == "unknown_tool"


def annotations(worker_tools: bool = True) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        tools = await build_server(offline_client(), worker_tools=worker_tools).list_tools()
        return {tool.name: tool.annotations for tool in tools}

    return anyio.run(run)


# Issue 15 item 1: a client asks a person before a destructive call. Decided tool by tool
# (dovecote/mcp/annotations.py says why): these and no others.
DESTRUCTIVE = {"notes_put", "notes_delete", "tasks_cancel", "tasks_fail", "webhooks_add", "webhooks_delete"}
READ_ONLY = {
    "whoami",
    "notes_get",
    "notes_list",
    "tasks_get",
    "tasks_list",
    "tasks_messages",
    "tasks_message",
    "tasks_events",
    "tasks_grants",
    "recall_search",
    "recall_read",
    "recall_outline",
    "recall_topics",
    "memory_status",
    "memory_list",
    "memory_relations",
    "webhooks_list",
    "webhooks_get",
}
# A repeat with the same arguments adds something new: a task, a memory write, another lease.
NOT_IDEMPOTENT = {"tasks_create", "tasks_claim", "memory_submit"}


def test_every_tool_states_every_hint() -> None:
    hints = annotations()
    assert len(hints) == 33
    for name, hint in hints.items():
        assert hint is not None, name
        for field in ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint"):
            assert isinstance(getattr(hint, field), bool), (name, field)
    # Only webhooks_add reaches outside: it sends the task's events to the URL it is given.
    assert {n for n, h in hints.items() if h.open_world_hint} == {"webhooks_add"}


def test_the_destructive_read_only_and_idempotent_sets_are_exactly_these() -> None:
    hints = annotations()
    assert {n for n, h in hints.items() if h.destructive_hint} == DESTRUCTIVE
    assert {n for n, h in hints.items() if h.read_only_hint} == READ_ONLY
    assert {n for n, h in hints.items() if not h.idempotent_hint} == NOT_IDEMPOTENT
    assert not DESTRUCTIVE & READ_ONLY
