"""`dovecote notes …`: put, get, list (`ls`), delete (`rm`). A note is named by its ref (64 hex) or by
its coordinates KEY RUN NAME (+ --author), from which the ref is computed locally. Bodies stream from
and to files. `get` is the command agents run most: it imports neither rich nor the other groups. On a
terminal a body that does not end with a newline gets one (the prompt on its own line); piped, the
bytes are exact."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import IO, Annotated

import typer

from dovecote.cli.common import (
    EXIT_USAGE,
    CliError,
    FileOpt,
    Json,
    checked_path,
    client,
    done,
    emit,
    fields,
    note,
    open_input,
    print_json,
    transfer,
)
from dovecote.cli.groups import new_app
from dovecote.cli.verbs import Pages, Verb, param, register
from dovecote.client.errors import DovecoteError
from dovecote.notes.limits import INLINE_LIMIT
from dovecote.notes.refs import is_ref, note_ref

app = new_app("Notes: pass work between agents by (key, run, name, author).")

NoteArgs = Annotated[list[str], typer.Argument(metavar="REF | KEY RUN NAME", help="REF (64 hex), or KEY RUN NAME.")]
Author = Annotated[str, typer.Option(help="Author; empty is the shared scope.")]


def _integer(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def run_number(key: str, run: str, name: str, verb: str) -> int:
    """RUN of KEY RUN NAME as an integer; a RUN that is not one is a usage error that names it, and
    when KEY is an integer instead (the two swapped) shows the command in the right order."""
    number = _integer(run)
    if number is not None:
        return number
    message = f"RUN (the second of KEY RUN NAME) must be an integer, got {run!r}"
    if _integer(key) is not None:
        message += f"; the first, {key!r}, is one: did you mean `dovecote notes {verb} {shlex.join([run, key, name])}`?"
    raise CliError(message, EXIT_USAGE, details={"argument": "RUN", "value": run})


def resolve_ref(args: list[str], author: str, verb: str = "get") -> str:
    """REF, or KEY RUN NAME (+ author) → the ref, as every agent computes it."""
    if len(args) == 1:
        if not is_ref(args[0]):
            raise CliError(f"{args[0]!r} is not a ref (64 lowercase hex); give a ref, or KEY RUN NAME", EXIT_USAGE)
        if author:
            raise CliError("--author names coordinates; a ref already names one note", EXIT_USAGE)
        return args[0]
    if len(args) == 3:
        key, run, name = args
        return note_ref(key, run_number(key, run, name, verb), name, author)
    raise CliError(f"give a ref, or KEY RUN NAME ({len(args)} arguments given)", EXIT_USAGE)


@contextmanager
def named_by_coordinates(args: list[str], author: str) -> Iterator[None]:
    """A 404 for a note named by KEY RUN NAME says what was asked for: the author is part of the
    coordinates (no --author is the shared scope, not any author), and how to list the run's notes."""
    try:
        yield
    except DovecoteError as exc:
        if len(args) != 3 or exc.status != 404 or exc.code != "not_found":
            raise
        key, run, name = args
        scope = " (the shared scope)" if not author else ""
        listing = f"dovecote notes list --key {shlex.quote(key)} --run {run}"
        raise DovecoteError(
            exc.status,
            exc.code,
            f"no note at key {key!r}, run {run}, name {name!r}, author {author!r}{scope}: the author is part of a "
            f"note's coordinates: give --author AUTHOR, or see the run's notes and their authors with `{listing}`",
            {**exc.details, "key": key, "run": int(run), "name": name, "author": author},
        ) from None


