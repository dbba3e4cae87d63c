"""What every `dovecote` command shares: the client, the one output switch (`--json`), tables,
progress bars, reading inputs, and the exit codes.

Output: without `--json` a command prints for a person (a field table, a list table with full refs
and ids, a body); with `--json` it prints the API's answer as one JSON document on stdout (a page
with its cursor; with `--all` every item in one document). Errors are one line on stderr.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn
from rich.table import Table

from dovecote.client import DovecoteClient

EXIT_OK = 0
EXIT_API = 1  # the API answered with an error
EXIT_USAGE = 2  # bad arguments, a missing file (click uses 2 for usage errors too)
EXIT_NOTHING = 3  # nothing claimable; a wait timed out
EXIT_UNREACHABLE = 4  # Dovecote cannot be reached, or no configuration was found

EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 the API answered an error; 2 usage (bad arguments, a missing file); "
    "3 nothing claimable, or a wait timed out; 4 Dovecote unreachable or not configured. "
    "Endpoint and token: DOVECOTE_ENDPOINT and DOVECOTE_TOKEN, else .dovecote/dev-tokens.json "
    "(or DOVECOTE_TOKENS_FILE), which `make dev` writes. DOVECOTE_DEBUG=1 shows tracebacks."
)

# Tables are never squeezed below their content when piped: a ref printed by `ls` must be whole.
out = Console(width=None if sys.stdout.isatty() else 100_000, soft_wrap=False)
err = Console(stderr=True)


class CliError(Exception):
    """An expected failure of the command line itself: one line, one exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def client(role: str = "caller", **options: Any) -> DovecoteClient:
    """DOVECOTE_ENDPOINT / DOVECOTE_TOKEN, else the dev tokens file's token of `role`."""
    return DovecoteClient.from_env(role, **options)


Json = Annotated[bool, typer.Option("--json", help="Print the API's JSON answer (one document) instead of a table.")]
AllPages = Annotated[bool, typer.Option("--all", help="Follow the cursor to the end (one document with --json).")]
CommandId = Annotated[
    str | None,
    typer.Option(help="The command's id: reuse it to retry safely (an exact retry replays); generated when absent."),
]
Rev = Annotated[int, typer.Option("--rev", help="The task revision you expect (the command is a compare-and-swap).")]
FenceOpt = Annotated[int, typer.Option("--fence", help="The fence of your lease (from `worker claim`).")]
FileOpt = Annotated[
    str | None, typer.Option("--file", "-f", help="Read the body from FILE; - reads stdin.", show_default=False)
]
MediaType = Annotated[
    str | None, typer.Option("--media-type", help="Media type of a --file message (default: guessed from its name).")
]


# ---- printing ---------------------------------------------------------------------------------


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _flatten(value: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, dict):
            yield from _flatten(item, name + ".")
        elif isinstance(item, list):
            yield name, json.dumps(item, ensure_ascii=False)
        elif item is not None:
            yield name, str(item)


def print_fields(value: dict[str, Any]) -> None:
    """One object as a two-column field table (nested objects flattened: task.id, task.state)."""
    rows = list(_flatten(value))
    width = max((len(name) for name, _ in rows), default=0)
    for name, text in rows:
        out.print(f"[bold]{name.ljust(width)}[/bold]  {escape(text)}", highlight=False, soft_wrap=True)


def emit(value: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(value)
    else:
        print_fields(value)


Column = tuple[str, Callable[[dict[str, Any]], Any]]
FULL = {"ref", "id", "task", "token_id"}  # never folded or cut: what `ls` prints must work elsewhere


def print_table(items: Sequence[dict[str, Any]], columns: Sequence[Column]) -> None:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name, _ in columns:
        if name in FULL:
            table.add_column(name, no_wrap=True, min_width=len(name), overflow="ignore")
        else:
            table.add_column(name, overflow="fold")
    for item in items:
        row = []
        for _, get in columns:
            cell = get(item)
            row.append("" if cell is None else str(cell))
        table.add_row(*row)
    out.print(table)


def field(name: str) -> Column:
    return name, lambda item: item.get(name)


def emit_pages(
    pages: Iterator[dict[str, Any]],
    *,
    as_json: bool,
    all_pages: bool,
    columns: Sequence[Column],
    keyset: bool = True,
) -> None:
    """A list command's output. `pages` yields pages ({items, cursor} or {items, next, has_more});
    without `all_pages` only the first is read. JSON: that page as the API answered it, or with
    --all one document holding every item. A table otherwise, with how to get the next page."""
    first = next(pages)
    page = first
    items = list(first["items"])
    if all_pages:
        for page in pages:
            items += page["items"]
    if as_json:
        if not all_pages:
            # The API leaves the cursor out on the last page; scripts read `.cursor` either way.
            print_json({**first, "cursor": first.get("cursor")} if keyset else first)
            return
        merged = {**first, "items": items}
        if keyset:
            merged["cursor"] = None
        else:
            merged.update(next=page.get("next"), has_more=False)
        print_json(merged)
        return
    print_table(items, columns)
    if "total_size" in first:
        bound = "at least " if first.get("total_is_lower_bound") else ""
        err.print(f"{len(items)} shown of {bound}{first['total_size']}", highlight=False)
    if not all_pages:
        if keyset and first.get("cursor"):
            err.print(f"more: --cursor {first['cursor']}", highlight=False, soft_wrap=True)
        elif not keyset and first.get("has_more"):
            err.print(f"more: --after {first['next']}", highlight=False, soft_wrap=True)


def keyset_pages(fetch: Callable[[str | None], dict[str, Any]], cursor: str | None = None) -> Iterator[dict[str, Any]]:
    while True:
        page = fetch(cursor)
        yield page
        cursor = page.get("cursor")
        if not cursor:
            return


def stream_pages(fetch: Callable[[int], dict[str, Any]], after: int = 0) -> Iterator[dict[str, Any]]:
    while True:
        page = fetch(after)
        yield page
        if not page.get("has_more") or not page["items"]:
            return
        after = int(page["next"])


@contextmanager
def transfer(description: str) -> Iterator[Callable[[int, int], None]]:
    """A progress callback for a large body: a rich bar on a terminal (stderr), nothing when piped.
    The bar appears at the first report, so a body small enough to go inline shows none."""
    if not err.is_terminal:
        yield lambda done, total: None
        return
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    shown: list[tuple[Progress, Any]] = []

    def update(done: int, total: int) -> None:
        if not shown:
            progress = Progress(*columns, console=err, transient=True)
            progress.start()
            shown.append((progress, progress.add_task(description, total=total or None)))
        progress, task = shown[0]
        progress.update(task, completed=done, total=total or None)

    try:
        yield update
    finally:
        for progress, _ in shown:
            progress.stop()


# ---- inputs -----------------------------------------------------------------------------------


def open_input(file: str | None) -> IO[bytes]:
    """A binary stream for --file: the file, or stdin for `-` (and when no file is given)."""
    if file is None or file == "-":
        if sys.stdin.isatty():
            err.print("reading from stdin (end with Ctrl-D)", highlight=False)
        return sys.stdin.buffer
    return checked_path(file).open("rb")


def checked_path(file: str | os.PathLike[str]) -> Path:
    path = Path(file)
    if not path.exists():
        raise CliError(f"no such file: {file}")
    if path.is_dir():
        raise CliError(f"{file} is a directory, not a file")
    if not os.access(path, os.R_OK):
        raise CliError(f"cannot read {file}: permission denied")
    return path
