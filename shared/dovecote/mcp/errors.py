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

from dovecote.client.errors import DovecoteError

P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger("dovecote.mcp")

INVALID_ARGUMENT = "invalid_argument"
INTERNAL = "internal"


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
    return {
        "error": {
            "code": INTERNAL,
            "message": f"{type(exc).__name__}: {exc}",
            "details": {},
            "status": 0,
            "retryable": False,
        }
    }


def tool_error(exc: BaseException) -> ToolError:
    return ToolError(json.dumps(error_document(exc), ensure_ascii=False, separators=(",", ":")))


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
