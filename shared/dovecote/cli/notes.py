"""`dovecote notes …`: put, get, ls, rm. A note is named by its ref (64 hex) or by its coordinates
KEY RUN NAME (+ --author), from which the ref is computed locally. Bodies stream from and to files."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated

import typer

from dovecote.cli.common import (
    EXIT_USAGE,
    AllPages,
    CliError,
    FileOpt,
    Json,
    checked_path,
    client,
    emit,
    emit_pages,
    err,
    field,
    keyset_pages,
    open_input,
    out,
    print_json,
    transfer,
)
from dovecote.notes.model import INLINE_LIMIT, is_ref, note_ref

notes_app = typer.Typer(help="Notes: pass work between agents by (key, run, name, author).", no_args_is_help=True)

NoteArgs = Annotated[list[str], typer.Argument(help="REF (64 hex), or KEY RUN NAME.", show_default=False)]
Author = Annotated[str, typer.Option(help="Author; empty is the shared scope.")]


def resolve_ref(args: list[str], author: str) -> str:
    """REF, or KEY RUN NAME (+ author) → the ref, as every agent computes it."""
    if len(args) == 1:
        if not is_ref(args[0]):
            raise CliError(f"{args[0]!r} is not a ref (64 lowercase hex); give a ref, or KEY RUN NAME", EXIT_USAGE)
        if author:
            raise CliError("--author names coordinates; a ref already names one note", EXIT_USAGE)
        return args[0]
    if len(args) == 3:
        key, run, name = args
        try:
            number = int(run)
        except ValueError:
            raise CliError(f"RUN must be an integer, got {run!r}", EXIT_USAGE) from None
        return note_ref(key, number, name, author)
    raise CliError(f"give a ref, or KEY RUN NAME ({len(args)} arguments given)", EXIT_USAGE)


@notes_app.command("put")
def notes_put(
    key: str,
    run: int,
    name: str,
    file: FileOpt = None,
    author: Author = "",
    content_type: Annotated[
        str | None, typer.Option(help="Media type (default: guessed from --file's name; UTF-8 text otherwise).")
    ] = None,
    as_json: Json = False,
) -> None:
    """Store a note body from a file (--file) or stdin. Large bodies stream through a presigned upload."""
    c = client()
    if file is not None and file != "-":
        path = checked_path(file)
        size = path.stat().st_size
        with transfer(f"upload {path.name}") if size > INLINE_LIMIT else nullcontext(None) as progress:
            note = c.put_note(key, run, name, path, author=author, content_type=content_type, progress=progress)
    else:
        with transfer("upload stdin") as progress:
            note = c.put_note(
                key, run, name, open_input(file), author=author, content_type=content_type, progress=progress
            )
    emit(note, as_json)


@notes_app.command("get")
def notes_get(
    args: NoteArgs,
    author: Author = "",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the body to FILE instead of stdout.")
    ] = None,
    meta: Annotated[bool, typer.Option(help="Print the metadata instead of the body.")] = False,
    as_json: Json = False,
) -> None:
    """Print a note's body (streamed), by ref or by KEY RUN NAME (the ref is computed locally).

    --json prints the API's answer (metadata and text, body_b64 or download_url) instead."""
    ref = resolve_ref(args, author)
    c = client()
    if as_json or meta:
        answer = c.get_note_meta(ref)
        if as_json:
            print_json(answer)
        else:
            emit({k: v for k, v in answer.items() if k not in ("text", "body_b64", "download_url")}, False)
        return
    if output is not None:
        if output.is_dir():
            raise CliError(f"{output} is a directory", EXIT_USAGE)
        with transfer(f"download {output.name}") as progress:
            c.download_note(ref, output, progress=progress)
        err.print(f"wrote {output}", highlight=False)
        return
    # No bar over a body that is itself being written to the terminal.
    with transfer("download") if not sys.stdout.isatty() else nullcontext(None) as progress:
        c.download_note(ref, sys.stdout.buffer, progress=progress)
    sys.stdout.flush()


@notes_app.command("ls")
def notes_ls(
    key: Annotated[str, typer.Option()] = "",
    run: Annotated[int | None, typer.Option()] = None,
    name: Annotated[str, typer.Option()] = "",
    author: Annotated[str | None, typer.Option(help="Omit for any author; '' for the shared scope.")] = None,
    limit: Annotated[int | None, typer.Option()] = None,
    cursor: Annotated[str | None, typer.Option()] = None,
    all_pages: AllPages = False,
    as_json: Json = False,
) -> None:
    """List notes in ref order (full refs: any of them works in `notes get` and `notes rm`)."""
    c = client()
    pages = keyset_pages(
        lambda cur: c.list_notes(key=key, run=run, name=name, author=author, limit=limit, cursor=cur), cursor
    )
    columns = [field(n) for n in ("ref", "key", "run", "name", "author", "size", "updated_at")]
    emit_pages(pages, as_json=as_json, all_pages=all_pages, columns=columns)


@notes_app.command("rm")
def notes_rm(args: NoteArgs, author: Author = "", as_json: Json = False) -> None:
    """Delete exactly one note, by ref or by KEY RUN NAME."""
    ref = resolve_ref(args, author)
    client().delete_note(ref)
    if as_json:
        print_json({"ref": ref, "deleted": True})
    else:
        out.print(f"deleted {ref}", highlight=False)
