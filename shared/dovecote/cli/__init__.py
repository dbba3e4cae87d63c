"""The `dovecote` command line (typer): the same verbs and fields as the HTTP API, the SDK and the MCP
tools (docs/reference/vocabulary.md).

Layout:
- here, `main`: the console script. `dovecote --version` answers without importing typer, and so does a
  plain `notes get` (`quick.py`: the standard library alone); every other command goes to `root.run`.
- `root.py`: the root command (`--version`, `--profile`); `groups.py`: how groups are built, the table
  of groups loaded lazily (a command imports only its own group's module), and the one error handler;
  `errors.py`: how a failure is reported (one `error:` line, or JSON with `--json`) and its exit code.
- `common.py`: the client, output (`--json` is the HTTP answer), inputs, the shared options;
  `verbs.py`: the table that builds the verbs which differ only by route and fields.
- one module per group: `notes`, `tasks` (caller), `worker`, `artifacts`, `recall`, `memory`, `tokens`
  (and `whoami`), `login` (and `health`), `dev`, `mcp`.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def main(argv: list[str] | None = None) -> None:
    """The console script (`argv` None: the process's own arguments, and the process ends here) or a
    call with explicit arguments (tests), which returns or raises SystemExit as click does."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:
        from dovecote import __version__

        sys.stdout.write(f"dovecote {__version__}\n")
        return
    if argv is None and "get" in args[:4]:
        _quick(args)
    from dovecote.cli.root import run

    if argv is not None:
        run(args)
        return
    try:
        run(args)
    except SystemExit as done:
        leave(done.code)
    leave(0)


def _quick(args: list[str]) -> None:
    """`notes get` without typer or httpx when it can (`dovecote.cli.quick`); the process ends here
    when it did."""
    from dovecote.cli.quick import notes_get

    try:
        code = notes_get(args)
    except (KeyboardInterrupt, OSError) as exc:  # Ctrl-C, or stdout refused the body (a full disk)
        from dovecote.cli.errors import EXIT_API, CliError, report

        failure = CliError("aborted", EXIT_API, code="aborted") if isinstance(exc, KeyboardInterrupt) else exc
        leave(report(failure, as_json="--json" in args))
        return
    if code is not None:
        leave(code)


def leave(code: str | int | None) -> None:
    """End the process without the interpreter's teardown once the command is over. Tearing down the
    ~300 modules a command imports costs a fifth of a short command's time, and frees nothing the
    system would not. Only when nothing else could still need it: one thread left (a worker's or
    the runtime's threads get the normal exit), and the output flushed first."""
    import threading

    if threading.active_count() > 1:
        sys.exit(code)
    if code is not None and not isinstance(code, int):
        sys.stderr.write(f"{code}\n")  # what SystemExit("text") prints
        code = 1
    try:
        if "logging" in sys.modules:
            import logging

            logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):  # a reader gone, or a closed stream: nothing left to say
        code = code or 1
    os._exit(code or 0)


def __getattr__(name: str) -> Any:
    """`from dovecote.cli import app` (the typer app) and `describe`, without importing them up front."""
    if name == "app":
        from dovecote.cli.root import app

        return app
    if name == "describe":
        from dovecote.cli.errors import describe

        return describe
    raise AttributeError(name)


__all__ = ["main"]

if __name__ == "__main__":
    main()
