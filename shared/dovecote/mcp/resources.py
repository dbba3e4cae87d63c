"""Resources: a note by ref (`dovecote://notes/{ref}`, its body as text, or its metadata as JSON when
the body is binary or large) and a task's snapshot (`dovecote://tasks/{task_id}`, `{task,
event_cursor}` as JSON). A failure is a resource error whose message is the error envelope as JSON
(the protocol has no isError for reads)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, ParamSpec

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from dovecote.client import DovecoteClient, DovecoteError
from dovecote.mcp.errors import error_document

P = ParamSpec("P")


def _reading(fn: Callable[P, str]) -> Callable[P, str]:
    """A resource read whose DovecoteError leaves as a resource error holding the error envelope
    (`functools.wraps` keeps the signature: the SDK matches it to the URI template)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> str:
        try:
            return fn(*args, **kwargs)
        except DovecoteError as exc:
            kind = ResourceNotFoundError if exc.code == "not_found" else ResourceError
            raise kind(json.dumps(error_document(exc), ensure_ascii=False)) from None

    return wrapper


def _resources(server: MCPServer) -> Callable[[str, str, str], Callable[[Callable[P, str]], Callable[P, str]]]:
    """`@resource(uri, mime_type, description)`: a resource read named as its function, whose
    DovecoteError leaves as a resource error (`_reading`)."""

    def resource(uri: str, mime_type: str, description: str) -> Callable[[Callable[P, str]], Callable[P, str]]:
        def add(fn: Callable[P, str]) -> Callable[P, str]:
            read = _reading(fn)
            server.resource(uri, name=fn.__name__, description=description, mime_type=mime_type)(read)
            return read

        return add

    return resource


def register(server: MCPServer, client: DovecoteClient) -> None:
    resource = _resources(server)

    @resource(
        "dovecote://notes/{ref}",
        "text/plain",
        "A note by its ref: the body as text (metadata as JSON for binary or large bodies).",
    )
    def note(ref: str) -> str:
        raw: dict[str, Any] = client.get_note_meta(ref)
        if raw.get("text") is not None:
            return str(raw["text"])
        return json.dumps({k: v for k, v in raw.items() if k != "body_b64"}, ensure_ascii=False)

    @resource(
        "dovecote://tasks/{task_id}",
        "application/json",
        "A task's snapshot: {task, event_cursor} (follow it with tasks_events after event_cursor).",
    )
    def task(task_id: str) -> str:
        return json.dumps(client.snapshot(task_id), ensure_ascii=False)
