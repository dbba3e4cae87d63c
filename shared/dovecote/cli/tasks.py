"""`dovecote tasks …`: the caller's verbs, one per route of docs/services/tasks.md (the worker's are in
`worker.py`), built from one table (`dovecote.cli.verbs`).

Options are the HTTP fields: `--expected-revision` (alias `--rev`; optional for a person: omitted, the
task is read and its revision sent, `--verbose` says so), `--lease-timeout-seconds`, `--command-id`;
the task id is the positional TASK (a TASK that cannot be an id while TEXT can is a swap, refused
before sending). A message is TEXT, or `--file FILE` (`-` reads stdin). `--command-id` (with `--rev`) makes a retry
the same command: the message id is derived from it, so the retry replays instead of conflicting.
`--json` prints the HTTP answer: `{"task": …}` for a command."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from dovecote.cli.common import (
    EXIT_USAGE,
    CliError,
    Column,
    CommandId,
    ExpectedRevision,
    FileOpt,
    Json,
    MediaType,
    checked_path,
    client,
    emit,
    field,
    fields,
    note,
    say,
)
from dovecote.cli.errors import one_line, swapped
from dovecote.cli.groups import ParentGroup, new_app
from dovecote.cli.verbs import Pages, Show, Values, Verb, param, register
from dovecote.client.tasks import ALL_STATES, TERMINAL_STATES, bytes_message
from dovecote.platform.ids import is_id
from dovecote.tasks.limits import MAX_MESSAGE_BYTES

# `dovecote tasks webhooks …` is a sub-group of its own module, loaded when used (groups.SUBGROUPS).
app = new_app("Tasks, as a caller: create, read, reply, cancel, wait.", cls=ParentGroup)

TaskId = Annotated[str, typer.Argument(metavar="TASK", help="The task's id.", show_default=False)]
Text = Annotated[
    str | None, typer.Argument(metavar="TEXT", help="The message text (or give --file).", show_default=False)
]
TASK_COLUMNS = [
    *fields("id", "state"),
    ("rev", lambda t: t.get("revision")),
    *fields("context", "workspace"),
    ("messages", lambda t: t.get("message_count")),
    field("updated_at"),
]
TASK = param("task_id", TaskId)
REVISION = param("expected_revision", ExpectedRevision)
# A caller's commands: a person need not look the revision up (`revision_of`). The SDK and HTTP keep it
# required: a program that read the task holds the revision it decided on.
CALLER_REVISION = param(
    "expected_revision",
    Annotated[
        int | None,
        typer.Option(
            "--expected-revision",
            "--rev",
            help="The task revision you expect (a compare-and-swap). Omitted: the task is read and its "
            "current revision sent (--verbose says which); required with --command-id.",
        ),
    ],
    None,
)
VERBOSE = param("verbose", Annotated[bool, typer.Option("--verbose", help="Say what was read and sent.")], False)
COMMAND = param("command_id", CommandId, None)
MESSAGE = (param("text", Text, None), param("file", FileOpt, None), param("media_type", MediaType, None))


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


def task_of(values: Values, verb: str) -> str:
    """TASK, unless it cannot be a task id while TEXT can: then the two were swapped, and the usage
    error shows the command in the right order (an id that is simply wrong is the API's to refuse)."""
    task, text = values["task_id"], values.get("text")
    if not is_id(task) and text is not None and is_id(text):
        why = (
            f"is not a task id (letters, digits and . _ : -, at most 128); {text!r} is one: did you swap TASK and TEXT?"
        )
        raise swapped("TASK", task, why, "dovecote", "tasks", verb, text, task)
    return str(task)


def revision_of(c: Any, values: Values) -> int:
    """--rev as given; else the task's current revision, read now (said on stderr with --verbose)."""
    if values["expected_revision"] is not None:
        return int(values["expected_revision"])
    if values.get("command_id"):
        # A retry would read the revision the first run made and send that: another command (409
        # idempotency_conflict), not the replay --command-id promises.
        raise CliError(
            "--command-id needs --rev: a retry sends the same command only with the same revision "
            "(`dovecote tasks get TASK` shows it)",
            EXIT_USAGE,
        )
    task = c.get_task(values["task_id"])
    if values.get("verbose"):
        note(f"--rev not given: read task {task['id']} at revision {task['revision']} ({task['state']}); sent it")
    return int(task["revision"])


def message_of(values: Values) -> dict[str, Any] | str:
    return message_input(values["text"], values["file"], values["media_type"])


def _part_text(part: dict[str, Any]) -> str:
    if part.get("text") is not None:
        return str(part["text"])
    named = f"{part['filename']}, " if part.get("filename") else ""
    if part.get("url"):
        return f"<{named}{part.get('media_type')} at {part['url']}>"
    size = part.get("size") or _decoded_size(str(part.get("data_b64") or ""))
    return f"<{named}{part.get('media_type')}, {size} bytes>"


def _decoded_size(data_b64: str) -> int:
    """The bytes a base64 text holds, without decoding it: its padding holds none."""
    padding = len(data_b64) - len(data_b64.rstrip("="))
    return len(data_b64) * 3 // 4 - padding


MESSAGE_COLUMNS = [
    ("seq", lambda m: m["sequence"]),
    *fields("id", "author", "created_at"),
    ("text", lambda m: " ".join(_part_text(p) for p in m["parts"])),
]


def printable(text: str) -> str:
    """Agent-written text on one terminal line: whitespace runs as one space, and any other character
    a terminal would act on (ESC and the other controls) shown as its escape (`\\x1b`), never sent."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in one_line(text))


def reason_of(event: dict[str, Any]) -> str | None:
    """A task_failed event's reason (the worker's words) on one line; print_table shows it literally."""
    return printable(str(event["reason"])) if event.get("reason") else None


EVENT_COLUMNS = [
    ("seq", lambda e: e["sequence"]),
    *fields("type", "state"),
    ("rev", lambda e: e["revision"]),
    *fields("message", "occurred_at"),
    ("reason", reason_of),
]


@dataclass(frozen=True)
class ShowMessage(Show):
    """One message: with --json the API's envelope; for a person its fields, the parts as the
    messages table shows them (text as text, anything else named with its type and size)."""

    def print(self, result: Any, values: Values, as_json: bool) -> None:
        if as_json:
            return super().print(result, values, as_json)
        parts = "\n".join(_part_text(p).rstrip("\n") for p in result["parts"])
        shown = {k: v for k, v in result.items() if k != "parts"}
        super().print({**shown, "parts": parts}, values, as_json)


GRANT_COLUMNS = [
    *fields("fence", "worker", "state", "granted_at", "accepted_at", "heartbeat_at"),
    *fields("ended_at", "reason", "by"),
]


def _stream(name: str, columns: list[Column]) -> Verb:
    """A task's messages, events or grants: a stream read with --after, by the SDK method of its name."""
    return Verb(
        name,
        f"GET /v1/tasks/{{id}}/{name}",
        f"The task's {name}, oldest first.",
        (TASK,),
        lambda c, v: lambda after: getattr(c, name)(v["task_id"], after, v["limit"]),
        Pages(columns, keyset=False),
    )


