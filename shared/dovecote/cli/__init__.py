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
tasks_app = typer.Typer(help="Tasks, as a caller: create, read, reply, cancel.", no_args_is_help=True)
worker_app = typer.Typer(help="Tasks, as a worker: claim, lease, drive to a terminal state.", no_args_is_help=True)
app.add_typer(tokens_app, name="tokens")
app.add_typer(notes_app, name="notes")
app.add_typer(tasks_app, name="tasks")
app.add_typer(worker_app, name="worker")


def _mount_sub_apps() -> None:
    from dovecote.cli.recall import recall_app

    app.add_typer(recall_app, name="recall")


_mount_sub_apps()
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
    dispatch_interval: Annotated[
        float, typer.Option(help="Seconds between lease-dispatcher runs (0 turns it off).")
    ] = 1.0,
    faults: Annotated[
        bool, typer.Option(help="Honour X-Dovecote-Fault: drop-response (tests of retries that replay).")
    ] = False,
    quiet: Annotated[bool, typer.Option(help="No per-request log lines.")] = False,
) -> None:
    """Run the whole service locally over moto, with API Gateway emulated."""
    if data is not None:
        err.print("[red]--data is not built yet:[/red] state lives in memory and ends with the process.")
        raise typer.Exit(2)
    import logging

    from infra.local.runtime import LocalRuntime

    # One line per request (method, path, status, code, ms) and the emulators' own notices. Its own
    # logger and handler: the functions' Powertools loggers ("dovecote", JSON) stay as in Lambda.
    dev_log = logging.getLogger("dovecote-dev")
    line = logging.StreamHandler(sys.stderr)
    line.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    dev_log.addHandler(line)
    dev_log.propagate = False
    dev_log.setLevel(logging.WARNING if quiet else logging.INFO)
    runtime = LocalRuntime(
        host=host, port=port, tokens_file=tokens_file, dispatch_interval=dispatch_interval, faults=faults
    ).start()
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
    agent: Annotated[str | None, typer.Option(help="The only note author the token may write as.")] = None,
    expires_in_days: Annotated[int | None, typer.Option(help="Lifetime in days (default from settings).")] = None,
) -> None:
    """Mint a token with an admin token (DOVECOTE_TOKEN, or the dev admin token)."""
    try:
        created = _client("admin").create_token(authority, role, worker, agent=agent, expires_in_days=expires_in_days)
    except DovecoteError as exc:
        _fail(exc)
        return
    out.print_json(json.dumps(created))


