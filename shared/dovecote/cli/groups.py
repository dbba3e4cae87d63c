"""The command groups of `dovecote`, and the root that loads them lazily.

- `VerbGroup`: a typer group whose verbs may have a short alias (`ls` → `list`, `rm` → `delete`): the
  documented name is the MCP tool's verb, the alias is shown beside it in the help.
- `new_app`: every group is built the same way: plain help (no rich markup: a command's start-up
  imports only what that command runs), `no_args_is_help`.
- `RootGroup`: the `dovecote` command. Each group lives in its own module, imported only when that
  group runs (`dovecote notes get` never imports the tasks, recall or MCP modules, nor rich unless it
  prints a table). Its `main` is the one error handler: every failure is one line on stderr starting
  with `error:` (or, with `--json`, `{"error": {code, message, details}}` on stdout) and the exit code
  of `EXIT_CODES_HELP`; `DOVECOTE_DEBUG=1` shows the traceback instead.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from dovecote.cli import coercion

coercion.install()  # plain values without pydantic (dovecote.cli.coercion)

EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 the API answered an error; 2 usage (bad arguments, a missing file); "
    "3 nothing claimable, or a wait timed out; 4 Dovecote unreachable or not configured; "
    "5 a wait cannot succeed (the task ended in another state). "
    "Endpoint and token (both from one place): --profile NAME, else DOVECOTE_ENDPOINT and DOVECOTE_TOKEN, "
    "else the DOVECOTE_PROFILE or default profile of ~/.config/dovecote/config.toml (`dovecote login`), "
    "else the nearest .dovecote/dev-tokens.json (yours, writable by no one else), else the dev profile "
    "(`dovecote dev`); `dovecote whoami` says which. With --json errors are JSON on stdout. "
    "DOVECOTE_DEBUG=1 shows tracebacks."
)

# A verb's short alias → the documented verb (the MCP tool's), in whichever group has that verb.
ALIASES = {"ls": "list", "rm": "delete", "freeze": "freeze-artifact"}

# The profile named by `dovecote --profile NAME`, for `dovecote.cli.common.client` (set by the root
# callback at every invocation).
SELECTED: dict[str, str | None] = {"profile": None}


class VerbGroup(TyperGroup):
    """A group whose verbs answer to their short aliases too."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        if found is None and cmd_name in ALIASES:
            found = super().get_command(ctx, ALIASES[cmd_name])
        return found

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            shown = ", ".join([name, *(alias for alias, verb in ALIASES.items() if verb == name)])
            rows.append((shown, command.get_short_help_str(max(30, formatter.width - 30))))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


# (group, name) → (module, attribute: a Typer, short help): a sub-group loaded on first use, so a
# command of its parent imports none of it (`tasks get` does not load `tasks webhooks`).
SUBGROUPS: dict[tuple[str, str], tuple[str, str, str]] = {
    ("tasks", "webhooks"): ("dovecote.cli.webhooks", "app", "A task's webhooks: add, list, get, delete, redrive."),
}


class ParentGroup(VerbGroup):
    """A group whose sub-groups (SUBGROUPS) load when used."""

    def _subgroups(self) -> dict[str, tuple[str, str, str]]:
        return {name: spec for (group, name), spec in SUBGROUPS.items() if group == self.name}

    def list_commands(self, ctx: Any) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._subgroups()})

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        subgroups = self._subgroups()
        if found is None and cmd_name in subgroups:
            module, attribute, _ = subgroups[cmd_name]
            found = typer.main.get_command(getattr(importlib.import_module(module), attribute))
            found.name = cmd_name
            self.add_command(found, cmd_name)
        return found


def new_app(help: str, **options: Any) -> typer.Typer:
    """A command group as every `dovecote` group is built."""
    settings: dict[str, Any] = {"no_args_is_help": True, "rich_markup_mode": None, "add_completion": False}
    return typer.Typer(help=help, **({"cls": VerbGroup} | settings | options))


