"""`dovecote worker …`: the worker's verbs (docs/services/workers.md), with the worker token (the admin's
for `fence`). The lease verbs and the task commands are built from one table (`dovecote.cli.verbs`);
`claim` (it long-polls in a loop), `freeze-artifact` (it streams a file) and `event` (it reads a JSON
document) are written out.

Revision and fence are named options (`--expected-revision`, alias `--rev`; `--fence`), never bare
numbers. `--json` prints the HTTP answer: `{"assignment": …}` for claim and the lease verbs,
`{"task": …}` for a command, `{"task", "artifact"}` for a freeze, the settlement for an event."""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Annotated, Any

import typer

from dovecote.cli.common import (
    EXIT_API,
    EXIT_NOTHING,
    EXIT_USAGE,
    CliError,
    CommandId,
    ExpectedRevision,
    Fence,
    Json,
    checked_path,
    client,
    emit,
    field,
    note,
    open_input,
    print_fields,
    print_json,
    transfer,
)
from dovecote.cli.groups import new_app
from dovecote.cli.tasks import COMMAND, MESSAGE, REVISION, TASK, TaskId, message_of
from dovecote.cli.verbs import Did, Output, Pages, Show, Values, Verb, param, register
from dovecote.client.artifacts import ARTIFACT_INLINE_SEND
from dovecote.client.paths import path as api_path
from dovecote.client.tasks import MAX_CLAIM_WAIT

# A worker event read by `worker event`: a message (2 MiB) and an inline freeze fit, with room.
MAX_EVENT_BYTES = 6 * 1024 * 1024

app = new_app("Tasks, as a worker: claim, heartbeat, release, drive a task to a terminal state.")

FENCE = param("fence", Fence)
ASSIGNMENT = Show("assignment")
ArtifactId = Annotated[
    str | None, typer.Option("--artifact-id", "--artifact", help="The artifact this task froze (it is published).")
]
LEASE_COLUMNS = [
    ("task", lambda a: a["task"]["id"]),
    ("state", lambda a: a["task"]["state"]),
    ("rev", lambda a: a["task"]["revision"]),
    field("fence"),
    field("worker"),
    field("heartbeat_at"),
]


def _lease_done(verb: str) -> Did:
    return Did(
        lambda v: {"task": v["task_id"], "fence": v["fence"], verb: True},
        lambda v: f"{verb} the lease of {v['task_id']} with fence {v['fence']}",
    )


def _lease_verb(
    name: str,
    route: str,
    *params: inspect.Parameter,
    help: str,
    call: Callable[[Any, Values], Any] | None = None,
    output: Output = ASSIGNMENT,
    role: str = "worker",
) -> Verb:
    """A lease verb: by default the SDK method of its name, given the verb's parameters in order."""
    names = [p.name for p in params]
    call = call or (lambda c, v: getattr(c, name)(*(v[n] for n in names)))
    return Verb(name, route, help, params, call, output, role=role)


def _current_lease(c: Any, v: Values) -> Any:
    return c.request("GET", api_path("tasks", v["task_id"], "lease"))["assignment"]


def _command(kind: str, **extra: Any) -> Any:
    return lambda c, v: c.worker_command(
        kind, v["task_id"], v["expected_revision"], v["fence"], v["command_id"], **{k: f(v) for k, f in extra.items()}
    )


def _task_command(kind: str, help: str, *more: Any, **extra: Any) -> Verb:
    return Verb(
        kind,
        f"POST /v1/tasks/{{id}}/{kind}",
        help,
        (TASK, REVISION, FENCE, *more, COMMAND),
        _command(kind, **extra),
        Show("task"),
        role="worker",
    )


