"""Build the MCP server from one SDK client: the tools of every service, the worker tools when the
token may run worker commands, and the resources.

Whether the token is a worker's is asked of the API, not guessed: `GET /v1/leases?limit=1` (this
worker's leases) answers 200 to a worker (or admin) token with a worker id and 403 `forbidden` to a
caller. One request at start-up; an unreachable endpoint leaves the worker tools out (and says so on
stderr) rather than failing to start, since a model can still be told why each call fails."""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult, TextContent

from dovecote.client import DovecoteClient, DovecoteError
from dovecote.mcp import identity, memory, notes, recall, resources, tasks, webhooks
from dovecote.mcp.errors import failure_document

log = logging.getLogger("dovecote.mcp")

INSTRUCTIONS = (
    "Dovecote is shared state for a team of agents. notes_*: durable named documents (key/run/name, "
    "'' author = shared). tasks_*: ask another agent to do something and follow it (create, get, "
    "events, reply, cancel); worker tools (claim, accept, complete, ...) appear only for a worker token. "
    "recall_*: search and read past agent conversations. memory_*: remember facts in a scope and judge "
    "the relations found between them. Errors are JSON {error: {code, message, details}}: on "
    "revision_conflict read the task again (details.actual) and decide; on a retryable error call again "
    "with the same command_id."
)


class DovecoteMCPServer(MCPServer[Any]):
    """`MCPServer` whose failed tool calls answer the error envelope alone: the JSON text (and the same
    document as structured content), never the SDK's "Error executing tool …" prose around it."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            document = failure_document(exc)
            text = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
            return CallToolResult(
                content=[TextContent(type="text", text=text)], structured_content=document, is_error=True
            )


def may_work(client: DovecoteClient) -> bool:
    """True when the token may run worker commands (asked of the API; see the module docstring)."""
    try:
        client.list_leases(limit=1)
    except DovecoteError as exc:
        if exc.code not in ("forbidden", "unauthenticated"):
            log.warning("cannot tell whether the token is a worker's (%s); worker tools left out", exc)
        return False
    return True


def build_server(client: DovecoteClient, *, worker_tools: bool | None = None) -> DovecoteMCPServer:
    """The server over `client`. `worker_tools`: None asks the API, True/False forces it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("dovecote")
    except PackageNotFoundError:
        found = ""
    server = DovecoteMCPServer(name="dovecote", version=found, instructions=INSTRUCTIONS, log_level="WARNING")
    identity.register(server, client)
    notes.register(server, client)
    tasks.register_caller(server, client)
    if may_work(client) if worker_tools is None else worker_tools:
        tasks.register_worker(server, client)
    recall.register(server, client)
    memory.register(server, client)
    webhooks.register(server, client)
    resources.register(server, client)
    return server
