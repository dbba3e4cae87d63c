"""The `dovecote` root command: `--version`, `--profile`, and the groups of `dovecote.cli.groups`
(loaded when they run). `run` is what the console script calls after its fast path."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from dovecote.cli.groups import EXIT_CODES_HELP, SELECTED, RootGroup

app = typer.Typer(
    cls=RootGroup,
    help="Dovecote: durable notes, tasks, recall and memory for teams of agents.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,  # failures are reported by RootGroup.main, never as a rich box
)


def _version(value: bool) -> None:
    if value:
        from dovecote import __version__

        sys.stdout.write(f"dovecote {__version__}\n")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    profile: Annotated[
        str | None,
        typer.Option(
            "--profile",
            metavar="NAME",
            help="Use this profile of ~/.config/dovecote/config.toml (before DOVECOTE_ENDPOINT/DOVECOTE_TOKEN).",
        ),
    ] = None,
) -> None:
    """Dovecote: durable notes, tasks, recall and memory for teams of agents."""
    SELECTED["profile"] = profile


def run(args: list[str]) -> None:
    # httpx imports its own command line (click, rich, pygments) when it is importable; that costs
    # every command ~50 ms and serves none: a None entry makes that one import fail, which httpx expects.
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    typer.main.get_command(app).main(args=args, prog_name="dovecote")


__all__ = ["app", "run"]
