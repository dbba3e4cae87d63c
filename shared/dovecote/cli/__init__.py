"""The `dovecote` command line (typer): the same verbs and fields as the HTTP API, the SDK and the MCP
tools (README: "One vocabulary").

Layout:
- here, `main`: the console script. `dovecote --version` answers without importing typer; every other
  command goes to `root.run`.
- `root.py`: the root command (`--version`, `--profile`); `groups.py`: how groups are built, the table
  of groups loaded lazily (a command imports only its own group's module), and the one error handler;
  `errors.py`: how a failure is reported (one `error:` line, or JSON with `--json`) and its exit code.
- `common.py`: the client, output (`--json` is the HTTP answer), inputs, the shared options;
  `verbs.py`: the table that builds the verbs which differ only by route and fields.
- one module per group: `notes`, `tasks` (caller), `worker`, `artifacts`, `recall`, `memory`, `tokens`
  (and `whoami`), `login` (and `health`), `dev`, `mcp`.
"""

from __future__ import annotations

import sys
from typing import Any


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:
        from dovecote import __version__

        sys.stdout.write(f"dovecote {__version__}\n")
        return
    from dovecote.cli.root import run

    run(args)


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
