"""`dovecote tasks …` (caller) and `dovecote worker …` (worker): one verb per route of API.md § Tasks.

Revision and fence are named options (`--rev`, `--fence`), never bare numbers. A message is TEXT, or
`--file FILE` (`-` reads stdin). `--command-id` makes a retry the same command: the message and
submission ids are derived from it, so the retry replays instead of conflicting."""

from __future__ import annotations

import json
import sys
import time
from contextlib import nullcontext
from typing import Annotated, Any

import typer

from dovecote.cli.common import (
    EXIT_API,
    EXIT_NOTHING,
    EXIT_USAGE,
    AllPages,
    CliError,
    CommandId,
    FenceOpt,
    FileOpt,
    Json,
    MediaType,
    Rev,
    checked_path,
    client,
    emit,
    emit_pages,
    err,
    field,
    keyset_pages,
    open_input,
    out,
    print_fields,
    print_json,
    stream_pages,
    transfer,
)
from dovecote.client.artifacts import ARTIFACT_INLINE_SEND
from dovecote.client.paths import path as api_path
from dovecote.client.tasks import ALL_STATES, MAX_CLAIM_WAIT, TERMINAL_STATES, bytes_message
from dovecote.tasks.model import MAX_MESSAGE_BYTES

# A worker event read by `worker event`: a message (2 MiB) and an inline freeze fit, with room.
MAX_EVENT_BYTES = 6 * 1024 * 1024

tasks_app = typer.Typer(help="Tasks, as a caller: create, read, reply, cancel, wait.", no_args_is_help=True)
worker_app = typer.Typer(
    help="Tasks, as a worker: claim, heartbeat, release, drive a task to a terminal state.", no_args_is_help=True
)

Text = Annotated[str | None, typer.Argument(help="The message text (or give --file).", show_default=False)]
TASK_COLUMNS = [
    field("id"),
    field("state"),
    ("rev", lambda t: t.get("revision")),
    field("context"),
    field("workspace"),
    ("messages", lambda t: t.get("message_count")),
    field("updated_at"),
]
LEASE_COLUMNS = [
    ("task", lambda a: a["task"]["id"]),
    ("state", lambda a: a["task"]["state"]),
    ("rev", lambda a: a["task"]["revision"]),
    field("fence"),
    field("worker"),
    field("heartbeat_at"),
]


def message_input(text: str | None, file: str | None, media_type: str | None) -> dict[str, Any] | str:
    """The message of a command: TEXT, or the content of --file (- is stdin) as one part."""
    if text is not None and file is not None:
        raise CliError("give the message as TEXT or --file, not both", EXIT_USAGE)
    if text is not None:
        return text
    if file is None:
        raise CliError("give the message as TEXT, or --file FILE (- reads stdin)", EXIT_USAGE)
    if file == "-":
        data = sys.stdin.buffer.read(MAX_MESSAGE_BYTES + 1)
        name = None
    else:
        path = checked_path(file)
        if path.stat().st_size > MAX_MESSAGE_BYTES:
            raise CliError(
                f"{file} is {path.stat().st_size} bytes; a task message holds at most {MAX_MESSAGE_BYTES} "
                "(store it as a note and send its ref)",
                EXIT_USAGE,
            )
        data, name = path.read_bytes(), path.name
    if len(data) > MAX_MESSAGE_BYTES:
        raise CliError(f"stdin holds more than {MAX_MESSAGE_BYTES} bytes, the most a task message holds", EXIT_USAGE)
    if not data:
        raise CliError("the message is empty", EXIT_USAGE)
    return bytes_message(data, media_type, filename=name)


# ---- caller -------------------------------------------------------------------------------------


