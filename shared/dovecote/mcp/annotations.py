"""Every tool's hints (MCP `ToolAnnotations`), decided tool by tool and named here in one table, so a
client that asks a person before a destructive call asks before exactly these.

The hints mean what the MCP specification says:
- `read_only`: the tool changes nothing;
- `destructive`: it may delete or overwrite what is stored, or end a task without its result
  (otherwise it only adds: a note, a task, a message, a judgment, a state its flow moves on to);
- `idempotent`: calling it again with the same arguments has no further effect. Commands guarded by
  `expected_revision` are: a repeat either replays (same `command_id`) or fails revision_conflict.
  Tools that generate an id when none is given (tasks_create, memory_submit) and tasks_claim (each
  call leases another task) are not; passing the id they return makes a retry replay;
- `open_world`: false everywhere but webhooks_add (the tools reach only this deployment's state).

Destructive: notes_put (replaces the body at those coordinates), notes_delete, tasks_cancel and
tasks_fail (both end a task for good, without its result), webhooks_add (the same id replaces a
webhook; and it is the one open-world tool: it sends the task's events to an outside URL) and
webhooks_delete. Revoking a token and fencing a lease are
not MCP tools.
"""

from __future__ import annotations

from collections.abc import Callable

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from dovecote.mcp.errors import P, R, guarded

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def write(*, destructive: bool, idempotent: bool) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=False, destructive_hint=destructive, idempotent_hint=idempotent, open_world_hint=False
    )


# Writes that only add, and whose repeat has no further effect.
ADDITIVE = write(destructive=False, idempotent=True)
# Writes that add something new on every call (a task, a memory write, a lease).
EACH_CALL_ADDS = write(destructive=False, idempotent=False)
DESTRUCTIVE = write(destructive=True, idempotent=True)

TOOLS: dict[str, ToolAnnotations] = {
    "whoami": READ,
    "notes_put": DESTRUCTIVE,
    "notes_get": READ,
    "notes_list": READ,
    "notes_delete": DESTRUCTIVE,
    "tasks_create": EACH_CALL_ADDS,
    "tasks_get": READ,
    "tasks_list": READ,
    "tasks_reply": ADDITIVE,
    "tasks_cancel": DESTRUCTIVE,
    "tasks_messages": READ,
    "tasks_message": READ,
    "tasks_events": READ,
    "tasks_grants": READ,
    "tasks_claim": EACH_CALL_ADDS,
    "tasks_accept": ADDITIVE,
    "tasks_request_input": ADDITIVE,
    "tasks_complete": ADDITIVE,
    "tasks_fail": DESTRUCTIVE,
    "tasks_freeze_artifact": ADDITIVE,
    "recall_search": READ,
    "recall_read": READ,
    "recall_outline": READ,
    "recall_topics": READ,
    "memory_submit": EACH_CALL_ADDS,
    "memory_status": READ,
    "memory_list": READ,
    "memory_relations": READ,
    "memory_judge": ADDITIVE,
    # Sends the task's events to an outside URL, and the same id again replaces a webhook.
    "webhooks_add": ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True
    ),
    "webhooks_list": READ,
    "webhooks_get": READ,
    "webhooks_delete": DESTRUCTIVE,
}


def hints(name: str) -> ToolAnnotations:
    """The annotations of tool `name` (a KeyError for a tool missing from the table)."""
    return TOOLS[name]


def tool(server: MCPServer, name: str, description: str | None = None) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Register a tool as every tool is: under `name`, with its hints from the table, and `guarded`
    (any failure leaves as the API's error envelope)."""

    def register(fn: Callable[P, R]) -> Callable[P, R]:
        return server.tool(name=name, description=description, annotations=hints(name))(guarded(fn))

    return register