# name → (module, attribute: a Typer, short help). Loaded when the command runs, or for `--help`.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "notes": ("dovecote.cli.notes", "app", "Notes: pass work between agents by (key, run, name, author)."),
    "tasks": ("dovecote.cli.tasks", "app", "Tasks, as a caller: create, read, reply, cancel, wait."),
    "worker": ("dovecote.cli.worker", "app", "Tasks, as a worker: claim, accept, complete, freeze an artifact."),
    "artifacts": ("dovecote.cli.artifacts", "app", "Artifacts of a workspace: read one, its head, its receipt."),
    "recall": ("dovecote.cli.recall", "app", "Recall past conversations: push, search, read, outline, topics."),
    "memory": ("dovecote.cli.memory", "app", "Memory: submit writes, read evidence, judge relations."),
    "tokens": ("dovecote.cli.tokens", "app", "Bearer tokens: mint, list, revoke (admin); bootstrap."),
    "whoami": ("dovecote.cli.tokens", "whoami_app", "Who the token is: authority, role, worker, agent, expiry."),
    "login": ("dovecote.cli.login", "app", "Verify an endpoint and a token, and keep them as a profile."),
    "logout": ("dovecote.cli.login", "logout_app", "Remove a profile (and its -worker, -admin profiles)."),
    "health": ("dovecote.cli.login", "health_app", "Is the endpoint up? (no token needed)"),
    "dev": ("dovecote.cli.dev", "app", "Run the whole service locally (moto, the API Gateway emulator)."),
    "mcp": ("dovecote.cli.mcp", "app", "Serve the tools over the Model Context Protocol (stdio or HTTP)."),
}


def load(name: str) -> Any:
    """The click command of `name`, from its module."""
    module, attribute, _ = COMMANDS[name]
    command = typer.main.get_command(getattr(importlib.import_module(module), attribute))
    command.name = name
    return command


def wants_json(args: Sequence[str]) -> bool:
    """True when the command line asks for JSON (then errors are JSON too)."""
    head = args[: list(args).index("--")] if "--" in args else args
    return "--json" in head


class RootGroup(VerbGroup):
    """`dovecote`: its groups load on first use; its `main` reports every failure (module docstring)."""

    def list_commands(self, ctx: Any) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        if found is None and cmd_name in COMMANDS:
            found = load(cmd_name)
            self.add_command(found, cmd_name)
        return found

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """An unknown command suggests the nearest ones (`note` → `notes`). typer suggests only among
        the groups already loaded, and here they load on first use: the table's names are the list."""
        from difflib import get_close_matches

        from typer._click.exceptions import UsageError

        try:
            return super().resolve_command(ctx, args)
        except UsageError as exc:
            if args and "Did you mean" not in exc.message:
                matches = get_close_matches(args[0], self.list_commands(ctx), cutoff=0.75)
                if matches:
                    exc.message = f"{exc.message.rstrip('.')}. Did you mean {', '.join(repr(m) for m in matches)}?"
            raise

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        # The short help from the table: `dovecote --help` imports none of the groups.
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][2]) for name in self.list_commands(ctx) if name in COMMANDS])

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        try:
            code = super().main(
                args=argv, prog_name=prog_name or "dovecote", complete_var=complete_var, standalone_mode=False, **extra
            )
        except Exception as exc:  # noqa: BLE001 - the one place every failure is reported
            from dovecote.cli.errors import is_usage, report

            if os.environ.get("DOVECOTE_DEBUG", "") not in ("", "0") and not is_usage(exc):
                raise
            code = report(exc, as_json=wants_json(argv))
        sys.stdout.flush()
        sys.exit(code if isinstance(code, int) else 0)


__all__ = ["ALIASES", "COMMANDS", "EXIT_CODES_HELP", "SELECTED", "RootGroup", "VerbGroup", "new_app", "wants_json"]