VERBS = (
    Verb(
        "create",
        "POST /v1/tasks",
        "Create a task with its first message.",
        (
            TASK,
            *MESSAGE,
            param("workspace", Annotated[str, typer.Option(help="The workspace its artifact applies to.")], "default"),
            param("context", Annotated[str, typer.Option(help="The conversation it belongs to.")], "default"),
            param(
                "lease_timeout_seconds",
                Annotated[
                    int | None,
                    typer.Option(help="Seconds a lease may stay silent before it is fenced (0-86400; 0 never)."),
                ],
                None,
            ),
            param(
                "accept_timeout_seconds",
                Annotated[
                    int | None,
                    typer.Option(help="Seconds a grant may stay unaccepted before it is fenced (0-3600; 0 never)."),
                ],
                None,
            ),
            COMMAND,
        ),
        lambda c, v: c.create_task(
            task_of(v, "create"),
            message_of(v),
            workspace=v["workspace"],
            context=v["context"],
            command_id=v["command_id"],
            lease_timeout_seconds=v["lease_timeout_seconds"],
            accept_timeout_seconds=v["accept_timeout_seconds"],
        ),
        Show("task"),
    ),
    Verb(
        "get",
        "GET /v1/tasks/{id}",
        "One task, with its current lease (who holds it, its last heartbeat, when it will be fenced) and "
        "how the last lease ended.",
        (TASK,),
        lambda c, v: c.read_task(v["task_id"]),
    ),
    Verb(
        "list",
        "GET /v1/tasks",
        "The authority's tasks, newest update first, with total_size.",
        (
            param("context", Annotated[str, typer.Option(help="Only this context's tasks.")], ""),
            param("state", Annotated[str, typer.Option(help=f"One of {', '.join(ALL_STATES)}.")], ""),
            param("updated_since", Annotated[str, typer.Option(help="RFC 3339: only tasks updated since.")], ""),
        ),
        lambda c, v: (
            lambda cursor: c.list_tasks(
                context=v["context"],
                state=v["state"],
                updated_since=v["updated_since"],
                limit=v["limit"],
                cursor=cursor,
            )
        ),
        Pages(TASK_COLUMNS),
    ),
    Verb(
        "context",
        "GET /v1/contexts/{context}/tasks",
        "One context's tasks, oldest first.",
        (param("context", Annotated[str, typer.Argument(metavar="CONTEXT", help="The context.")]),),
        lambda c, v: lambda cursor: c.context_tasks(v["context"], limit=v["limit"], cursor=cursor),
        Pages(TASK_COLUMNS),
    ),
    Verb(
        "reply",
        "POST /v1/tasks/{id}/reply",
        "Answer input_required: the task goes back to working.",
        (TASK, CALLER_REVISION, *MESSAGE, COMMAND, VERBOSE),
        lambda c, v: c.reply(task_of(v, "reply"), revision_of(c, v), message_of(v), v["command_id"]),
        Show("task"),
    ),
    Verb(
        "cancel",
        "POST /v1/tasks/{id}/cancel",
        "Cancel a task that is not terminal yet.",
        (TASK, CALLER_REVISION, COMMAND, VERBOSE),
        lambda c, v: c.cancel(v["task_id"], revision_of(c, v), v["command_id"]),
        Show("task"),
    ),
    _stream("messages", MESSAGE_COLUMNS),
    Verb(
        "message",
        "GET /v1/tasks/{id}/messages/{message_id}",
        "One message of the task by its id (a message page's id, or an event's message).",
        (TASK, param("message_id", Annotated[str, typer.Argument(metavar="MESSAGE_ID", help="The message's id.")])),
        lambda c, v: c.message(v["task_id"], v["message_id"])["message"],
        ShowMessage("message"),
    ),
    _stream("events", EVENT_COLUMNS),
    _stream("grants", GRANT_COLUMNS),
    Verb(
        "snapshot",
        "GET /v1/tasks/{id}/snapshot",
        "The task and its event cursor, from one read (read events after it without a gap).",
        (TASK,),
        lambda c, v: c.snapshot(v["task_id"]),
    ),
)
register(app, VERBS)


