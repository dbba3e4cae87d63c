"""`dovecote memory …`: the memory write queue from the command line. Every command takes --json (the
HTTP answer: a page for `list` and `relations`, `{"relation": …}` for `judge`). The verbs that differ
only by route and fields are built from the verb table (`dovecote.cli.verbs`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from dovecote.cli.common import EXIT_NOTHING, Json, client, done, fields, print_json, say
from dovecote.cli.errors import swapped
from dovecote.cli.groups import new_app
from dovecote.cli.verbs import Pages, Show, Verb, param, redrive, register
from dovecote.memory.model import DECISIONS, SCOPE_PATTERN


def relation_of(values: dict[str, Any]) -> str:
    """RELATION, unless it is a decision (the two arguments swapped): a usage error in the right order."""
    relation, decision = values["relation_id"], values["decision"]
    if relation in DECISIONS and decision not in DECISIONS:
        why = "is a decision: the order is RELATION DECISION"
        raise swapped("RELATION", relation, why, "dovecote", "memory", "judge", decision, relation)
    return str(relation)


app = new_app("Memory: submit writes to the serialized queue, read evidence, judge relation candidates.")

Scope = Annotated[str, typer.Argument(metavar="SCOPE", help="The memory scope (e.g. team/infra).")]
WriteId = Annotated[str, typer.Argument(metavar="WRITE", help="The write's id (from submit).")]
Wait = Annotated[int, typer.Option(help="Wait up to N seconds (≤ 20) for the write to settle.")]


def _status_line(status: dict[str, Any]) -> None:
    evidence = status.get("evidence")
    line = f"{status['id']}  {status['status']}"
    if evidence:
        line += f"  {evidence['code']}  write_ok={str(evidence['write_ok']).lower()}"
        if evidence.get("error"):
            line += f"  ({evidence['error']['code']}: {evidence['error']['message']})"
    say(line)
    for c in (evidence or {}).get("candidates", []):
        say(f"  {c['verb']} → {c['to']}  {c.get('id', '')}  {c['note']}")


@app.command("submit")
def submit(
    scope: Scope,
    content: Annotated[str, typer.Argument(metavar="CONTENT", help="The memory (a fact, up to 8 KiB).")],
    tags: Annotated[
        list[str] | None, typer.Option("--tags", "--tag", "-t", help="A tag (repeat for more); subject:<key>.")
    ] = None,
    write_id: Annotated[str | None, typer.Option("--id", help="The write's id; reuse it to retry safely.")] = None,
    wait: Wait = 0,
    as_json: Json = False,
) -> None:
    """Queue a memory write (202 queued); with --wait, print its status and evidence once settled."""
    # Swapped when CONTENT is shaped like a scope (one word with a `/`, as team/infra) and SCOPE cannot
    # be one; a bad scope before a one-word memory is the API's to refuse.
    if not SCOPE_PATTERN.fullmatch(scope) and SCOPE_PATTERN.fullmatch(content) and "/" in content:
        why = "cannot be a scope (letters, digits and . _ : / -, at most 128); the order is SCOPE CONTENT"
        raise swapped("SCOPE", scope, why, "dovecote", "memory", "submit", content, scope)
    c = client()
    answer = c.submit_memory(scope, content, tags=tags, write_id=write_id)
    if wait:
        answer = c.memory_write(answer["id"], wait=wait)
    if as_json:
        print_json(answer)
    elif wait:
        _status_line(answer)
    else:
        say(f"{answer['id']}  {answer['status']}")


@app.command("status")
def status(write_id: WriteId, wait: Wait = 0, as_json: Json = False) -> None:
    """A write's status and evidence (candidates, error)."""
    answer = client().memory_write(write_id, wait=wait or None)
    if as_json:
        print_json(answer)
    else:
        _status_line(answer)


@app.command("cancel")
def cancel(write_id: WriteId, as_json: Json = False) -> None:
    """Cancel a queued write; exit 3 when it had already started (or finished)."""
    cancelled = client().cancel_memory_write(write_id)
    outcome = "cancelled" if cancelled else "not cancelled: it already started or finished"
    done(as_json, {"id": write_id, "cancelled": cancelled}, f"{write_id}  {outcome}")
    if not cancelled:
        raise typer.Exit(EXIT_NOTHING)


register(
    app,
    (
        Verb(
            "list",
            "GET /v1/memory",
            "A scope's memories in applied order.",
            (param("scope", Scope),),
            lambda c, v: lambda cursor: c.list_memories(v["scope"], limit=v["limit"], cursor=cursor),
            Pages([*fields("seq", "id", "content"), ("tags", lambda m: " ".join(m["tags"])), *fields("applied_at")]),
        ),
        Verb(
            "relations",
            "GET /v1/memory/relations",
            "A scope's relation candidates.",
            (
                param("scope", Scope),
                param(
                    "status",
                    Annotated[str | None, typer.Option(help="pending | confirmed | dismissed (default: all)")],
                    None,
                ),
            ),
            lambda c, v: (
                lambda cursor: c.memory_relations(v["scope"], status=v["status"], limit=v["limit"], cursor=cursor)
            ),
            Pages(fields("id", "from", "verb", "to", "status", "note")),
        ),
        Verb(
            "judge",
            "POST /v1/memory/relations/{id}/judgment",
            "Confirm or dismiss a pending relation candidate, once.",
            (
                param("relation_id", Annotated[str, typer.Argument(metavar="RELATION", help="The candidate's id.")]),
                param("decision", Annotated[str, typer.Argument(metavar="DECISION", help="confirmed | dismissed")]),
                param("note", Annotated[str | None, typer.Option(help="Why.")], None),
                param(
                    "command_id",
                    Annotated[str | None, typer.Option(help="Reuse to retry safely; generated when absent.")],
                    None,
                ),
            ),
            lambda c, v: c.judge_relation(relation_of(v), v["decision"], note=v["note"], command_id=v["command_id"]),
            Show("relation"),
        ),
        redrive(
            "POST /v1/memory/redrive",
            "Move this authority's dead-lettered writes back to the queue (admin token).",
            lambda c, limit: c.redrive_memory(limit=limit),
        ),
    ),
)
