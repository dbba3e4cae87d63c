"""Recall tools (docs/services/recall.md): search, read, outline, topics over the authority's indexed
transcripts. The answers are the API's own envelopes, so search's `warnings`, `complete` and
`scopes_report` reach the model as data beside the results. Reads are bounded: `budget` (characters)
goes to the API, which trims the excerpt and says so (`truncated`, `trimmed_chars`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from dovecote.client import DovecoteClient
from dovecote.mcp.annotations import tool
from dovecote.mcp.fields import Project, Q, RecallRef, Session
from dovecote.recall.model import MAX_READ_BUDGET, MAX_SEARCH_LIMIT, MIN_READ_BUDGET

# A read without a budget would be uncapped; a model's context is not.
DEFAULT_READ_BUDGET = 8000

IncludeTools = Annotated[bool, Field(description="Include tool calls and their output.")]
IncludeThinking = Annotated[bool, Field(description="Include the assistant's thinking.")]


def register(server: MCPServer, client: DovecoteClient) -> None:
    @tool(server, "recall_search")
    def recall_search(
        q: Q,
        limit: Annotated[int | None, Field(ge=0, le=MAX_SEARCH_LIMIT, description="Results (one per session).")] = None,
        role: Annotated[
            Literal["", "user", "assistant", "system"], Field(description="Only messages of this role.")
        ] = "",
        sort: Annotated[Literal["", "relevance", "newest", "oldest"], Field(description="Order of results.")] = "",
        since: Annotated[str, Field(description="Inclusive date or RFC 3339 instant.")] = "",
        before: Annotated[str, Field(description="Inclusive date or RFC 3339 instant.")] = "",
        project: Project = "",
        source: Annotated[str, Field(description="Only this source (e.g. claude-code, codex).")] = "",
        current_session: Annotated[str, Field(description="Your live session id, left out of the results.")] = "",
        include_tools: IncludeTools = False,
        include_subagents: Annotated[bool, Field(description="Also search subagent threads.")] = False,
        semantic: Annotated[Literal["", "on", "off"], Field(description="The semantic tier (absent: default).")] = "",
    ) -> dict[str, Any]:
        """Search past agent conversations (transcripts): ranked hits, one per session, each with a
        `read_ref` for recall_read. Check `complete` and `warnings`: an incomplete or stale scope
        means results may be missing."""
        return client.recall_search(
            q,
            limit=limit,
            role=role,
            sort=sort,
            since=since,
            before=before,
            project=project,
            source=source,
            current_session=current_session,
            include_tools=include_tools,
            include_subagents=include_subagents,
            semantic=semantic,
        )

    @tool(server, "recall_read")
    def recall_read(
        ref: RecallRef,
        budget: Annotated[
            int,
            Field(
                ge=MIN_READ_BUDGET,
                le=MAX_READ_BUDGET,
                description="The most characters to return; the excerpt is trimmed to fit (see truncated).",
            ),
        ] = DEFAULT_READ_BUDGET,
        more: Annotated[int | None, Field(ge=0, description="Widen the window by this many steps.")] = None,
        around: Annotated[
            int | None,
            Field(ge=-(10**9), le=10**9, description="Re-centre on the message N after the anchor (negative: before)."),
        ] = None,
        window: Annotated[int | None, Field(ge=0, description="Messages each side of the anchor.")] = None,
        include_tools: IncludeTools = False,
        include_thinking: IncludeThinking = False,
    ) -> dict[str, Any]:
        """Read the messages around a search hit (a bounded window, oldest first). `next_command`
        and `has_more` say how to read further."""
        return client.recall_read(
            ref,
            budget=budget,
            more=more,
            around=around,
            window=window,
            include_tools=include_tools,
            include_thinking=include_thinking,
        )

    @tool(server, "recall_outline")
    def recall_outline(
        session: Session,
        include_tools: IncludeTools = False,
        include_thinking: IncludeThinking = False,
        include_subagents: Annotated[bool, Field(description="List the session's subagent threads.")] = False,
    ) -> dict[str, Any]:
        """The shape of one session: its turns from start to end, to decide what to read."""
        return client.recall_outline(
            session, include_tools=include_tools, include_thinking=include_thinking, include_subagents=include_subagents
        )

    @tool(server, "recall_topics")
    def recall_topics(
        q: Annotated[str, Field(description="Only topics matching these words; '' for all.")] = "",
        limit: Annotated[int | None, Field(ge=0, le=MAX_SEARCH_LIMIT, description="Topics to return.")] = None,
        project: Project = "",
    ) -> dict[str, Any]:
        """The labelled topics of past conversations, each with a ref to read it."""
        return client.recall_topics(q, limit=limit, project=project)
