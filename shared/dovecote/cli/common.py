"""What every `dovecote` command shares: the client, the one output switch (`--json`), tables,
progress bars, reading inputs, and the options named like the API's fields.

Output: without `--json` a command prints for a person (a field table, a list table with full refs
and ids, a body); with `--json` it prints the HTTP answer's JSON, the same envelope and keys
(`{"task": …}`, `{"assignment": …}`, a page with its cursor; with `--all` every item in one page).
A command whose route answers 204 prints what it did (`{"ref": …, "deleted": true}`). Errors are
`dovecote.cli.errors`'s.

rich is imported only when something is printed through it (a table, a progress bar): `notes get`
streams a body to stdout without it.
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

from dovecote.cli.errors import EXIT_API, EXIT_NOTHING, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, CliError
from dovecote.cli.groups import EXIT_CODES_HELP, SELECTED
from dovecote.client import DovecoteClient
from dovecote.client.paging import keyset_pages, stream_pages

__all__ = [
    "keyset_pages",
    "stream_pages",
    "EXIT_API",
    "EXIT_CODES_HELP",
    "EXIT_NOTHING",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "CliError",
]


class LazyConsole:
    """A rich Console created on first use, so a command that prints no table never imports rich."""

    def __init__(self, *, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Any = None

    def console(self) -> Any:
        if self._console is None:
            from rich.console import Console

            if self._stderr:
                self._console = Console(stderr=True)
            else:
                # Tables are never squeezed below their content when piped: a ref `list` prints must be whole.
                self._console = Console(width=None if sys.stdout.isatty() else 100_000, soft_wrap=False)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.console(), name)


out: Any = LazyConsole(stderr=False)
err: Any = LazyConsole(stderr=True)


def client(role: str = "caller", *, pooled: bool = False, **options: Any) -> DovecoteClient:
    """The client of `role`, configured as `dovecote.client.config` resolves it (`--profile` first). A
    command's client opens one connection per request (`dovecote.client.oneshot`); `pooled` keeps
    httpx's connection pool, for a process that lives on (the MCP server)."""
    if not pooled:
        from dovecote.client.oneshot import oneshot_options

        options = oneshot_options(**options)
    return DovecoteClient.from_env(role, profile=SELECTED["profile"], **options)


# ---- options named like the API's fields ---------------------------------------------------------

Json = Annotated[bool, typer.Option("--json", help="Print the HTTP answer's JSON (one document) instead of a table.")]
AllPages = Annotated[bool, typer.Option("--all", help="Follow the cursor to the end (one document with --json).")]
Limit = Annotated[int | None, typer.Option(help="Items per page (the server's default when absent).")]
Cursor = Annotated[str | None, typer.Option(help="The `cursor` of the previous page.")]
CommandId = Annotated[
    str | None,
    typer.Option(help="The command's id: reuse it to retry safely (an exact retry replays); generated when absent."),
]
ExpectedRevision = Annotated[
    int,
    typer.Option(
        "--expected-revision", "--rev", help="The task revision you expect (the command is a compare-and-swap)."
    ),
]
Fence = Annotated[int, typer.Option("--fence", help="The fence of your lease (from `worker claim`).")]
# A token's worker id and agent, as `tokens create`, `tokens bootstrap` and `dev token` take them.
TokenWorker = Annotated[str | None, typer.Option(help="Worker id (worker tokens).")]
TokenAgent = Annotated[
    str | None, typer.Option(help="Caller tokens only: the only note author the token may write as.")
]
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
        out.print(f"[bold]{name.ljust(width)}[/bold]  {shown(text)}", highlight=False, soft_wrap=True)


def emit(value: Any, as_json: bool, envelope: str | None = None) -> None:
    """The answer: with --json as the HTTP answer (`{envelope: value}` when the SDK unwrapped it),
    else its fields."""
    if as_json:
        print_json({envelope: value} if envelope else value)
    else:
        print_fields(value)


def say(line: str) -> None:
    """One line for a person, on stdout."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def note(line: str) -> None:
    """One line for a person, on stderr (what goes beside the answer: more pages, a warning)."""
    sys.stdout.flush()
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def done(as_json: bool, document: dict[str, Any], line: str) -> None:
    """A command whose route answers 204: what it did, as JSON or as one line."""
    if as_json:
        print_json(document)
    else:
        say(line)


Column = tuple[str, Callable[[dict[str, Any]], Any]]
FULL = {"ref", "read_ref", "id", "task", "token_id"}  # never folded or cut: what a list prints works elsewhere


def shown(text: str) -> str:
    """Text an agent may have written, as rich prints it literally: its markup escaped, and every
    character a terminal would act on (ESC and the other controls) shown as its escape (`\\x1b`),
    never sent; newlines kept. Every cell and field the CLI prints goes through it."""
    from rich.markup import escape

    kept = (c if c.isprintable() or c == "\n" else c.encode("unicode_escape").decode("ascii") for c in text)
    return escape("".join(kept))


def print_table(items: Sequence[dict[str, Any]], columns: Sequence[Column]) -> None:
    from rich.table import Table

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
            row.append("" if cell is None else shown(str(cell)))
        table.add_row(*row)
    out.print(table)


def field(name: str) -> Column:
    return name, lambda item: item.get(name)


def fields(*names: str) -> list[Column]:
    return [field(name) for name in names]


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
        note(f"{len(items)} shown of {bound}{first['total_size']}")
    if not all_pages:
        if keyset and first.get("cursor"):
            note(f"more: --cursor {first['cursor']}")
        elif not keyset and first.get("has_more"):
            note(f"more: --after {first['next']}")


@contextmanager
def transfer(description: str) -> Iterator[Callable[[int, int], None]]:
    """A progress callback for a large body: a rich bar on a terminal (stderr), nothing when piped.
    The bar appears at the first report, so a body small enough to go inline shows none."""
    if not sys.stderr.isatty():
        yield lambda done, total: None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    shown: list[tuple[Any, Any]] = []

    def update(done: int, total: int) -> None:
        if not shown:
            progress = Progress(*columns, console=err.console(), transient=True)
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
            note("reading from stdin (end with Ctrl-D)")
        return sys.stdin.buffer
    return checked_path(file).open("rb")


def checked_path(file: str | os.PathLike[str]) -> Path:
    path = Path(file)
    if not path.exists():
        raise CliError(f"no such file: {file}", details={"file": str(file)})
    if path.is_dir():
        raise CliError(f"{file} is a directory, not a file", details={"file": str(file)})
    if not os.access(path, os.R_OK):
        raise CliError(f"cannot read {file}: permission denied", details={"file": str(file)})
    return path
