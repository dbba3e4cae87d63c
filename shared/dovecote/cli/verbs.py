"""Verbs built from a table: the commands that differ only by their route, their fields and how their
answer prints. A `Verb` names its HTTP route, its parameters (each named like the route's field: the
Python name is the HTTP field and the long option), whose token it needs, the SDK call, and its output:

- `Show(envelope)`: one object. `--json` prints the HTTP answer (`{envelope: …}` around what the SDK
  unwrapped), a person gets its fields.
- `Pages(columns)`: a list. The verb gets `--limit` and `--cursor` (keyset) or `--after` (a sequence
  stream), and `--all`; `--json` prints the page (or every page as one).
- `Did(document, line)`: a route that answers 204; `--json` prints what was done.

Every verb gets `--json`. The typer command is made from the table by giving a function the
signature typer reads (`__signature__`), so the verbs are ordinary typer commands: same help, same
parsing, same introspection as the hand-written ones.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from dovecote.cli.common import (
    AllPages,
    Column,
    Cursor,
    Json,
    Limit,
    client,
    done,
    emit,
    emit_pages,
    keyset_pages,
    note,
    say,
    stream_pages,
)

Values = dict[str, Any]
REQUIRED = inspect.Parameter.empty
After = Annotated[int, typer.Option(help="Start after this sequence number (the previous page's `next`).")]


def param(name: str, annotation: Any, default: Any = REQUIRED) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


@dataclass(frozen=True)
class Show:
    envelope: str | None = None
    note: str = ""  # a line for a person after the fields (on stderr), never with --json

    def params(self) -> list[inspect.Parameter]:
        return []

    def print(self, result: Any, values: Values, as_json: bool) -> None:
        emit(result, as_json, self.envelope)
        if self.note and not as_json:
            note(self.note)


@dataclass(frozen=True)
class Pages:
    columns: Sequence[Column]
    keyset: bool = True

    def params(self) -> list[inspect.Parameter]:
        paging = [param("cursor", Cursor, None)] if self.keyset else [param("after", After, 0)]
        return [param("limit", Limit, None), *paging, param("all_pages", AllPages, False)]

    def print(self, fetch: Any, values: Values, as_json: bool) -> None:
        if self.keyset:
            pages = keyset_pages(fetch, values.get("cursor"))
        else:
            pages = stream_pages(fetch, values.get("after") or 0)
        emit_pages(pages, as_json=as_json, all_pages=values["all_pages"], columns=self.columns, keyset=self.keyset)


@dataclass(frozen=True)
class Did:
    document: Callable[[Values], dict[str, Any]]
    line: Callable[[Values], str]

    def params(self) -> list[inspect.Parameter]:
        return []

    def print(self, result: Any, values: Values, as_json: bool) -> None:
        done(as_json, self.document(values), self.line(values))


@dataclass(frozen=True)
class Rows:
    """A short list the route answers whole (`{items}`): `--json` prints that answer, a person gets
    one `line` per item."""

    line: Callable[[dict[str, Any]], str]

    def params(self) -> list[inspect.Parameter]:
        return []

    def print(self, result: Any, values: Values, as_json: bool) -> None:
        if as_json:
            emit({"items": result}, True)
            return
        for item in result:
            say(self.line(item))


Output = Show | Pages | Did | Rows


@dataclass(frozen=True)
class Verb:
    name: str
    route: str  # "POST /v1/tasks/{id}/accept": what the verb sends
    help: str
    params: tuple[inspect.Parameter, ...]
    # The SDK call: its answer (Show, Did) or, for Pages, a function of the cursor (or `after`) → a page.
    call: Callable[[Any, Values], Any]
    output: Output = Show()
    role: str = "caller"


def redrive(route: str, help: str, call: Callable[[Any, int], Any]) -> Verb:
    """`redrive` (admin token): a dead-letter queue's redrive, memory's or the webhooks', whose
    `--limit` is the one rule of platform/redrive.py."""
    from dovecote.platform.redrive import DEFAULT_REDRIVE, MAX_REDRIVE

    limit = Annotated[int, typer.Option(help=f"Dead letters to look at, 1–{MAX_REDRIVE}.")]
    return Verb(
        "redrive",
        route,
        help,
        (param("limit", limit, DEFAULT_REDRIVE),),
        lambda c, v: call(c, v["limit"]),
        role="admin",
    )


def run(verb: Verb, values: Values) -> None:
    as_json = bool(values.pop("as_json", False))
    sdk = client(verb.role)
    result = verb.call(sdk, values)
    verb.output.print(result, values, as_json)


def command(verb: Verb) -> Callable[..., None]:
    """The typer command of one verb."""

    def invoke(**values: Any) -> None:
        run(verb, values)

    parameters = [*verb.params, *verb.output.params(), param("as_json", Json, False)]
    invoke.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    invoke.__doc__ = verb.help
    invoke.__name__ = verb.name.replace("-", "_")
    return invoke


def register(app: typer.Typer, verbs: Sequence[Verb]) -> None:
    for verb in verbs:
        app.command(verb.name)(command(verb))


__all__ = ["Did", "Pages", "Show", "Values", "Verb", "command", "param", "redrive", "register", "run"]
