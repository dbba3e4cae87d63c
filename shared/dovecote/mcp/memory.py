"""Memory tools (docs/services/memory.md): submit a write to the scope's serialized queue, wait for its
evidence, list a scope's memories and relation candidates, judge a candidate. A write is applied
asynchronously: memory_submit answers `queued`, memory_status (with `wait`) the evidence."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from dovecote.client import DovecoteClient, new_id
from dovecote.client.memory import MAX_WAIT_SECONDS
from dovecote.mcp.annotations import tool
from dovecote.mcp.fields import CommandId, Cursor, Limit, Scope, WriteId


def register(server: MCPServer, client: DovecoteClient) -> None:
    @tool(server, "memory_submit")
    def memory_submit(
        scope: Scope,
        content: Annotated[str, Field(description="The fact or decision to remember, as plain text.")],
        tags: Annotated[list[str] | None, Field(description="Subjects it is about (e.g. 'subject:billing').")] = None,
        write_id: Annotated[
            str | None, Field(description="The write's id; generated when absent. The same id again is a safe retry.")
        ] = None,
    ) -> dict[str, Any]:
        """Remember something in a shared scope. Queued, then applied in order; call memory_status
        with the returned id (and wait) for the evidence: the candidates it relates to."""
        return client.submit_memory(scope, content, tags=tags, write_id=write_id or new_id("mw"))

    @tool(server, "memory_status")
    def memory_status(
        write_id: WriteId,
        wait: Annotated[
            int, Field(ge=0, le=MAX_WAIT_SECONDS, description="Wait up to this many seconds for it to settle.")
        ] = 0,
    ) -> dict[str, Any]:
        """A memory write's status (queued, started, complete, failed, cancelled) and, once settled,
        its evidence: {code, write_ok, candidates: [{from, to, verb, note}]}."""
        return client.memory_write(write_id, wait=wait or None)

    @tool(server, "memory_list")
    def memory_list(scope: Scope, limit: Limit = None, cursor: Cursor = None) -> dict[str, Any]:
        """A scope's memories in applied order (oldest first). One page: pass the returned `cursor`
        back for the next."""
        return client.list_memories(scope, limit=limit, cursor=cursor)

    @tool(server, "memory_relations")
    def memory_relations(
        scope: Scope,
        status: Annotated[
            Literal["pending", "confirmed", "dismissed"] | None, Field(description="Only candidates in this status.")
        ] = None,
        limit: Limit = None,
        cursor: Cursor = None,
    ) -> dict[str, Any]:
        """Relation candidates between a scope's memories (e.g. one contradicts or supersedes
        another), to judge. One page: pass the returned `cursor` back for the next."""
        return client.memory_relations(scope, status=status, limit=limit, cursor=cursor)

    @tool(server, "memory_judge")
    def memory_judge(
        relation_id: Annotated[str, Field(description="The candidate's id (from memory_relations).")],
        decision: Annotated[Literal["confirmed", "dismissed"], Field(description="Your judgment.")],
        note: Annotated[str | None, Field(description="Why, in a sentence.")] = None,
        command_id: CommandId = None,
    ) -> dict[str, Any]:
        """Confirm or dismiss a pending relation candidate. A second, different judgment fails with
        judgment_conflict."""
        return {
            "relation": client.judge_relation(relation_id, decision, note=note, command_id=command_id or new_id("c"))
        }
