"""`dovecote memory …`: the memory write queue from the command line (typer + rich). Mounted by the
main CLI as `app.add_typer(memory_app, name="memory")`. Every command takes --json."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from dovecote.cli.common import out
from dovecote.client.memory import MemoryClient

memory_app = typer.Typer(
    help="Memory: submit writes to the serialized queue, read evidence, judge relation candidates.",
    no_args_is_help=True,
)

Json = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _client(role: str = "caller") -> MemoryClient:
    from dovecote.client import DovecoteClient

    return MemoryClient(DovecoteClient.from_env(role))


def _run(call: Any) -> Any:
    """An API error propagates to the CLI's one handler (dovecote.cli.main): one line, and the exit
    code that says which kind (1 the API refused, 4 unreachable, 3 a wait ran out)."""
    return call()


def _json(value: Any) -> None:
    out.print(json.dumps(value), highlight=False, soft_wrap=True)


def _status_line(status: dict[str, Any]) -> None:
    evidence = status.get("evidence")
    line = f"{status['id']}  {status['status']}"
    if evidence:
        line += f"  {evidence['code']}  write_ok={str(evidence['write_ok']).lower()}"
        if evidence.get("error"):
            line += f"  ({evidence['error']['code']}: {evidence['error']['message']})"
    out.print(line, highlight=False, soft_wrap=True)
    for c in (evidence or {}).get("candidates", []):
        out.print(f"  {c['verb']} → {c['to']}  {c.get('id', '')}  {c['note']}", highlight=False, soft_wrap=True)


@memory_app.command("submit")
def submit(
    scope: str,
    content: Annotated[str, typer.Argument(help="The memory (a fact, up to 8 KiB).")],
    tag: Annotated[
        list[str] | None, typer.Option("--tag", "-t", help="A tag; subject:<key> names the subject.")
    ] = None,
    write_id: Annotated[str | None, typer.Option("--id", help="Write id; reuse to retry safely.")] = None,
    wait: Annotated[int, typer.Option(help="Then wait up to N seconds (≤ 20) for the evidence.")] = 0,
    as_json: Json = False,
) -> None:
    """Queue a memory write (202 queued); with --wait, print its evidence once settled."""
    client = _client()
    answer = _run(lambda: client.submit_memory(scope, content, tags=tag, write_id=write_id))
    if wait:
        answer = _run(lambda: client.memory_write(answer["id"], wait=wait))
    if as_json:
        _json(answer)
    elif wait:
        _status_line(answer)
    else:
        out.print(f"{answer['id']}  {answer['status']}", highlight=False)


@memory_app.command("status")
def status(
    write_id: str,
    wait: Annotated[int, typer.Option(help="Wait up to N seconds (≤ 20) for the write to settle.")] = 0,
    as_json: Json = False,
) -> None:
    """A write's status and evidence (candidates, error)."""
    answer = _run(lambda: _client().memory_write(write_id, wait=wait or None))
    if as_json:
        _json(answer)
    else:
        _status_line(answer)


@memory_app.command("cancel")
def cancel(write_id: str, as_json: Json = False) -> None:
    """Cancel a queued write; exit 3 when it had already started (or finished)."""
    cancelled = _run(lambda: _client().cancel_memory_write(write_id))
    if as_json:
        _json({"id": write_id, "cancelled": cancelled})
    else:
        out.print(f"{write_id}  {'cancelled' if cancelled else 'not cancelled: it already started or finished'}")
    if not cancelled:
        raise typer.Exit(3)


@memory_app.command("ls")
def ls(
    scope: str,
    limit: Annotated[int | None, typer.Option()] = None,
    cursor: Annotated[str | None, typer.Option()] = None,
    all_pages: Annotated[bool, typer.Option("--all", help="Follow the cursor to the end.")] = False,
    as_json: Json = False,
) -> None:
    """A scope's memories in applied order (JSON lines with --json)."""
    client = _client()
    table = Table("seq", "id", "content", "tags", "applied_at")
    while True:
        page = _run(lambda cursor=cursor: client.list_memories(scope, limit=limit, cursor=cursor))
        for m in page["items"]:
            if as_json:
                _json(m)
            else:
                table.add_row(str(m["seq"]), m["id"], m["content"], " ".join(m["tags"]), m["applied_at"])
        cursor = page.get("cursor")
        if not all_pages or not cursor:
            break
    if not as_json:
        out.print(table)
        if cursor:
            out.print(f"more: --cursor {cursor}", highlight=False, soft_wrap=True)


@memory_app.command("relations")
def relations(
    scope: str,
    status: Annotated[str | None, typer.Option(help="pending | confirmed | dismissed (default: all)")] = None,
    limit: Annotated[int | None, typer.Option()] = None,
    cursor: Annotated[str | None, typer.Option()] = None,
    all_pages: Annotated[bool, typer.Option("--all", help="Follow the cursor to the end.")] = False,
    as_json: Json = False,
) -> None:
    """A scope's relation candidates (JSON lines with --json)."""
    client = _client()
    table = Table("id", "from", "verb", "to", "status", "note")
    while True:
        page = _run(lambda cursor=cursor: client.memory_relations(scope, status=status, limit=limit, cursor=cursor))
        for r in page["items"]:
            if as_json:
                _json(r)
            else:
                table.add_row(r["id"], r["from"], r["verb"], r["to"], r["status"], r["note"])
        cursor = page.get("cursor")
        if not all_pages or not cursor:
            break
    if not as_json:
        out.print(table)
        if cursor:
            out.print(f"more: --cursor {cursor}", highlight=False, soft_wrap=True)


@memory_app.command("judge")
def judge(
    relation_id: str,
    decision: Annotated[str, typer.Argument(help="confirmed | dismissed")],
    note: Annotated[str | None, typer.Option(help="Why.")] = None,
    command_id: Annotated[str | None, typer.Option(help="Reuse to retry safely; generated when absent.")] = None,
    as_json: Json = False,
) -> None:
    """Confirm or dismiss a pending relation candidate, once."""
    relation = _run(lambda: _client().judge_relation(relation_id, decision, note=note, command_id=command_id))
    if as_json:
        _json(relation)
    else:
        out.print(f"{relation['id']}  {relation['status']}", highlight=False)


@memory_app.command("redrive")
def redrive(
    limit: Annotated[int, typer.Option(help="Dead letters to look at, 1–100.")] = 10,
    as_json: Json = False,
) -> None:
    """Move this authority's dead-lettered writes back to the queue (admin token)."""
    moved = _run(lambda: _client("admin").redrive_memory(limit=limit))
    if as_json:
        _json(moved)
    else:
        out.print(f"moved {moved['moved']}: {' '.join(moved['writes'])}".rstrip(": "), highlight=False)
