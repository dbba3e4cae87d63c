"""Every failure of a tool as a tool error (`isError`) whose text is one JSON document, the API's
own envelope: `{"error": {"code", "message", "details", "status", "retryable", "command_id"?}}`.

A model branches on `code` and the facts in `details` (`revision_conflict` carries `expected` and
`actual`, `stale_lease` the current fence, `ambiguous_ref` the candidates). Nothing a tool raises
reaches the client as a traceback: an unexpected exception becomes code `internal` with its type
and message only."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from dovecote.client.errors import DovecoteError

P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger("dovecote.mcp")

INVALID_ARGUMENT = "invalid_argument"
INTERNAL = "internal"
UNKNOWN_TOOL = "unknown_tool"


class DovecoteToolError(ToolError):
    """A tool's failure with its envelope; the server's `call_tool` answers `document` as is (the SDK
    would prefix its text with "Error executing tool …", which no longer parses as JSON)."""

    def __init__(self, document: dict[str, Any]) -> None:
        super().__init__(json.dumps(document, ensure_ascii=False, separators=(",", ":")))
        self.document = document


def error_document(exc: BaseException) -> dict[str, Any]:
    """The envelope a model sees for `exc`."""
    if isinstance(exc, DovecoteError):
        error: dict[str, Any] = {
            "code": exc.code,
            "message": exc.message,
            "details": exc.details,
            "status": exc.status,
            "retryable": exc.retryable,
        }
        if exc.command_id:
            error["command_id"] = exc.command_id
            if exc.retryable:
                error["message"] += f" (it may have committed: call again with command_id {exc.command_id})"
        return {"error": error}
    return _envelope(INTERNAL, f"{type(exc).__name__}: {exc}", {})


def tool_error(exc: BaseException) -> DovecoteToolError:
    return DovecoteToolError(error_document(exc))


def failure_document(exc: ToolError) -> dict[str, Any]:
    """The envelope of any tool failure the SDK reports: ours (found through `__cause__`), bad
    arguments (the schema's validation: `invalid_argument` with each field's complaint), an
    unknown tool, or anything else (`internal`, its message only: never a traceback)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, DovecoteToolError):
            return seen.document
        if isinstance(seen, ValidationError):
            problems = [
                {"field": ".".join(str(part) for part in error["loc"]), "message": error["msg"]}
                for error in seen.errors(include_url=False, include_input=False)
            ]
            fields = ", ".join(p["field"] for p in problems)
            return _envelope(INVALID_ARGUMENT, f"invalid arguments: {fields}", {"errors": problems})
        seen = seen.__cause__
    text = str(exc)
    if text.startswith("Unknown tool: "):
        return _envelope(UNKNOWN_TOOL, text, {"tool": text.removeprefix("Unknown tool: ")})
    return _envelope(INTERNAL, text, {})


def _envelope(code: str, message: str, details: dict[str, Any]) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details, "status": 0, "retryable": False}}


def invalid(message: str, **details: Any) -> DovecoteError:
    """A usage mistake caught before any request (status 0, as the SDK's own client-side codes)."""
    return DovecoteError(0, INVALID_ARGUMENT, message, details)


def guarded(fn: Callable[P, R]) -> Callable[P, R]:
    """Run a tool body; any exception leaves as a tool error with a stable code. `functools.wraps`
    keeps the signature (the SDK builds the input schema from it, following `__wrapped__`)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except DovecoteError as exc:
            raise tool_error(exc) from None
        except Exception as exc:
            log.warning("tool %s failed unexpectedly: %s: %s", fn.__name__, type(exc).__name__, exc)
            raise tool_error(exc) from None

    return wrapper