@app.command("wait")
def tasks_wait(
    task_id: TaskId,
    state: Annotated[
        list[str] | None,
        typer.Option(help="A state to wait for (repeat for several). Default: any terminal state."),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            help="Seconds to wait; 0 waits forever. Exit 3 when it runs out; exit 5 when the task ended in "
            "another state."
        ),
    ] = 60.0,
    as_json: Json = False,
) -> None:
    """Wait until the task enters one of the states (followed on its event stream), then print it."""
    if timeout < 0:
        raise CliError(f"--timeout must be 0 (wait forever) or more seconds, not {timeout:g}", EXIT_USAGE)
    wanted = tuple(state or TERMINAL_STATES)
    unknown = [s for s in wanted if s not in ALL_STATES]
    if unknown:
        raise CliError(f"unknown state {unknown[0]!r}; one of {', '.join(ALL_STATES)}", EXIT_USAGE)
    emit(client().wait_for(task_id, wanted, timeout=timeout or None), as_json, "task")


@app.command("watch")
def tasks_watch(
    task_id: TaskId,
    after: Annotated[int, typer.Option(help="Start after this event sequence (0: from the first).", min=0)] = 0,
    as_json: Annotated[
        bool, typer.Option("--json", help="One event object a line, as the events route pages it.")
    ] = False,
    timeout: Annotated[
        float, typer.Option(help="Seconds to watch in all; 0 (the default) watches until the task ends. Exit 3 then.")
    ] = 0.0,
) -> None:
    """Print each event of the task as it commits (its stream, resumed by itself after a cut), and
    exit 0 once the task has ended (exit 3 when --timeout runs out first)."""
    if timeout < 0:
        raise CliError(f"--timeout must be 0 (until the task ends) or more seconds, not {timeout:g}", EXIT_USAGE)
    for event in client().follow(task_id, after, timeout=timeout or None):
        if as_json:
            say(json.dumps(event, ensure_ascii=False, separators=(",", ":")))
        else:
            line = f"{event['sequence']:>4}  {event['occurred_at']}  {event['type']}"
            line += f"  → {event['state']} (revision {event['revision']})"
            # Plain stdout (never rich): the worker's reason is printed as it wrote it, on this one line.
            say(f"{line}: {printable(str(event['reason']))}" if event.get("reason") else line)
