"""Task tools (docs/services/tasks.md). The caller's tools are always there; the worker's (claim, accept,
request_input, complete, fail, freeze_artifact) only for a token that may run worker commands
(`server.py` asks the API). Every tool answers the HTTP answer, the same envelope and keys
(`{task}`, `{assignment}`, `{task, artifact}`). A command's id is generated when the model gives none;
a failure that may have committed names it in the error (`command_id`), and calling again with it
replays instead of running twice. Message and submission ids derive from the command id (the SDK's
rule), so a replayed command carries the same ones."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from dovecote.client import DovecoteClient, new_id, text_message
from dovecote.client.tasks import MAX_CLAIM_WAIT
from dovecote.mcp.annotations import tool
from dovecote.mcp.fields import (
    After,
    CommandId,
    Context,
    Cursor,
    ExpectedRevision,
    Fence,
    Limit,
    MessageId,
    NewTaskId,
    TaskId,
    Text,
    Workspace,
)

State = Literal["", "submitted", "working", "input_required", "completed", "failed", "canceled", "rejected"]
WaitSeconds = Annotated[
    int,
    Field(
        ge=0,
        le=MAX_CLAIM_WAIT,
        description=f"Long-poll up to this many seconds (0-{MAX_CLAIM_WAIT}) while nothing is claimable.",
    ),
]


def command_id_or_new(command_id: str | None) -> str:
    return command_id or new_id("c")


def register_caller(server: MCPServer, client: DovecoteClient) -> None:
    @tool(server, "tasks_create")
    def tasks_create(
        text: Text,
        task_id: NewTaskId = None,
        workspace: Workspace = "default",
        context: Context = "default",
        lease_timeout_seconds: Annotated[
            int | None, Field(ge=0, le=86400, description="How long a worker's lease may stay silent (0 = never).")
        ] = None,
        accept_timeout_seconds: Annotated[
            int | None,
            Field(ge=0, le=3600, description="How long a worker's grant may stay unaccepted (0 = never)."),
        ] = None,
        command_id: CommandId = None,
    ) -> dict[str, Any]:
        """Ask another agent to do something: create a task with your request as its first message.
        It starts `submitted`; a worker claims, accepts and completes it. Answers {task} (its id is
        generated when you give none); follow it with tasks_get or tasks_events."""
        cid = command_id_or_new(command_id)
        tid = task_id or client.derived_id("t", "task", cid)
        task = client.create_task(
            tid,
            text_message(text),
            workspace=workspace,
            context=context,
            command_id=cid,
            lease_timeout_seconds=lease_timeout_seconds,
            accept_timeout_seconds=accept_timeout_seconds,
        )
        return {"task": task}

    @tool(server, "tasks_get")
    def tasks_get(task_id: TaskId) -> dict[str, Any]:
        """One task: {task: {id, state, revision, message_count, ...}, lease, last_lease}. Use its
        `revision` as the `expected_revision` of your next command on it. `lease` is who holds it
        now (worker, fence, heartbeat_at, fenced_after: when it is taken back if silent); absent when
        unleased. `last_lease` says how the last lease ended (reason: released, fenced, expired,
        unaccepted, task_ended)."""
        return client.read_task(task_id)

    @tool(server, "tasks_list")
    def tasks_list(
        context: Annotated[str, Field(description="Only tasks of this context; '' for all.")] = "",
        state: Annotated[State, Field(description="Only tasks in this state; '' for all.")] = "",
        updated_since: Annotated[str, Field(description="RFC 3339 instant: only tasks updated since.")] = "",
        limit: Limit = None,
        cursor: Cursor = None,
    ) -> dict[str, Any]:
        """List tasks, newest update first. One page: pass the returned `cursor` back for the next."""
        return client.list_tasks(context=context, state=state, updated_since=updated_since, limit=limit, cursor=cursor)

    @tool(server, "tasks_reply")
    def tasks_reply(
        task_id: TaskId, expected_revision: ExpectedRevision, text: Text, command_id: CommandId = None
    ) -> dict[str, Any]:
        """Answer a task that asked for input (state input_required → working), as its caller."""
        return {"task": client.reply(task_id, expected_revision, text_message(text), command_id_or_new(command_id))}

    @tool(server, "tasks_cancel")
    def tasks_cancel(
        task_id: TaskId, expected_revision: ExpectedRevision, command_id: CommandId = None
    ) -> dict[str, Any]:
        """Cancel a task that has not ended (→ canceled)."""
        return {"task": client.cancel(task_id, expected_revision, command_id_or_new(command_id))}

    @tool(server, "tasks_messages")
    def tasks_messages(task_id: TaskId, after: After = 0, limit: Limit = None) -> dict[str, Any]:
        """The task's conversation, oldest first: {items: [{id, sequence, author, parts}], next,
        has_more}. For more, call again with after = `next`."""
        return client.messages(task_id, after, limit)

    @tool(server, "tasks_message")
    def tasks_message(task_id: TaskId, message_id: MessageId) -> dict[str, Any]:
        """One message of the task by its id (as a page or an event names it): {message: {id,
        sequence, author, parts, created_at}}."""
        return client.message(task_id, message_id)

    @tool(server, "tasks_events")
    def tasks_events(task_id: TaskId, after: After = 0, limit: Limit = None) -> dict[str, Any]:
        """The task's history of state changes, oldest first: {items: [{sequence, type, state,
        revision}], next, has_more}. For more (or to follow it), call again with after = `next`."""
        return client.events(task_id, after, limit)

    @tool(server, "tasks_grants")
    def tasks_grants(task_id: TaskId, after: After = 0, limit: Limit = None) -> dict[str, Any]:
        """The task's lease history, oldest first: {items: [{fence, worker, state, granted_at,
        accepted_at, heartbeat_at, ended_at, reason, by}], next, has_more}: who held it and how each
        lease ended. For more, call again with after = `next`."""
        return client.grants(task_id, after, limit)


TRANSITIONS = {
    "accept": "Accept a claimed task (submitted → working) before working on it.",
}


def transition(server: MCPServer, name: str, description: str, command: Any, kind: str) -> None:
    @tool(server, name, description)
    def transition_tool(
        task_id: TaskId, expected_revision: ExpectedRevision, fence: Fence, command_id: CommandId = None
    ) -> dict[str, Any]:
        return dict(command(kind, task_id, expected_revision, fence, command_id))


def register_worker(server: MCPServer, client: DovecoteClient) -> None:
    @tool(server, "tasks_claim")
    def tasks_claim(wait_seconds: WaitSeconds = 0, command_id: CommandId = None) -> dict[str, Any]:
        """Take the oldest task waiting for a worker: {assignment: {task, fence, ...}} (or
        assignment null when there is none). Then accept it with its revision and fence."""
        return {"assignment": client.claim(command_id_or_new(command_id), wait_seconds=wait_seconds)}

    def command(
        kind: str, task_id: str, expected_revision: int, fence: int, cid: str | None, **extra: Any
    ) -> dict[str, Any]:
        return {"task": client.worker_command(kind, task_id, expected_revision, fence, command_id_or_new(cid), **extra)}

    # The transitions that carry nothing but the task, its revision and the fence: one tool each.
    for kind, description in TRANSITIONS.items():
        transition(server, f"tasks_{kind}", description, command, kind)

    @tool(server, "tasks_fail")
    def tasks_fail(
        task_id: TaskId,
        expected_revision: ExpectedRevision,
        fence: Fence,
        reason: Annotated[
            str | None, Field(description="Why you give up, for the caller (at most 2 KiB), kept on the event.")
        ] = None,
        command_id: CommandId = None,
    ) -> dict[str, Any]:
        """Give up on a task you accepted (working or input_required → failed), saying why."""
        return command("fail", task_id, expected_revision, fence, command_id, reason=reason)

    @tool(server, "tasks_request_input")
    def tasks_request_input(
        task_id: TaskId, expected_revision: ExpectedRevision, fence: Fence, text: Text, command_id: CommandId = None
    ) -> dict[str, Any]:
        """Ask the task's caller a question (working → input_required); their tasks_reply moves it back."""
        return command("request-input", task_id, expected_revision, fence, command_id, message=text_message(text))

    @tool(server, "tasks_complete")
    def tasks_complete(
        task_id: TaskId,
        expected_revision: ExpectedRevision,
        fence: Fence,
        text: Annotated[str, Field(description="Your final answer, as plain text.")],
        artifact_id: Annotated[str | None, Field(description="The artifact you froze for this task, if any.")] = None,
        command_id: CommandId = None,
    ) -> dict[str, Any]:
        """Finish a task you accepted (working → completed) with your final answer."""
        return command(
            "complete",
            task_id,
            expected_revision,
            fence,
            command_id,
            message=text_message(text),
            artifact_id=artifact_id,
        )

    @tool(server, "tasks_freeze_artifact")
    def tasks_freeze_artifact(
        task_id: TaskId,
        expected_revision: ExpectedRevision,
        fence: Fence,
        artifact_id: Annotated[str, Field(description="The artifact's id, unique in the workspace.")],
        expected_base_revision: Annotated[
            str, Field(description="The workspace revision your change applies to (e.g. a commit id).")
        ],
        text: Annotated[str, Field(description="The artifact's payload, as text (e.g. a patch).")],
        media_type: Annotated[str, Field(description="The payload's media type.")] = "text/plain",
        command_id: CommandId = None,
    ) -> dict[str, Any]:
        """Freeze the task's one artifact (while working): its payload and the workspace revision it
        applies to. Answers {task, artifact}; name the artifact in tasks_complete."""
        return client.freeze_artifact(
            task_id,
            expected_revision,
            fence,
            artifact_id,
            expected_base_revision,
            text,
            media_type=media_type,
            command_id=command_id_or_new(command_id),
        )
