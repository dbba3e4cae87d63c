"""The `dovecote` command line (typer + rich)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from dovecote.client import DovecoteClient, DovecoteError

app = typer.Typer(help="Dovecote: durable notes, tasks, recall and memory for teams of agents.", no_args_is_help=True)
tokens_app = typer.Typer(help="Bearer tokens.", no_args_is_help=True)
notes_app = typer.Typer(help="Notes: pass work between agents by (key, run, name, author).", no_args_is_help=True)
app.add_typer(tokens_app, name="tokens")
app.add_typer(notes_app, name="notes")
out = Console()
err = Console(stderr=True)


def _client(role: str = "caller") -> DovecoteClient:
    return DovecoteClient.from_env(role)


def _fail(exc: DovecoteError) -> None:
    err.print(f"[red]error[/red] {exc.status} {exc.code}: {exc.message}")
    if exc.details:
        err.print_json(json.dumps(exc.details))
    raise typer.Exit(1)


@app.command()
def dev(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind (0 picks a free one).")] = 8787,
    data: Annotated[Path | None, typer.Option(help="Persist state in DIR (not built yet).")] = None,
    tokens_file: Annotated[Path, typer.Option(help="Where to write the dev tokens.")] = Path(
        ".dovecote/dev-tokens.json"
    ),
) -> None:
    """Run the whole service locally over moto, with API Gateway emulated."""
    if data is not None:
        err.print("[red]--data is not built yet:[/red] state lives in memory and ends with the process.")
        raise typer.Exit(2)
    from infra.local.runtime import LocalRuntime

    runtime = LocalRuntime(host=host, port=port, tokens_file=tokens_file).start()
    out.print(f"Dovecote dev runtime ready at {runtime.endpoint}")
    out.print(f"tokens: {tokens_file} (authority 'dev'; roles admin, caller, worker)", highlight=False)
    sys.stdout.flush()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        runtime.stop()


@tokens_app.command("create")
def tokens_create(
    authority: Annotated[str, typer.Option(help="Authority the token acts in.")],
    role: Annotated[str, typer.Option(help="caller, worker or admin.")] = "caller",
    worker: Annotated[str | None, typer.Option(help="Worker id (worker tokens).")] = None,
) -> None:
    """Mint a token with an admin token (DOVECOTE_TOKEN, or the dev admin token)."""
    try:
        created = _client("admin").create_token(authority, role, worker)
    except DovecoteError as exc:
        _fail(exc)
        return
    out.print_json(json.dumps(created))


@notes_app.command("put")
def notes_put(
    key: str,
    run: int,
    name: str,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Read the body from FILE (default: stdin).")] = None,
    author: Annotated[str, typer.Option(help="Author; empty is the shared scope.")] = "",
    content_type: Annotated[str | None, typer.Option(help="Media type of the body.")] = None,
) -> None:
    """Store a note body from stdin or a file."""
    data = file.read_bytes() if file else sys.stdin.buffer.read()
    body: bytes | str = data
    if content_type is None:
        try:
            body = data.decode("utf-8")
        except UnicodeDecodeError:
            body = data
    try:
        note = _client().put_note(key, run, name, body, author=author, content_type=content_type)
    except DovecoteError as exc:
        _fail(exc)
        return
    out.print_json(json.dumps(note))


@notes_app.command("get")
def notes_get(
    ref: Annotated[str | None, typer.Argument(help="The note's ref; or give --key/--run/--name.")] = None,
    key: Annotated[str, typer.Option()] = "",
    run: Annotated[int, typer.Option()] = 0,
    name: Annotated[str, typer.Option()] = "",
    author: Annotated[str, typer.Option()] = "",
    meta: Annotated[bool, typer.Option(help="Print the metadata instead of the body.")] = False,
) -> None:
    """Print a note's body (by ref, or by coordinates: the ref is computed locally)."""
    client = _client()
    try:
        note = client.get_note(ref) if ref else client.get_note_at(key, run, name, author)
    except DovecoteError as exc:
        _fail(exc)
        return
    if meta:
        fields = {k: v for k, v in note.__dict__.items() if k != "body"}
        out.print_json(json.dumps(fields))
    else:
        sys.stdout.buffer.write(note.body)
        sys.stdout.flush()


@notes_app.command("ls")
def notes_ls(
    key: Annotated[str, typer.Option()] = "",
    run: Annotated[int | None, typer.Option()] = None,
    name: Annotated[str, typer.Option()] = "",
    author: Annotated[str | None, typer.Option(help="Omit for any author; '' for the shared scope.")] = None,
    limit: Annotated[int | None, typer.Option()] = None,
    cursor: Annotated[str | None, typer.Option()] = None,
    all_pages: Annotated[bool, typer.Option("--all", help="Follow the cursor to the end.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """List notes in Ref order."""
    client = _client()
    table = Table("ref", "key", "run", "name", "author", "size", "updated_at")
    try:
        while True:
            page = client.list_notes(key=key, run=run, name=name, author=author, limit=limit, cursor=cursor)
            for item in page["items"]:
                if as_json:
                    out.print(json.dumps(item), highlight=False, soft_wrap=True)
                else:
                    table.add_row(
                        item["ref"][:16],
                        item["key"],
                        str(item["run"]),
                        item["name"],
                        item["author"],
                        str(item["size"]),
                        item["updated_at"],
                    )
            cursor = page.get("cursor")
            if not all_pages or not cursor:
                break
    except DovecoteError as exc:
        _fail(exc)
        return
    if not as_json:
        out.print(table)
        if cursor:
            out.print(f"more: --cursor {cursor}", highlight=False, soft_wrap=True)


@notes_app.command("rm")
def notes_rm(ref: str) -> None:
    """Delete exactly one note."""
    try:
        _client().delete_note(ref)
    except DovecoteError as exc:
        _fail(exc)
        return
    out.print(f"deleted {ref}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