@tokens_app.command("ls")
def tokens_ls(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """The authority's tokens, newest first (ids and claims; never a secret or a hash)."""
    client = _client("admin")
    columns = ("token_id", "role", "worker", "agent", "created_at", "expires_at", "minted_by", "revoked_at")
    table = Table(*columns)
    cursor = None
    try:
        while True:
            page = client.list_tokens(cursor=cursor)
            for item in page["items"]:
                if as_json:
                    out.print(json.dumps(item), highlight=False, soft_wrap=True)
                else:
                    table.add_row(*(str(item.get(c) or "") for c in columns))
            cursor = page.get("cursor")
            if not cursor:
                break
    except DovecoteError as exc:
        _fail(exc)
        return
    if not as_json:
        out.print(table)


@tokens_app.command("revoke")
def tokens_revoke(token_id: Annotated[str, typer.Argument(help="The token's id (from `tokens ls`).")]) -> None:
    """Revoke a token. It stops working once the authorizer's cache expires (5 minutes by default)."""
    try:
        _client("admin").revoke_token(token_id)
    except DovecoteError as exc:
        _fail(exc)
        return
    out.print(f"revoked {token_id}")


@tokens_app.command("bootstrap")
def tokens_bootstrap(
    authority: Annotated[str, typer.Option(help="Authority the token acts in.")],
    table: Annotated[str, typer.Option(help="The deployed tokens table (stack output TokensTable).")],
    role: Annotated[str, typer.Option(help="admin, caller or worker.")] = "admin",
    worker: Annotated[str | None, typer.Option(help="Worker id (worker tokens).")] = None,
    expires_in_days: Annotated[
        int | None, typer.Option(help="Lifetime; default 7 days for admin, 90 otherwise.")
    ] = None,
) -> None:
    """Mint a token with AWS credentials instead of a bearer token: the way to the first admin token
    of an authority. Uses the standard AWS credential chain (and AWS_ENDPOINT_URL, if set)."""
    import boto3

    from dovecote.admin.dynamo import DynamoTokenStore
    from dovecote.admin.service import TokenService
    from dovecote.platform.errors import DomainError

    try:
        service = TokenService(
            DynamoTokenStore(table=table, dynamodb=boto3.client("dynamodb")),
            # The audit line goes to stderr: stdout carries only the minted token's JSON.
            audit=lambda event, facts: err.print(json.dumps({"audit": event, **facts}), highlight=False),
        )
        token, record = service.mint(None, authority, role, worker, expires_in_days=expires_in_days)
    except DomainError as exc:
        err.print(f"[red]error[/red] {exc.code}: {exc.message}")
        raise typer.Exit(1) from None
    p = record.principal
    out.print_json(
        json.dumps(
            {
                "token": token,
                "token_id": record.token_id,
                "authority": p.authority,
                "role": p.role,
                "worker": p.worker,
                "expires_at": record.expires_at,
            }
        )
    )


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


def _print(value: object) -> None:
    out.print_json(json.dumps(value))


def _call(role: str, fn: str, *args: object, **kwargs: object) -> None:
    try:
        _print(getattr(_client(role), fn)(*args, **kwargs))
    except DovecoteError as exc:
        _fail(exc)


CommandId = Annotated[str | None, typer.Option(help="Reuse to retry safely; generated when absent.")]


@tasks_app.command("create")
def tasks_create(
    task_id: str,
    text: Annotated[str, typer.Argument(help="The first message (text/plain).")],
    workspace: Annotated[str, typer.Option()] = "default",
    context: Annotated[str, typer.Option()] = "default",
    command_id: CommandId = None,
) -> None:
    """Create a task with its first message."""
    _call("caller", "create_task", task_id, text, workspace=workspace, context=context, command_id=command_id)


@tasks_app.command("get")
def tasks_get(task_id: str) -> None:
    _call("caller", "get_task", task_id)


@tasks_app.command("ls")
def tasks_ls(
    context: Annotated[str, typer.Option()] = "",
    state: Annotated[str, typer.Option()] = "",
    updated_since: Annotated[str, typer.Option(help="RFC 3339")] = "",
    limit: Annotated[int | None, typer.Option()] = None,
    cursor: Annotated[str | None, typer.Option()] = None,
) -> None:
    """The authority's tasks, newest update first, with total_size."""
    _call("caller", "list_tasks", context=context, state=state, updated_since=updated_since, limit=limit, cursor=cursor)


@tasks_app.command("reply")
def tasks_reply(task_id: str, expected_revision: int, text: str, command_id: CommandId = None) -> None:
    """Answer input_required: back to working."""
    _call("caller", "reply", task_id, expected_revision, text, command_id=command_id)


@tasks_app.command("cancel")
def tasks_cancel(task_id: str, expected_revision: int, command_id: CommandId = None) -> None:
    _call("caller", "cancel", task_id, expected_revision, command_id=command_id)


@tasks_app.command("messages")
def tasks_messages(
    task_id: str, after: Annotated[int, typer.Option()] = 0, limit: Annotated[int | None, typer.Option()] = None
) -> None:
    _call("caller", "messages", task_id, after, limit)


@tasks_app.command("events")
def tasks_events(
    task_id: str, after: Annotated[int, typer.Option()] = 0, limit: Annotated[int | None, typer.Option()] = None
) -> None:
    _call("caller", "events", task_id, after, limit)


@worker_app.command("claim")
def worker_claim(command_id: CommandId = None) -> None:
    """Lease the oldest claimable task (exit 3 when there is none)."""
    try:
        assignment = _client("worker").claim(command_id)
    except DovecoteError as exc:
        _fail(exc)
        return
    if assignment is None:
        err.print("nothing is claimable")
        raise typer.Exit(3)
    _print(assignment)


@worker_app.command("leases")
def worker_leases() -> None:
    """This worker's current leases (what to resume after a restart)."""
    _call("worker", "leases")


def _worker(
    kind: str, task_id: str, expected_revision: int, fence: int, command_id: str | None, **extra: object
) -> None:
    _call("worker", "worker_command", kind, task_id, expected_revision, fence, command_id=command_id, **extra)


@worker_app.command("accept")
def worker_accept(task_id: str, expected_revision: int, fence: int, command_id: CommandId = None) -> None:
    _worker("accept", task_id, expected_revision, fence, command_id)


@worker_app.command("fail")
def worker_fail(task_id: str, expected_revision: int, fence: int, command_id: CommandId = None) -> None:
    _worker("fail", task_id, expected_revision, fence, command_id)


@worker_app.command("request-input")
def worker_request_input(
    task_id: str, expected_revision: int, fence: int, text: str, command_id: CommandId = None
) -> None:
    _worker("request-input", task_id, expected_revision, fence, command_id, message=text)


@worker_app.command("complete")
def worker_complete(
    task_id: str,
    expected_revision: int,
    fence: int,
    text: str,
    submission_id: Annotated[str | None, typer.Option()] = None,
    command_id: CommandId = None,
) -> None:
    from dovecote.client import new_id

    _worker(
        "complete",
        task_id,
        expected_revision,
        fence,
        command_id,
        message=text,
        submission_id=submission_id or new_id("s"),
    )


def main() -> None:
    app()


if __name__ == "__main__":
    main()