@app.command("put")
def notes_put(
    key: Annotated[str, typer.Argument(metavar="KEY", help="The note's key.", show_default=False)],
    run: Annotated[str, typer.Argument(metavar="RUN", help="The run number (an integer).", show_default=False)],
    name: Annotated[str, typer.Argument(metavar="NAME", help="The note's name.", show_default=False)],
    file: FileOpt = None,
    author: Author = "",
    content_type: Annotated[
        str | None, typer.Option(help="Media type (default: guessed from --file's name; UTF-8 text otherwise).")
    ] = None,
    as_json: Json = False,
) -> None:
    """Store a note body from a file (--file) or stdin. Large bodies stream through a presigned upload."""
    number = run_number(key, run, name, "put")
    c = client()
    if file is not None and file != "-":
        path = checked_path(file)
        size = path.stat().st_size
        with transfer(f"upload {path.name}") if size > INLINE_LIMIT else nullcontext(None) as progress:
            answer = c.put_note(key, number, name, path, author=author, content_type=content_type, progress=progress)
    else:
        with transfer("upload stdin") as progress:
            answer = c.put_note(
                key, number, name, open_input(file), author=author, content_type=content_type, progress=progress
            )
    emit(answer, as_json)


@app.command("get")
def notes_get(
    ref: NoteArgs,
    author: Author = "",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the body to FILE instead of stdout.")
    ] = None,
    meta: Annotated[bool, typer.Option(help="Print the metadata instead of the body.")] = False,
    as_json: Json = False,
) -> None:
    """Print a note's body (streamed), by ref or by KEY RUN NAME (the ref is computed locally).

    --json prints the HTTP answer (metadata and text, body_b64 or download_url) instead."""
    wanted = resolve_ref(ref, author)
    with named_by_coordinates(ref, author):
        _get(wanted, output, meta, as_json)


def _get(wanted: str, output: Path | None, meta: bool, as_json: bool) -> None:
    c = client()
    if as_json or meta:
        answer = c.get_note_meta(wanted)
        if as_json:
            print_json(answer)
        else:
            emit({k: v for k, v in answer.items() if k not in ("text", "body_b64", "download_url")}, False)
        return
    if output is not None:
        if output.is_dir():
            raise CliError(f"{output} is a directory", EXIT_USAGE)
        with transfer(f"download {output.name}") as progress:
            c.download_note(wanted, output, progress=progress)
        note(f"wrote {output}")
        return
    # No bar over a body that is itself being written to the terminal.
    terminal = sys.stdout.isatty()
    written = LastByte(sys.stdout.buffer)
    with transfer("download") if not terminal else nullcontext(None) as progress:
        c.download_note(wanted, written, progress=progress)  # type: ignore[arg-type]  # it writes, as IO[bytes]
    if terminal and written.last not in (b"", b"\n"):
        written.write(b"\n")  # the prompt on a line of its own; piped, the bytes stay exact
    sys.stdout.flush()


class LastByte:
    """A binary stream that remembers the last byte written through it."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self.last = b""

    def write(self, data: bytes) -> int:
        if data:
            self.last = bytes(data[-1:])
        return self._stream.write(data)

    def flush(self) -> None:
        self._stream.flush()


register(
    app,
    (
        Verb(
            "list",
            "GET /v1/notes",
            "List notes in ref order (full refs: any of them works in `notes get` and `notes delete`).",
            (
                param("key", Annotated[str, typer.Option(help="Only this key's notes.")], ""),
                param("run", Annotated[int | None, typer.Option(help="Only this run's.")], None),
                param("name", Annotated[str, typer.Option(help="Only notes of this name.")], ""),
                param(
                    "author",
                    Annotated[str | None, typer.Option(help="Omit for any author; '' for the shared scope.")],
                    None,
                ),
            ),
            lambda c, v: (
                lambda cursor: c.list_notes(
                    key=v["key"], run=v["run"], name=v["name"], author=v["author"], limit=v["limit"], cursor=cursor
                )
            ),
            Pages(fields("ref", "key", "run", "name", "author", "size", "updated_at")),
        ),
    ),
)


@app.command("delete")
def notes_delete(ref: NoteArgs, author: Author = "", as_json: Json = False) -> None:
    """Delete exactly one note, by ref or by KEY RUN NAME."""
    wanted = resolve_ref(ref, author, "delete")
    with named_by_coordinates(ref, author):
        client().delete_note(wanted)
    done(as_json, {"ref": wanted, "deleted": True}, f"deleted {wanted}")