@tasks_app.command("create")
def tasks_create(
    task_id: Annotated[str, typer.Argument(metavar="TASK")],
    text: Text = None,
    file: FileOpt = None,
    media_type: MediaType = None,
    workspace: Annotated[str, typer.Option()] = "default",
    context: Annotated[str, typer.Option()] = "default",
    lease_timeout: Annotated[
        int | None,
        typer.Option(help="Seconds a lease may stay silent before it is fenced (0-86400; 0 never; default 300)."),
    ] = None,
    command_id: CommandId = None,
    as_json: Json = False,
) -> None:
    """Create a task with its first message."""
    message = message_input(text, file, media_type)
    task = client().create_task(
        task_id,
        message,
        workspace=workspace,
        context=context,
        command_id=command_id,
        lease_timeout_seconds=lease_timeout,
    )
    emit(task, as_json)


@tasks_app.command("get")
def tasks_get(task_id: Annotated[str, typer.Argument(metavar="TASK")], as_json: Json = False) -> None:
    """One task."""
    emit(client().get_task(task_id), as_json)


@tasks_app.command("ls")
def tasks_ls(
    context: Annotated[str, typer.Option()] = "",
    state: Annotated[str, typer.Option(help=f"One of {', '.join(ALL_STATES)}.")] = "",
    updated_since: Annotated[str, typer.Option(help="RFC 3339")] = "",
    limit: Annotated[int | None, typer.Option()] = None,
    cursor: Annotated[str | None, typer.Option()] = None,
    all_pages: AllPages = False,
    as_json: Json = False,
) -> None:
    """The authority's tasks, newest update first, with total_size."""
    c = client()
    pages = keyset_pages(
        lambda cur: c.list_tasks(context=context, state=state, updated_since=updated_since, limit=limit, cursor=cur),
        cursor,
    )
    emit_pages(pages, as_json=as_json, all_pages=all_pages, columns=TASK_COLUMNS)


@tasks_app.command("context")
def tasks_context(
    context: str,
    limit: Annotated[int | None, typer.Option()] = None,
    cursor: Annotated[str | None, typer.Option()] = None,
    all_pages: AllPages = False,
    as_json: Json = False,
) -> None:
    """One context's tasks, oldest first."""
    c = client()
    pages = keyset_pages(lambda cur: c.context_tasks(context, limit=limit, cursor=cur), cursor)
    emit_pages(pages, as_json=as_json, all_pages=all_pages, columns=TASK_COLUMNS)


@tasks_app.command("reply")
def tasks_reply(
    task_id: Annotated[str, typer.Argument(metavar="TASK")],
    rev: Rev,
    text: Text = None,
    file: FileOpt = None,
    media_type: MediaType = None,
    command_id: CommandId = None,
    as_json: Json = False,
) -> None:
    """Answer input_required: the task goes back to working."""
    message = message_input(text, file, media_type)
    emit(client().reply(task_id, rev, message, command_id), as_json)


@tasks_app.command("cancel")
def tasks_cancel(
    task_id: Annotated[str, typer.Argument(metavar="TASK")],
    rev: Rev,
    command_id: CommandId = None,
    as_json: Json = False,
) -> None:
    """Cancel a task that is not terminal yet."""
    emit(client().cancel(task_id, rev, command_id), as_json)


@tasks_app.command("messages")
def tasks_messages(
    task_id: Annotated[str, typer.Argument(metavar="TASK")],
    after: Annotated[int, typer.Option(help="Start after this sequence number.")] = 0,
    limit: Annotated[int | None, typer.Option()] = None,
    all_pages: AllPages = False,
    as_json: Json = False,
) -> None:
    """The task's messages, oldest first."""
    c = client()
    columns = [
        ("seq", lambda m: m["sequence"]),
        field("author"),
        field("created_at"),
        ("text", lambda m: " ".join(_part_text(p) for p in m["parts"])),
    ]
    pages = stream_pages(lambda a: c.messages(task_id, a, limit), after)
    emit_pages(pages, as_json=as_json, all_pages=all_pages, columns=columns, keyset=False)


def _part_text(part: dict[str, Any]) -> str:
    if part.get("text") is not None:
        return str(part["text"])
    return f"<{part.get('media_type')}, {len(part.get('data_b64') or '') * 3 // 4} bytes>"


