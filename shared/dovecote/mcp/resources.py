"""Resources: a note by ref (`dovecote://notes/{ref}`, its body as text, or its metadata as JSON when
the body is binary or large) and a task's snapshot (`dovecote://tasks/{task_id}`, `{task,
event_cursor}` as JSON). A failure is a resource error whose message is the error envelope as JSON
(the protocol has no isError for reads)."""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from dovecote.client import DovecoteClient, DovecoteError
from dovecote.mcp.errors import error_document


def _failure(exc: DovecoteError) -> ResourceError:
    kind = ResourceNotFoundError if exc.code == "not_found" else ResourceError
    return kind(json.dumps(error_document(exc), ensure_ascii=False))


def register(server: MCPServer, client: DovecoteClient) -> None:
    @server.resource(
        "dovecote://notes/{ref}",
        name="note",
        description="A note by its ref: the body as text (metadata as JSON for binary or large bodies).",
        mime_type="text/plain",
    )
    def note(ref: str) -> str:
        try:
            raw: dict[str, Any] = client.get_note_meta(ref)
        except DovecoteError as exc:
            raise _failure(exc) from None
        if raw.get("text") is not None:
            return str(raw["text"])
        return json.dumps({k: v for k, v in raw.items() if k != "body_b64"}, ensure_ascii=False)

    @server.resource(
        "dovecote://tasks/{task_id}",
        name="task",
        description="A task's snapshot: {task, event_cursor} (follow it with tasks_events after event_cursor).",
        mime_type="application/json",
    )
    def task(task_id: str) -> str:
        try:
            return json.dumps(client.snapshot(task_id), ensure_ascii=False)
        except DovecoteError as exc:
            raise _failure(exc) from None
