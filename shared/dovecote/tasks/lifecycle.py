"""The lifecycle commands (docs/design/tasks.md): create, and every transition of the state machine (reply,
cancel, accept, reject, request_input, fail, complete, freeze_artifact). Each is one read and one
atomic commit through the command loop; the decisions below are pure."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dovecote.platform.errors import (
    InvalidTransition,
    NotFound,
    RevisionConflict,
    TaskConflict,
    TerminalTask,
)
from dovecote.platform.principal import Principal
from dovecote.tasks import artifacts, machine
from dovecote.tasks.artifacts import Frozen
from dovecote.tasks.command_loop import CommandLoop, Outcome, Recorded, answered, commit_of
from dovecote.tasks.commands import (
    Complete,
    CreateTask,
    Fail,
    Freeze,
    Reply,
    RequestInput,
    TaskCommand,
    WorkerCommand,
)
from dovecote.tasks.limits import MAX_COUNTER
from dovecote.tasks.model import Event, Message, MessageInput, Task, TaskView, stale_lease
from dovecote.tasks.ports import Commit, Delivery, Expect


class Lifecycle:
    def __init__(self, work: CommandLoop, *, default_lease_timeout: int, default_accept_timeout: int) -> None:
        self.work = work
        self.default_lease_timeout = default_lease_timeout
        self.default_accept_timeout = default_accept_timeout

    def create(self, principal: Principal, command: CreateTask) -> Outcome[TaskView]:
        """A task at revision 1 with the caller's first message. An exact retry answers 200 with
        the original task."""
        timeout = self.default_lease_timeout if command.lease_timeout is None else command.lease_timeout
        given_accept = command.accept_timeout
        accept_timeout = self.default_accept_timeout if given_accept is None else given_accept
        task_id, message = command.id, command.message
        intent: dict[str, Any] = {
            "id": task_id,
            "workspace": command.workspace,
            "context": command.context,
            "message": message.to_json(),
            "lease_timeout_seconds": timeout,
        }
        if given_accept is not None:
            # Only as given: a create that does not name it keeps the digest it had before accept
            # timeouts existed, so its exact retry still replays.
            intent["accept_timeout_seconds"] = given_accept

        def decide(existing: Task | None) -> Commit | Recorded:
            if existing is not None:
                raise TaskConflict("a task with this id already exists", task=task_id)
            now = self.work.now()
            task = Task(
                principal.authority,
                task_id,
                command.workspace,
                command.context,
                "submitted",
                1,
                1,
                1,
                now,
                now,
                lease_timeout=timeout,
                accept_timeout=accept_timeout,
            )
            record = Message(task_id, message.id, 1, "caller", message.parts, now, message.metadata)
            event = Event(task_id, 1, "task_submitted", "submitted", 1, now, message=message.id)
            return commit_of(task, None, 201, task.to_json(), messages=(record,), events=(event,))

        recorded = self.work.run(principal, "create_task", command.command_id, task_id, intent, decide)
        status = 200 if recorded.replayed else recorded.status  # an exact retry of a create is a 200
        return Outcome(status, TaskView.from_json(recorded.body), recorded.replayed)

    def move(self, principal: Principal, command: TaskCommand) -> Outcome[TaskView]:
        """A transition that answers the task: every one but a freeze."""
        return answered(self.transition(principal, command), TaskView.from_json)

    def freeze(self, principal: Principal, command: Freeze) -> Outcome[Frozen]:
        """freeze_artifact: it answers the task and the artifact it froze."""
        recorded = self.transition(principal, command)
        return answered(recorded, lambda body: Frozen.from_json(body, principal.authority))

    def transition(self, principal: Principal, command: TaskCommand, *, delivery: Delivery | None = None) -> Recorded:
        """Any command of the state machine (machine.TRANSITIONS[command.KIND]), as its receipt records
        it; `delivery` settles a worker event in the same commit. The role was authorized where the
        command was built (commands.authorize)."""
        kind = command.KIND
        transition = machine.TRANSITIONS[kind]
        worker = principal.worker if transition.by == "worker" else ""
        fence = command.fence if isinstance(command, WorkerCommand) else 0
        message = command.message if isinstance(command, Reply | RequestInput | Complete) else None
        submission = command.submission if isinstance(command, Complete) else ""
        named = command.artifact if isinstance(command, Complete) else None
        freeze = command if isinstance(command, Freeze) else None
        reason = command.reason if isinstance(command, Fail) else ""
        intent: dict[str, Any] = {"task": command.task, "expected_revision": command.expected_revision}
        if transition.by == "worker":
            intent.update(fence=fence, worker=worker)
        if message is not None:
            intent["message"] = message.to_json()
        if submission:
            intent["submission"] = submission
        if named is not None:
            intent["artifact"] = named
        if freeze is not None:
            intent["freeze"] = freeze.intent()
        if reason:
            # Only when given: a fail without one keeps the digest it had before reasons existed.
            intent["reason"] = reason

        def decide(task: Task | None) -> Commit | Recorded:
            task = self._check(command, task, worker, fence)
            to = machine.next_state(kind, task.state)
            assert to is not None  # _check refused the transition otherwise
            now = self.work.now()
            artifacts.check_named(kind, task, named)
            extra: dict[str, Any] = {"artifact_change": artifacts.ended(kind, task, now)}
            changes: dict[str, Any] = {}
            if freeze is not None:
                artifact, head = artifacts.frozen(task, freeze, now)
                extra.update(artifact=artifact, payload=freeze.payload, head_claim=head)
                changes["artifact"] = artifact.id
            return self._moved(task, kind, to, now, message, submission, changes, extra, reason)

        return self.work.run(principal, kind, command.command_id, command.task, intent, decide, delivery=delivery)

    @staticmethod
    def _check(command: TaskCommand, task: Task | None, worker: str, fence: int) -> Task:
        """Steps 2 to 7 of the check order (command_loop.py)."""
        kind, expected = command.KIND, command.expected_revision
        if task is None:
            raise NotFound("task not found", task=command.task)
        if machine.TRANSITIONS[kind].by == "worker" and (task.owner != worker or task.fence != fence):
            raise stale_lease(task, fence)
        if task.revision != expected:
            raise RevisionConflict(
                f"expected revision {expected}, the task is at {task.revision}", expected=expected, actual=task.revision
            )
        if machine.is_terminal(task.state):
            raise TerminalTask(f"the task is {task.state}", state=task.state)
        if machine.next_state(kind, task.state) is None:
            raise InvalidTransition(f"{kind} is not allowed from {task.state}", state=task.state, command=kind)
        if task.revision >= MAX_COUNTER or task.event_count >= MAX_COUNTER:
            # The reference reports exhausted counters as a revision conflict (step 7 of the check
            # order comes after the transition check but speaks of the revision).
            raise RevisionConflict(
                "the task's revision cannot grow any further", expected=expected, actual=task.revision
            )
        return task

    @staticmethod
    def _moved(
        task: Task,
        kind: str,
        to: str,
        now: str,
        message: MessageInput | None,
        submission: str,
        changes: dict[str, Any],
        extra: dict[str, Any],
        reason: str = "",
    ) -> Commit:
        """The task one revision on, with its event (and message), as one commit."""
        transition = machine.TRANSITIONS[kind]
        revision = task.revision + 1
        messages: tuple[Message, ...] = ()
        message_id = ""
        if message is not None:
            author = transition.message or "caller"
            messages = (
                Message(task.id, message.id, task.message_count + 1, author, message.parts, now, message.metadata),
            )
            message_id = message.id
        changes.update(
            state=to,
            revision=revision,
            event_count=task.event_count + 1,
            message_count=task.message_count + len(messages),
            updated_at=now,
        )
        if transition.by == "worker":
            # Every worker command is a sign of life, and takes its grant up if nothing did before.
            changes.update(heartbeat_at=now, accepted_at=task.accepted_at or now)
        if machine.is_terminal(to):
            changes.update(owner="", granted_at="", heartbeat_at="", accepted_at="")  # the fence is kept
        if submission:
            changes["submission"] = {"id": submission, "final_message": message_id, "published_at": now}
        after = task.evolve(**changes)
        frozen = extra.get("artifact")
        event = Event(
            task.id,
            task.event_count + 1,
            transition.event,
            to,
            revision,
            now,
            message=message_id,
            submission=submission,
            artifact=frozen.id if frozen is not None else (task.artifact if kind == "complete_task" else ""),
            reason=reason,
        )
        result = {"task": after.to_json(), "artifact": frozen.to_json()} if frozen is not None else after.to_json()
        expect = Expect(task.revision, task.owner, task.fence)
        decided = commit_of(after, expect, 200, result, messages=messages, events=(event,), submission=submission)
        return replace(decided, **extra)
