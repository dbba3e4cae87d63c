"""A2A streaming (SendStreamingMessage, SubscribeToTask; A2A v1.0 §3.1.2, §3.1.6) over the task
stream (dovecote/tasks/streams.py), whose durable event log is what makes an A2A stream resumable.

Each update carries the task event sequence it reflects (`Update.sequence`, the SSE `id:` on both
bindings); the opening Task carries the sequence it was read at. The first update is the Task (or
the Message of a Message-only answer); then a TaskStatusUpdateEvent per event as it commits (a
TaskArtifactUpdateEvent before the completion that publishes an artifact). SendStreamingMessage's
stream ends after a terminal or interrupted state (input required: the caller's turn); a
SubscribeToTask stream only after a terminal one (A2A v1.0 §3.1.6), so a subscriber follows a task
through its turns to its end.

`Last-Event-ID` on SubscribeToTask (the Dovecote extension the card names, STREAM_RESUME_EXTENSION):
the Task as it stands first, as the spec wants, then every update after that sequence, so a client
that tracked the ids misses nothing and sees nothing twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from a2a.types import (
    Message,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskArtifactUpdateEvent,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from dovecote.a2a import mapping
from dovecote.a2a.errors import error, from_domain
from dovecote.a2a.service import A2AService
from dovecote.platform.errors import DomainError
from dovecote.platform.principal import Principal
from dovecote.tasks import machine
from dovecote.tasks.model import TaskView
from dovecote.tasks.streams import KeepAlive, Logged


@dataclass(frozen=True, slots=True)
class Update:
    """One SSE message of an A2A stream: the sequence it reflects, and its StreamResponse (None: a
    keep-alive comment)."""

    sequence: int
    response: StreamResponse | None


def send_streaming(
    a2a: A2AService, principal: Principal, request: SendMessageRequest, idempotency_key: str = ""
) -> Iterator[Update]:
    """SendStreamingMessage: the commit happens here, before any byte (its errors raise now)."""
    record, history = a2a.commit_message(principal, request, idempotency_key)
    first = a2a.answer(principal, record, history)
    sequence = record.event_count
    if isinstance(first, Message):
        return iter([Update(sequence, StreamResponse(message=first))])
    return _stream(a2a, principal, record, StreamResponse(task=first), sequence, ends=mapping.SETTLED)


def subscribe(
    a2a: A2AService, principal: Principal, request: SubscribeToTaskRequest, last_event_id: int | None
) -> Iterator[Update]:
    """SubscribeToTask: TaskNotFound, or UnsupportedOperation for a terminal task, before any byte."""
    if not request.id:
        raise error("INVALID_PARAMS", "id is required: the task's id")
    record = a2a.record(principal, request.id)
    if machine.is_terminal(record.state):
        raise error(
            "UNSUPPORTED_OPERATION",
            f"the task is {record.state}: a terminal task has no updates to subscribe to",
            taskId=request.id,
        )
    count = record.event_count
    after = count if last_event_id is None else last_event_id
    if after > count:
        raise error(
            "INVALID_PARAMS", f"Last-Event-ID {after} is past the task's last event ({count})", taskId=request.id
        )
    task = a2a.answer(principal, record)
    opening = StreamResponse(message=task) if isinstance(task, Message) else StreamResponse(task=task)
    return _stream(a2a, principal, record, opening, count, after=after, ends=machine.TERMINAL)


def _stream(
    a2a: A2AService,
    principal: Principal,
    record: TaskView,
    opening: StreamResponse,
    sequence: int,
    *,
    after: int | None = None,
    ends: frozenset[str],
) -> Iterator[Update]:
    task_id, context_id = record.id, record.context
    try:
        items = a2a.tasks.follow(principal, task_id, sequence if after is None else after)
    except DomainError as exc:
        raise from_domain(exc, taskId=task_id) from None
    return _updates(a2a, principal, task_id, context_id, opening, sequence, items, record, ends)


def _updates(
    a2a: A2AService,
    principal: Principal,
    task_id: str,
    context_id: str,
    opening: StreamResponse,
    sequence: int,
    items: Iterator[object],
    record: TaskView,
    ends: frozenset[str],
) -> Iterator[Update]:
    yield Update(sequence, opening)
    if record.state in ends and record.event_count <= sequence:
        return  # it already stands in a state that ends this stream, and it was read there
    for item in items:
        if isinstance(item, KeepAlive):
            yield Update(sequence, None)
            continue
        if not isinstance(item, Logged):
            continue  # lease states are Dovecote's; a reconnect bound simply ends the A2A stream
        yield from event_updates(a2a, principal, task_id, context_id, item)
        if item.event.state in ends:
            return


def event_updates(a2a: A2AService, principal: Principal, task_id: str, context_id: str, item: Logged) -> list[Update]:
    """What the stream sends for one event of the task's log: a TaskArtifactUpdateEvent per
    artifact a completion publishes, then the TaskStatusUpdateEvent. Push notifications are built
    here too (dovecote/a2a/notifications.py): one notification per update."""
    out: list[Update] = []
    state = item.event.state
    if item.type == "task_completed":
        done = a2a.record(principal, task_id)
        for artifact in a2a.artifacts(principal, done):
            event = TaskArtifactUpdateEvent(task_id=task_id, context_id=context_id, last_chunk=True)
            event.artifact.CopyFrom(artifact)
            out.append(Update(item.sequence, StreamResponse(artifact_update=event)))
    status = TaskStatus(state=mapping.STATES[state])
    status.timestamp.FromJsonString(item.event.occurred_at)
    said = _agent_message(a2a, principal, task_id, context_id, item.event.message, state)
    if said is None and state == "failed" and item.event.reason:
        said = mapping.reason_message(task_id, context_id, item.sequence, item.event.reason)
    if said is not None:
        status.message.CopyFrom(said)
    update = TaskStatusUpdateEvent(task_id=task_id, context_id=context_id, status=status)
    out.append(Update(item.sequence, StreamResponse(status_update=update)))
    return out


def _agent_message(
    a2a: A2AService, principal: Principal, task_id: str, context_id: str, message_id: object, state: str
) -> Message | None:
    """The agent's message that goes with the new state (its question, its last word), as a Task's
    status carries it."""
    if not message_id or state in ("submitted", "working"):
        return None
    try:
        found = a2a.tasks.message(principal, task_id, str(message_id))
    except DomainError as exc:
        raise from_domain(exc, taskId=task_id) from None
    return mapping.message(found, task_id, context_id) if found.message.author == "agent" else None