VERBS = (
    Verb(
        "leases",
        "GET /v1/leases",
        "This worker's current leases (what to resume after a restart).",
        (),
        lambda c, v: lambda cursor: c.list_leases(v["limit"], cursor),
        Pages(LEASE_COLUMNS),
        role="worker",
    ),
    _lease_verb(
        "lease",
        "GET /v1/tasks/{id}/lease",
        TASK,
        call=_current_lease,
        help="The task's current lease (404 when it has none).",
    ),
    _lease_verb(
        "acquire",
        "POST /v1/tasks/{id}/lease",
        TASK,
        COMMAND,
        help="Lease this task (fence + 1); 409 lease_unavailable while another lease holds it.",
    ),
    _lease_verb(
        "heartbeat",
        "POST /v1/tasks/{id}/lease/heartbeat",
        TASK,
        FENCE,
        help="A sign of life of your lease (409 stale_lease when it is no longer current).",
    ),
    _lease_verb(
        "release",
        "POST /v1/tasks/{id}/lease/fence",
        TASK,
        FENCE,
        COMMAND,
        output=_lease_done("released"),
        help="Give up your own lease: the task becomes claimable again (the fence is kept).",
    ),
    _lease_verb(
        "fence",
        "POST /v1/tasks/{id}/lease/fence",
        TASK,
        FENCE,
        COMMAND,
        output=_lease_done("fenced"),
        help="Retire any worker's lease generation (an admin token: --profile, DOVECOTE_TOKEN or the dev admin token).",
        role="admin",
    ),
    _task_command("accept", "submitted → working."),
    _task_command("reject", "submitted → rejected."),
    _task_command(
        "fail",
        "working or input_required → failed (--reason says why, kept on the task_failed event).",
        param("reason", Annotated[str | None, typer.Option(help="Why the task failed (at most 2 KiB).")], None),
        reason=lambda v: v["reason"],
    ),
    _task_command("request-input", "working → input_required, with your question.", *MESSAGE, message=message_of),
    _task_command(
        "complete",
        "working → completed, with your final message (and the frozen artifact, which it publishes).",
        *MESSAGE,
        param(
            "submission_id",
            Annotated[str | None, typer.Option(help="Default: derived from the command id (so a retry replays).")],
            None,
        ),
        param("artifact_id", ArtifactId, None),
        message=message_of,
        submission_id=lambda v: v["submission_id"],
        artifact_id=lambda v: v["artifact_id"],
    ),
)
register(app, VERBS)


@app.command("claim")
def worker_claim(
    wait_seconds: Annotated[
        int,
        typer.Option(
            "--wait-seconds",
            "--wait",
            help="Long-poll: wait up to N seconds for a claimable task (longer waits are repeated).",
        ),
    ] = 0,
    command_id: CommandId = None,
    as_json: Json = False,
) -> None:
    """Lease a claimable task, close to the oldest: `{"assignment": …}`; exit 3 when there is none (`{"assignment":
    null}` with --json)."""
    if wait_seconds < 0:
        raise CliError("--wait-seconds must be >= 0", EXIT_USAGE)
    c = client("worker")
    from dovecote.client import new_id

    cid = command_id or new_id("c")  # a claim that found nothing reserves nothing: one id for all polls
    deadline = time.monotonic() + wait_seconds
    while True:
        left = max(0, int(deadline - time.monotonic() + 0.5))
        assignment = c.claim(cid, wait_seconds=min(MAX_CLAIM_WAIT, left))
        if assignment is not None:
            emit(assignment, as_json, "assignment")
            return
        if time.monotonic() >= deadline:
            break
    if as_json:
        print_json({"assignment": None})
    else:
        note("nothing is claimable" + (f" (waited {wait_seconds} s)" if wait_seconds else ""))
    raise typer.Exit(EXIT_NOTHING)


@app.command("freeze-artifact")
def worker_freeze_artifact(
    task_id: TaskId,
    expected_revision: ExpectedRevision,
    fence: Fence,
    artifact_id: Annotated[
        str, typer.Option("--artifact-id", "--artifact", help="The artifact's id (unique in the workspace).")
    ],
    expected_base_revision: Annotated[
        str,
        typer.Option(
            "--expected-base-revision",
            "--base",
            help="The workspace revision it applies to: the head's confirmed_revision (`dovecote artifacts "
            "head WS`); a workspace's first freeze names any revision (rev-0, say), which becomes the head's.",
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
    big = False
    if file is not None and file != "-":
        source: Any = checked_path(file)
        big = source.stat().st_size > ARTIFACT_INLINE_SEND
        label = f"upload {source.name}"
    else:
        source, label, big = open_input(file), "upload stdin", True
    with transfer(label) if big else nullcontext(None) as progress:
        answer = c.freeze_artifact(
            task_id,
            expected_revision,
            fence,
            artifact_id,
            expected_base_revision,
            source,
            media_type=media_type,
            command_id=command_id,
            progress=progress,
        )
    if as_json:
        print_json(answer)
    else:
        print_fields({"artifact": answer["artifact"], "task": {k: answer["task"][k] for k in ("state", "revision")}})


@app.command("event")
def worker_event(
    file: Annotated[
        str | None,
        typer.Argument(
            metavar="FILE", help="A JSON file: {delivery_id?, event} or the event alone; - or none reads stdin."
        ),
    ] = None,
    as_json: Json = False,
) -> None:
    """Settle one worker event (`POST /v1/worker/events`) and print its settlement. A NACK is an
    answer, not an error: it prints and exits 1, an ACK exits 0. Missing event_id, delivery_id,
    message and submission ids are filled in (pass them to retry the same delivery)."""
    raw = open_input(file).read(MAX_EVENT_BYTES + 1)
    if len(raw) > MAX_EVENT_BYTES:
        raise CliError(
            f"the event is larger than {MAX_EVENT_BYTES} bytes (stage a large payload with `worker freeze-artifact`)"
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
        note(f"nack: {settlement.get('code')}: {settlement.get('message')}")  # beside the answer, not instead
        raise typer.Exit(EXIT_API)