@tasks_app.command("events")
def tasks_events(
    task_id: Annotated[str, typer.Argument(metavar="TASK")],
    after: Annotated[int, typer.Option(help="Start after this sequence number.")] = 0,
    limit: Annotated[int | None, typer.Option()] = None,
    all_pages: AllPages = False,
    as_json: Json = False,
) -> None:
    """The task's events, oldest first."""
    c = client()
    columns = [
        ("seq", lambda e: e["sequence"]),
        field("type"),
        field("state"),
        ("rev", lambda e: e["revision"]),
        field("message"),
        field("occurred_at"),
    ]
    pages = stream_pages(lambda a: c.events(task_id, a, limit), after)
    emit_pages(pages, as_json=as_json, all_pages=all_pages, columns=columns, keyset=False)


@tasks_app.command("snapshot")
def tasks_snapshot(task_id: Annotated[str, typer.Argument(metavar="TASK")], as_json: Json = False) -> None:
    """The task and its event cursor, from one read (read events after it without a gap)."""
    emit(client().snapshot(task_id), as_json)


@tasks_app.command("wait")
def tasks_wait(
    task_id: Annotated[str, typer.Argument(metavar="TASK")],
    state: Annotated[
        list[str] | None,
        typer.Option(help="A state to wait for (repeat for several). Default: any terminal state."),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait; 0 waits forever. Exit 3 when it runs out.")] = 60.0,
    as_json: Json = False,
) -> None:
    """Wait until the task enters one of the states (followed on its event stream), then print it."""
    wanted = tuple(state or TERMINAL_STATES)
    unknown = [s for s in wanted if s not in ALL_STATES]
    if unknown:
        raise CliError(f"unknown state {unknown[0]!r}; one of {', '.join(ALL_STATES)}", EXIT_USAGE)
    task = client().wait_for(task_id, wanted, timeout=timeout or None)
    emit(task, as_json)


# ---- worker -------------------------------------------------------------------------------------


@worker_app.command("claim")
def worker_claim(
    wait: Annotated[
        int, typer.Option(help="Long-poll: wait up to N seconds for a claimable task (longer waits are repeated).")
    ] = 0,
    command_id: CommandId = None,
    as_json: Json = False,
) -> None:
    """Lease the oldest claimable task (exit 3 when there is none)."""
    if wait < 0:
        raise CliError("--wait must be >= 0", EXIT_USAGE)
    c = client("worker")
    from dovecote.client import new_id

    cid = command_id or new_id("c")  # a claim that found nothing reserves nothing: one id for all polls
    deadline = time.monotonic() + wait
    while True:
        left = max(0, int(deadline - time.monotonic() + 0.5))
        assignment = c.claim(cid, wait_seconds=min(MAX_CLAIM_WAIT, left))
        if assignment is not None:
            emit(assignment, as_json)
            return
        if time.monotonic() >= deadline:
            break
    err.print("nothing is claimable" + (f" (waited {wait} s)" if wait else ""), highlight=False)
    raise typer.Exit(EXIT_NOTHING)


@worker_app.command("leases")
def worker_leases(
    limit: Annotated[int | None, typer.Option()] = None,
    cursor: Annotated[str | None, typer.Option()] = None,
    all_pages: AllPages = False,
    as_json: Json = False,
) -> None:
    """This worker's current leases (what to resume after a restart)."""
    c = client("worker")
    pages = keyset_pages(lambda cur: c.list_leases(limit, cur), cursor)
    emit_pages(pages, as_json=as_json, all_pages=all_pages, columns=LEASE_COLUMNS)


@worker_app.command("lease")
def worker_lease(task_id: Annotated[str, typer.Argument(metavar="TASK")], as_json: Json = False) -> None:
    """The task's current lease (404 when it has none)."""
    emit(client("worker").request("GET", api_path("tasks", task_id, "lease"))["assignment"], as_json)


@worker_app.command("acquire")
def worker_acquire(
    task_id: Annotated[str, typer.Argument(metavar="TASK")], command_id: CommandId = None, as_json: Json = False
) -> None:
    """Lease this task (fence + 1); 409 lease_unavailable while another lease holds it."""
    emit(client("worker").acquire(task_id, command_id), as_json)


@worker_app.command("heartbeat")
def worker_heartbeat(
    task_id: Annotated[str, typer.Argument(metavar="TASK")],
    fence: FenceOpt,
    as_json: Json = False,
) -> None:
    """A sign of life of your lease (409 stale_lease when it is no longer current)."""
    emit(client("worker").heartbeat(task_id, fence), as_json)


@worker_app.command("release")
def worker_release(
    task_id: Annotated[str, typer.Argument(metavar="TASK")],
    fence: FenceOpt,
    command_id: CommandId = None,
    as_json: Json = False,
) -> None:
    """Give up your own lease: the task becomes claimable again (the fence is kept)."""
    client("worker").release(task_id, fence, command_id)
    _fenced(task_id, fence, as_json, "released")


@worker_app.command("fence")
def worker_fence(
    task_id: Annotated[str, typer.Argument(metavar="TASK")],
    fence: FenceOpt,
    command_id: CommandId = None,
    as_json: Json = False,
) -> None:
    """Retire any worker's lease generation (admin token: DOVECOTE_TOKEN, or the dev admin token)."""
    client("admin").fence(task_id, fence, command_id)
    _fenced(task_id, fence, as_json, "fenced")


def _fenced(task_id: str, fence: int, as_json: bool, verb: str) -> None:
    if as_json:
        print_json({"task": task_id, "fence": fence, verb: True})
    else:
        out.print(f"{verb} the lease of {task_id} with fence {fence}", highlight=False)


def _worker(kind: str, task_id: str, rev: int, fence: int, command_id: str | None, as_json: bool, **extra: Any) -> None:
    emit(client("worker").worker_command(kind, task_id, rev, fence, command_id, **extra), as_json)


@worker_app.command("accept")
def worker_accept(
    task_id: Annotated[str, typer.Argument(metavar="TASK")],
    rev: Rev,
    fence: FenceOpt,
    command_id: CommandId = None,
    as_json: Json = False,
) -> None:
    """submitted → working."""
    _worker("accept", task_id, rev, fence, command_id, as_json)


@worker_app.command("reject")
def worker_reject(
    task_id: Annotated[str, typer.Argument(metavar="TASK")],
    rev: Rev,
    fence: FenceOpt,
    command_id: CommandId = None,
    as_json: Json = False,
) -> None:
    """submitted → rejected."""
    _worker("reject", task_id, rev, fence, command_id, as_json)


@worker_app.command("fail")
def worker_fail(
    task_id: Annotated[str, typer.Argument(metavar="TASK")],
    rev: Rev,
    fence: FenceOpt,
    command_id: CommandId = None,
    as_json: Json = False,
) -> None:
    """working or input_required → failed."""
    _worker("fail", task_id, rev, fence, command_id, as_json)


@worker_app.command("request-input")
def worker_request_input(
    task_id: Annotated[str, typer.Argument(metavar="TASK")],
    rev: Rev,
    fence: FenceOpt,
    text: Text = None,
    file: FileOpt = None,
    media_type: MediaType = None,
    command_id: CommandId = None,
    as_json: Json = False,
) -> None:
    """working → input_required, with your question."""
    message = message_input(text, file, media_type)
    _worker("request-input", task_id, rev, fence, command_id, as_json, message=message)


@worker_app.command("complete")
def worker_complete(
    task_id: Annotated[str, typer.Argument(metavar="TASK")],
    rev: Rev,
    fence: FenceOpt,
    text: Text = None,
    file: FileOpt = None,
    media_type: MediaType = None,
    submission_id: Annotated[
        str | None, typer.Option(help="Default: derived from the command id (so a retry replays).")
    ] = None,
    artifact: Annotated[
        str | None, typer.Option("--artifact", help="The artifact this task froze (it is published).")
    ] = None,
    command_id: CommandId = None,
    as_json: Json = False,
) -> None:
    """working → completed, with your final message (and the frozen artifact, which it publishes)."""
    message = message_input(text, file, media_type)
    _worker(
        "complete",
        task_id,
        rev,
        fence,
        command_id,
        as_json,
        message=message,
        submission_id=submission_id,
        artifact_id=artifact,
    )


@worker_app.command("freeze")
def worker_freeze(
    task_id: Annotated[str, typer.Argument(metavar="TASK")],
    rev: Rev,
    fence: FenceOpt,
    artifact: Annotated[str, typer.Option("--artifact", help="The artifact's id (unique in the workspace).")],
    base: Annotated[
        str,
        typer.Option(
            "--base", help="The workspace revision it applies to (the first freeze in a workspace sets its head)."
        ),
    ],
    file: Annotated[
        str | None,
        typer.Option(
            "--file", "-f", help="Read the payload from FILE; - (or no --file) reads stdin.", show_default=False
        ),
    ] = None,
    media_type: Annotated[
        str | None,
        typer.Option(help="The payload's media type (default: guessed from --file's name; UTF-8 text otherwise)."),
    ] = None,
    command_id: CommandId = None,
    as_json: Json = False,
) -> None:
    """Freeze the task's one artifact (working only). Up to 1 MiB goes inline; a larger payload (at
    most 64 MiB) streams through a presigned upload, with a progress bar on a terminal."""
    c = client("worker")
    if file is not None and file != "-":
        path = checked_path(file)
        big = path.stat().st_size > ARTIFACT_INLINE_SEND
        with transfer(f"upload {path.name}") if big else nullcontext(None) as progress:
            answer = c.freeze_artifact(
                task_id,
                rev,
                fence,
                artifact,
                base,
                path,
                media_type=media_type,
                command_id=command_id,
                progress=progress,
            )
    else:
        with transfer("upload stdin") as progress:
            answer = c.freeze_artifact(
                task_id,
                rev,
                fence,
                artifact,
                base,
                open_input(file),
                media_type=media_type,
                command_id=command_id,
                progress=progress,
            )
    if as_json:
        print_json(answer)
    else:
        print_fields({"artifact": answer["artifact"], "task": {k: answer["task"][k] for k in ("state", "revision")}})


@worker_app.command("event")
def worker_event(
    file: Annotated[
        str | None,
        typer.Argument(help="A JSON file: {delivery_id?, event} or the event alone; - or none reads stdin."),
    ] = None,
    as_json: Json = False,
) -> None:
    """Settle one worker event (`POST /v1/worker/events`) and print its settlement. A NACK is an
    answer, not an error: it prints and exits 1, an ACK exits 0. Missing event_id, delivery_id,
    message and submission ids are filled in (pass them to retry the same delivery)."""
    raw = open_input(file).read(MAX_EVENT_BYTES + 1)
    if len(raw) > MAX_EVENT_BYTES:
        raise CliError(
            f"the event is larger than {MAX_EVENT_BYTES} bytes (stage a large freeze payload with `worker freeze`)"
        )
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise CliError(f"the event is not JSON: {exc}", EXIT_USAGE) from None
    if not isinstance(document, dict):
        raise CliError("the event must be a JSON object", EXIT_USAGE)
    delivery_id = None
    if "event" in document:
        delivery_id = document.get("delivery_id")
        document = document["event"]
        if not isinstance(document, dict):
            raise CliError("event must be a JSON object", EXIT_USAGE)
    if delivery_id is not None and not isinstance(delivery_id, str):
        raise CliError("delivery_id must be a string", EXIT_USAGE)
    settlement = client("worker").worker_event(document, delivery_id)
    emit(settlement, as_json)
    if settlement.get("decision") != "ack":
        err.print(f"nack: {settlement.get('code')}: {settlement.get('message')}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_API)
