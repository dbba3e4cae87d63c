"""How `dovecote` reports a failure: one line on stderr that starts with `error:`, or with `--json` the
API's error shape on stdout, `{"error": {"code", "message", "details"}}`, so a script parses one
shape whatever failed; and the exit code that says which kind:

| exit | code | what |
|---|---|---|
| 1 | the API's (`not_found`, `revision_conflict`, …) | the API answered an error |
| 2 | `usage` | bad arguments, a missing or unreadable file |
| 2 | `invalid_argument` | an argument no request can carry (an id with a `/`), refused before sending |
| 3 | `wait_timeout` | a wait ran out (nothing claimable is not an error: `worker claim` exits 3 too) |
| 4 | `unavailable`, `configuration` | Dovecote cannot be reached, or no endpoint and token were found |
| 5 | `task_ended` | a wait cannot succeed: the task ended in another state |
| 1 | `internal` | anything unexpected (DOVECOTE_DEBUG=1 shows the traceback) |
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass, field
from typing import Any

from dovecote.client.errors import (
    CONFIGURATION,
    INVALID_ARGUMENT,
    TASK_ENDED,
    UNAVAILABLE,
    WAIT_TIMEOUT,
    DovecoteError,
)

EXIT_OK = 0
EXIT_API = 1
EXIT_USAGE = 2
EXIT_NOTHING = 3
EXIT_UNREACHABLE = 4
EXIT_ENDED = 5
USAGE = "usage"


class CliError(Exception):
    """An expected failure of the command line itself: a code, one line, one exit code."""

    def __init__(
        self, message: str, exit_code: int = EXIT_USAGE, *, code: str = USAGE, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.code = code
        self.details = details or {}


def swapped(argument: str, value: str, why: str, *right_order: str) -> CliError:
    """Two positional arguments given the wrong way round: the usage error says why `value` cannot
    be `argument`, and shows the command with its arguments in the right order."""
    return CliError(
        f"{argument} {value!r} {why} (`{shlex.join(right_order)}`)",
        EXIT_USAGE,
        details={"argument": argument, "value": value},
    )


@dataclass(frozen=True)
class Failure:
    exit_code: int
    code: str
    message: str  # without the `error:` prefix
    details: dict[str, Any] = field(default_factory=dict)
    line: str = ""  # the one stderr line, when it says more than the message (status, details)


def _click_errors() -> tuple[type[BaseException], type[BaseException], type[BaseException]]:
    from typer._click import exceptions  # typer's own click: its UsageError is what typer raises

    return exceptions.UsageError, exceptions.NoArgsIsHelpError, exceptions.ClickException


def is_usage(exc: BaseException) -> bool:
    usage, _, _ = _click_errors()
    return isinstance(exc, usage | CliError)


def describe(exc: BaseException) -> Failure:
    """An expected failure as its exit code, code, message and details."""
    usage, _, click_error = _click_errors()
    if isinstance(exc, CliError):
        return Failure(exc.exit_code, exc.code, exc.message, exc.details)
    if isinstance(exc, usage):
        context = getattr(exc, "ctx", None)
        path = context.command_path if context is not None else "dovecote"
        message = f"{exc.format_message().rstrip('.')} (see `{path} --help`)"  # type: ignore[attr-defined]
        return Failure(EXIT_USAGE, USAGE, message, {"command": path})
    if isinstance(exc, click_error):
        return Failure(int(getattr(exc, "exit_code", 1)), USAGE, exc.format_message())  # type: ignore[attr-defined]
    if isinstance(exc, DovecoteError):
        return _api_failure(exc)
    httpx = sys.modules.get("httpx")
    if httpx is not None and isinstance(exc, httpx.TransportError):
        return Failure(EXIT_UNREACHABLE, UNAVAILABLE, f"cannot reach Dovecote: {exc}")
    if isinstance(exc, FileNotFoundError | IsADirectoryError | PermissionError | NotADirectoryError):
        return Failure(EXIT_USAGE, USAGE, f"{exc.strerror}: {exc.filename}", {"file": str(exc.filename)})
    if type(exc).__name__ == "Abort":
        return Failure(EXIT_API, "aborted", "aborted")
    message = f"unexpected error: {type(exc).__name__}: {exc} (DOVECOTE_DEBUG=1 shows the traceback)"
    return Failure(EXIT_API, "internal", message)


def _api_failure(exc: DovecoteError) -> Failure:
    if exc.status == 0 and exc.code in (UNAVAILABLE, CONFIGURATION):
        return Failure(EXIT_UNREACHABLE, exc.code, exc.message, exc.details)
    if exc.status == 0 and exc.code == INVALID_ARGUMENT:
        # Refused before sending (an id no request path can carry): a bad argument, not an API answer.
        return Failure(EXIT_USAGE, exc.code, exc.message, exc.details, f"{exc.code}: {exc.message}")
    message = exc.message
    if exc.retryable and exc.command_id:
        message += f" (it may have committed: retry with --command-id {exc.command_id})"
    if exc.code == WAIT_TIMEOUT:
        return Failure(EXIT_NOTHING, exc.code, message, exc.details)
    if exc.code == TASK_ENDED:
        return Failure(EXIT_ENDED, exc.code, message, exc.details)
    line = f"{exc.status} {exc.code}: {exc.message}" if exc.status else f"{exc.code}: {exc.message}"
    if exc.details:
        line += f" {json.dumps(exc.details, ensure_ascii=False, separators=(',', ':'))}"
    if message != exc.message:
        line += message[len(exc.message) :]
    return Failure(EXIT_API, exc.code, message, exc.details, line)


def one_line(text: str) -> str:
    return " ".join(text.split())


def report(exc: BaseException, *, as_json: bool) -> int:
    """Print the failure (one stderr line, or JSON on stdout) and return its exit code."""
    _, no_args, _ = _click_errors()
    if isinstance(exc, no_args):
        exc.show()  # type: ignore[attr-defined]  # a group named alone: its help
        return EXIT_USAGE
    failure = describe(exc)
    sys.stdout.flush()
    if as_json:
        document = {"error": {"code": failure.code, "message": failure.message, "details": failure.details}}
        sys.stdout.write(json.dumps(document, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    else:
        sys.stderr.write("error: " + one_line(failure.line or failure.message) + "\n")
        sys.stderr.flush()
    return failure.exit_code


__all__ = [
    "EXIT_API",
    "EXIT_ENDED",
    "EXIT_NOTHING",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "CliError",
    "Failure",
    "describe",
    "is_usage",
    "report",
]
