"""The A2A operations over the task service: every call is ordinary Dovecote task commands and reads,
so fencing, receipts and revision CAS hold unchanged (no rule of the task lifecycle lives here).

- SendMessage without a taskId: create_task in the default workspace (server-generated task id, the
  client's contextId or a generated one). With a taskId: reply_task, from input_required only; a
  terminal task is UnsupportedOperation. Then, unless returnImmediately, it follows the task's event
  stream until a terminal or interrupted state, or BLOCK_SECONDS (sooner when reads are slow), and
  answers the task as it stands; at most `waits` of one authority's sends wait at once (a DynamoDB
  item per authority, dovecote/a2a/waits.py), the others answer at once, as returnImmediately does.
- An Idempotency-Key is the command id (hashed into one when it is not a Dovecote id); the task,
  context and message ids derive from it, so a retried SendMessage replays the one create. A reply
  under a key already used is that command rebuilt (its receipt says its revision): an exact retry
  replays, any other body is IDEMPOTENCY_CONFLICT (409), as on create.
- CancelTask: cancel_task at the revision it read, read again and retried on a revision conflict
  (CAS, at most CANCEL_ATTEMPTS times); a task already canceled answers as it is (idempotent).
- GetTask / ListTasks: the task reads, mapped (dovecote.a2a.mapping).

Round trips: a create or reply is one task transaction (a reply under an Idempotency-Key reads its
receipt first: one more read); a blocking wait takes and gives back a slot of the authority's bound
(two updates of its waits item; a send past the bound two requests, a refused update and a read) and
reads the event stream (one query per poll, backing off from POLL_FIRST to POLL_MAX); the answer
reads the task, its messages (one query per 100) and, once completed with an artifact, the artifact
(one read, S3 past 8 KiB).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any

from a2a.types import (
    Artifact,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SendMessageResponse,
    Task,
)

from dovecote.a2a import mapping
from dovecote.a2a.errors import A2AError, error, from_domain
from dovecote.a2a.mapping import MessageBody
from dovecote.a2a.waits import MemoryWaits, Waits
from dovecote.platform.errors import DomainError, InvalidArgument, NotFound, RevisionConflict
from dovecote.platform.ids import check_id
from dovecote.platform.observability import logger
from dovecote.platform.principal import Principal
from dovecote.platform.settings import Settings
from dovecote.tasks import inputs, machine
from dovecote.tasks.commands import Cancel, CreateTask, Reply, authorize
from dovecote.tasks.model import Event, Receipt, TaskView
from dovecote.tasks.ports import TaskFilter
from dovecote.tasks.reads import MessageRead
from dovecote.tasks.service import TaskService

if TYPE_CHECKING:
    from dovecote.push.service import PushService

# A blocking send follows the task this long at most, and stops sooner when its reads are slow: it
# keeps room for the next poll and the answer's reads (ANSWER_READS, each as slow as the slowest poll
# so far), so it answers within the function's 29 s and API Gateway's 30 s under load too.
BLOCK_SECONDS = 20.0
ANSWER_READS = 3  # the task, its messages, its artifact
POLL_FIRST = 0.05
POLL_MAX = 0.5
DEFAULT_WORKSPACE = "a2a"
DEFAULT_PAGE_SIZE = 50  # ListTasks without pageSize (A2A v1.0)
MAX_PAGE_SIZE = 100
CANCEL_ATTEMPTS = 5
# GetTask and SendMessage without historyLength: this many of the latest messages.
DEFAULT_HISTORY = 100
# What a ListTasks answer adds beside its tasks (the keys, nextPageToken up to ~1 KiB, the counts).
LIST_ENVELOPE = 2048


@dataclass(eq=False)
class A2AService:
    tasks: TaskService
    _: KW_ONLY
    workspace: str = DEFAULT_WORKSPACE
    block_seconds: float = BLOCK_SECONDS
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    # The bound on blocking waits per authority (dovecote/a2a/waits.py): the deployment's is a
    # DynamoDB item per authority; without one, the same rule in this process.
    waits: Waits = field(default_factory=lambda: MemoryWaits(int(Settings.default("a2a_waits_per_authority"))))
    # Webhooks (dovecote/push): configs on both bindings and with SendMessage; None: not served.
    push: PushService | None = None

    # ---- SendMessage ---------------------------------------------------------------------------------

    def send_message(
        self, principal: Principal, request: SendMessageRequest, idempotency_key: str = ""
    ) -> SendMessageResponse:
        started = self.monotonic()
        record, history = self.commit_message(principal, request, idempotency_key)
        if not request.configuration.return_immediately:
            # Within the authority's bound it waits; past it, it answers the task as it stands at
            # once, as returnImmediately does.
            entry = self._take(principal)
            if entry is not None:
                try:
                    record = self._wait(principal, record, started)
                finally:
                    self._give_back(principal, entry)
        answer = self._answer(principal, record, history)
        if isinstance(answer, Task):
            return SendMessageResponse(task=answer)
        return SendMessageResponse(message=answer)

    def commit_message(
        self, principal: Principal, request: SendMessageRequest, idempotency_key: str = ""
    ) -> tuple[TaskView, int | None]:
        """SendMessage's commit without its wait (SendStreamingMessage follows the task instead):
        the task record after the create or reply, and the historyLength asked for."""
        if not request.HasField("message"):
            raise error("INVALID_PARAMS", "message is required")
        config = request.configuration
        history = _history_length(config.history_length if config.HasField("history_length") else None)
        ids = _Ids(idempotency_key)
        body = mapping.message_body(request.message, ids.message)
        webhook = self._webhook(principal, request, ids)
        try:
            if request.message.task_id:
                return self._reply(principal, request, ids, body), history
            return self._create(principal, request, ids, body), history
        except DomainError as exc:
            self._unhook(principal, request, ids, webhook)
            raise from_domain(exc) from None
        except A2AError:
            self._unhook(principal, request, ids, webhook)
            raise

    def _webhook(self, principal: Principal, request: SendMessageRequest, ids: _Ids) -> str:
        """`configuration.taskPushNotificationConfig`, stored before the commit (dovecote/a2a/push.py)."""
        if not request.configuration.HasField("task_push_notification_config"):
            return ""
        if self.push is None:
            raise error("PUSH_NOTIFICATION_NOT_SUPPORTED", "push notifications are not configured here")
        from dovecote.a2a import push

        task_id = request.message.task_id or ids.task
        config = request.configuration.task_push_notification_config
        return push.register(self.push, principal, config, task_id, new_task=not request.message.task_id)

    def _unhook(self, principal: Principal, request: SendMessageRequest, ids: _Ids, webhook: str) -> None:
        if webhook and self.push is not None and not request.message.task_id:
            self.push.forget(principal, ids.task, webhook)  # the task it was for was never created

    def answer(self, principal: Principal, record: TaskView, history: int | None = None) -> Task | Message:
        """The task as SendMessage answers it: the Task, or the Message of a Message-only answer."""
        return self._answer(principal, record, history)  # type: ignore[no-any-return]

    def record(self, principal: Principal, task_id: str) -> TaskView:
        """The task's record (TaskNotFound for none, another authority's included)."""
        return self._get(principal, task_id)

    def artifacts(self, principal: Principal, record: TaskView) -> list[Artifact]:
        return self._artifacts(principal, record)

    def _create(self, principal: Principal, request: SendMessageRequest, ids: _Ids, body: MessageBody) -> TaskView:
        context = request.message.context_id or ids.context
        try:
            check_id(context, "contextId")
        except InvalidArgument:
            raise error(
                "INVALID_PARAMS",
                "contextId is not one this agent accepts: 1-128 of A-Z a-z 0-9 . _ : -, a letter or digit first",
                contextId=context[:128],
            ) from None
        # The command built directly: its ids are this adapter's own (checked above, or generated),
        # its message through the one rule of a message every binding shares; who may create, asked
        # once, as the HTTP gate asks it.
        command = CreateTask(ids.command, ids.task, self.workspace, context, inputs.message(body))
        authorize(principal, CreateTask)
        return self.tasks.create(principal, command).answer

    def _reply(self, principal: Principal, request: SendMessageRequest, ids: _Ids, body: MessageBody) -> TaskView:
        task_id = request.message.task_id
        record = self._get(principal, task_id)
        if request.message.context_id and request.message.context_id != record.context:
            raise error(
                "INVALID_PARAMS",
                "contextId does not match the task's",
                taskId=task_id,
                contextId=request.message.context_id,
            )
        if ids.keyed:
            used = self.tasks.command_receipt(principal, ids.command)
            if used is not None:
                return self._again(principal, record, ids, body, used)
        if machine.is_terminal(record.state):
            raise error(
                "UNSUPPORTED_OPERATION",
                f"the task is {record.state}: a terminal task takes no more messages",
                taskId=task_id,
                state=mapping.TaskState.Name(mapping.STATES[record.state]),
            )
        if not self.tasks.allows(Reply, record.state):
            raise error(
                "UNSUPPORTED_OPERATION",
                f"the task is {record.state}: a message continues a task only when it requires input",
                taskId=task_id,
                state=mapping.TaskState.Name(mapping.STATES[record.state]),
            )
        command = Reply(task_id, ids.command, record.revision, message=inputs.message(body))
        authorize(principal, Reply)
        return self.tasks.reply(principal, command).answer

    def _again(self, principal: Principal, record: TaskView, ids: _Ids, body: MessageBody, used: Receipt) -> TaskView:
        """A reply under an Idempotency-Key some command already used: that command rebuilt as it
        was first sent (a reply's expected revision is the one before its answer's), so the task
        service's own replay rule decides. An exact retry replays; another message, another task,
        or a key the create used is its IdempotencyConflict (409), as on create."""
        revision = TaskView.from_json(used.result).revision if used.kind == "reply_task" else None
        expected = revision - 1 if revision is not None and revision > 1 else record.revision
        command = Reply(record.id, ids.command, expected, message=inputs.message(body))
        authorize(principal, Reply)
        self.tasks.reply(principal, command)
        return self._get(principal, record.id)

    def _take(self, principal: Principal) -> str | None:
        """A slot of the authority's bound, or None: all are held, or the bound could not be read
        (the send has committed: answering at once beats an error the client would retry)."""
        try:
            return self.waits.take(principal.authority)
        except DomainError as exc:
            logger.warning("blocking waits unavailable: answering at once", extra={"code": exc.code})
            return None

    def _give_back(self, principal: Principal, entry: str) -> None:
        try:
            self.waits.give_back(principal.authority, entry)
        except DomainError as exc:  # the entry expires by itself (waits.HOLD_SECONDS)
            logger.warning("a blocking wait's slot was not given back", extra={"code": exc.code})

    def _wait(self, principal: Principal, record: TaskView, started: float) -> TaskView:
        """Follow the task's events from its current revision until a terminal or interrupted state,
        or the deadline, less the room the next poll and the answer's reads need; then the task as
        it stands."""
        state, cursor = record.state, record.revision
        delay = POLL_FIRST
        deadline = started + self.block_seconds
        slowest = 0.0
        while state not in mapping.SETTLED:
            if deadline - self.monotonic() - slowest * (1 + ANSWER_READS) <= 0:
                break
            polled = self.monotonic()
            try:
                page = self.tasks.events(principal, record.id, cursor, None)
            except DomainError as exc:
                raise from_domain(exc, taskId=record.id) from None
            slowest = max(slowest, self.monotonic() - polled)
            for event in page.items:
                state = event.state
                if state in mapping.SETTLED:
                    break
            cursor = page.next
            if state in mapping.SETTLED or page.has_more:
                continue
            remaining = deadline - self.monotonic() - slowest * (1 + ANSWER_READS)
            if remaining <= 0:
                break
            self.sleep(min(delay, remaining))
            delay = min(delay * 2, POLL_MAX)
        return self._get(principal, record.id)

    def _answer(self, principal: Principal, record: TaskView, history: int | None) -> Any:
        messages = self._messages(principal, record, None if history is None else max(history, 1))
        if mapping.answers_with_message(messages, record.state):
            answer = mapping.message(messages[-1], "", record.context)
            answer.ClearField("task_id")  # a Message-only answer: no task for the client to follow
            return answer
        return self._task(principal, record, messages, history)

    # ---- GetTask, ListTasks ----------------------------------------------------------------------------

    def get_task(self, principal: Principal, request: GetTaskRequest) -> Task:
        _require_id(request.id)
        history = _history_length(request.history_length if request.HasField("history_length") else None)
        record = self._get(principal, request.id)
        messages = self._messages(principal, record, history)
        return self._task(principal, record, messages, history)

    def _task(
        self,
        principal: Principal,
        record: TaskView,
        messages: list[MessageRead],
        history: int | None,
        *,
        with_artifacts: bool = True,
        room: int = mapping.ANSWER_BYTES,
        explain: bool = True,
    ) -> Task:
        """The task as an answer of at most `room` bytes (mapping.weight): its status and artifact,
        then as many of the latest messages as fit (the rest left out, marked). An artifact with no
        room beside the task is served by its presigned URL instead, marked. `explain`: a failed
        task's status carries the worker's reason (one more read: its last event), as its stream
        and its notifications do; a ListTasks page does not read it."""
        artifacts = self._artifacts(principal, record) if with_artifacts else []
        failure = self._failure(principal, record) if explain and record.state == "failed" else None
        if artifacts:
            bare = mapping.task(record, messages, [], history_length=0)
            if mapping.weight(bare) + sum(mapping.weight(a) for a in artifacts) > room:
                artifacts = self._artifacts(principal, record, inline=False)
                for one in artifacts:
                    one.metadata.update({mapping.TRUNCATED: "served by its URL: no room for it inline in this answer"})
        return mapping.task(
            record,
            messages,
            artifacts,
            history_length=history,
            with_artifacts=with_artifacts,
            room=room,
            failure=failure,
        )

    def _failure(self, principal: Principal, record: TaskView) -> Event | None:
        """A failed task's task_failed event: its last (nothing follows a terminal state)."""
        last = self.tasks.events(principal, record.id, record.event_count - 1, 1).items
        return last[0] if last and last[0].type == "task_failed" else None

    def list_tasks(self, principal: Principal, request: ListTasksRequest) -> ListTasksResponse:
        size = request.page_size if request.HasField("page_size") else DEFAULT_PAGE_SIZE
        if not 1 <= size <= MAX_PAGE_SIZE:
            raise error("INVALID_PARAMS", f"pageSize must be between 1 and {MAX_PAGE_SIZE}", pageSize=size)
        history = _history_length(request.history_length if request.HasField("history_length") else 0)
        state = ""
        if request.status:
            state = mapping.DOVECOTE_STATES.get(request.status, "")
            if not state:  # TASK_STATE_AUTH_REQUIRED: no Dovecote task is ever in it
                return ListTasksResponse(page_size=size)
        since = ""
        if request.HasField("status_timestamp_after"):
            since = request.status_timestamp_after.ToJsonString()
        try:
            listed = TaskFilter(request.context_id, state, since)
            page = self.tasks.list_tasks(principal, listed, size, request.page_token or None)
        except DomainError as exc:
            raise from_domain(exc) from None
        with_artifacts = request.include_artifacts
        out = ListTasksResponse(next_page_token=page.cursor or "", page_size=size, total_size=page.total_size)
        # The page stops before the answer would pass ANSWER_BYTES (as /v1's pages stop at 4 MiB):
        # its first task always, shaped to fit; any later one only whole, else the page is cut
        # before it and nextPageToken continues there.
        room = mapping.ANSWER_BYTES - mapping.weight(out) - LIST_ENVELOPE
        for i, record in enumerate(page.items):
            messages = self._messages(principal, record, history) if history != 0 else []
            task = self._task(
                principal,
                record,
                messages,
                history,
                with_artifacts=with_artifacts,
                room=room if i == 0 else mapping.ANSWER_BYTES,
                explain=False,
            )
            used = mapping.weight(task) + 1  # and its comma
            if i > 0 and used > room:
                last = page.items[i - 1]
                out.next_page_token = self.tasks.list_tasks_after(principal, listed, last)
                break
            out.tasks.append(task)
            room -= used
        return out

    # ---- CancelTask ------------------------------------------------------------------------------------

    def cancel_task(self, principal: Principal, request: CancelTaskRequest) -> Task:
        """No Idempotency-Key needed: a cancel repeated finds the task canceled and answers it."""
        _require_id(request.id)
        for _attempt in range(CANCEL_ATTEMPTS):
            record = self._get(principal, request.id)
            if record.state == "canceled":
                break  # canceled already (by this request's first try, or another): idempotent
            if not self.tasks.allows(Cancel, record.state):
                raise error(
                    "TASK_NOT_CANCELABLE",
                    f"the task is {record.state}: only a task that has not ended can be canceled",
                    taskId=request.id,
                    state=mapping.TaskState.Name(mapping.STATES[record.state]),
                )
            command = Cancel(request.id, "a2a-" + uuid.uuid4().hex, record.revision)
            try:
                authorize(principal, Cancel)
                self.tasks.cancel(principal, command)
                break
            except RevisionConflict:
                continue  # the task moved between the read and the cancel: read it again
            except DomainError as exc:
                if exc.code in ("terminal_task", "invalid_transition"):
                    continue  # it ended meanwhile: the next read says how
                raise from_domain(exc, taskId=request.id) from None
        else:
            raise error("INTERNAL", "the task kept changing; cancel again", taskId=request.id)
        return self.get_task(principal, GetTaskRequest(id=request.id))

    # ---- reads ----------------------------------------------------------------------------------------

    def _get(self, principal: Principal, task_id: str) -> TaskView:
        try:
            return self.tasks.get(principal, task_id).task
        except (NotFound, InvalidArgument):
            # An id that is not a Dovecote id names no task either; another authority's is not found.
            raise error("TASK_NOT_FOUND", "task not found", taskId=task_id[:128]) from None
        except DomainError as exc:
            raise from_domain(exc, taskId=task_id[:128]) from None

    def _messages(self, principal: Principal, record: TaskView, history: int | None) -> list[MessageRead]:
        """The task's last `history` messages (DEFAULT_HISTORY when None), oldest first; at least the
        last one, whose author may make it the status's message (historyLength trims the history only)."""
        wanted = max(1, DEFAULT_HISTORY if history is None else history)
        count = record.message_count
        after = max(0, count - wanted)
        found: list[MessageRead] = []
        try:
            while after < count:
                page = self.tasks.messages(principal, record.id, after, None)
                found.extend(page.items)
                if not page.has_more or not page.items:
                    break
                after = page.next
        except DomainError as exc:
            raise from_domain(exc, taskId=record.id) from None
        return found

    def _artifacts(self, principal: Principal, record: TaskView, *, inline: bool = True) -> list[Artifact]:
        """The published artifact (a completed task's), as A2A sees artifacts: a frozen one is not
        the task's output until the task completes. Not `inline`: its payload by presigned URL."""
        if record.state != "completed" or not record.artifact:
            return []
        try:
            found = self.tasks.get_artifact(principal, record.workspace, record.artifact, inline=inline)
        except DomainError as exc:
            raise from_domain(exc, taskId=record.id) from None
        return [mapping.artifact(found)]


class _Ids:
    """The ids one request's commands use: fresh ones, or (with an Idempotency-Key) ones derived from
    the key, so that a retry is the same command and replays."""

    def __init__(self, key: str) -> None:
        self.keyed = bool(key)
        seed = (
            hashlib.sha256(b"a2a\x00" + key.encode("utf-8")).hexdigest() if key else uuid.uuid4().hex + uuid.uuid4().hex
        )
        try:
            self.command = check_id(key, "Idempotency-Key") if key else "a2a-" + seed[:32]
        except InvalidArgument:
            self.command = "a2a-" + seed[:40]
        self.task = str(uuid.UUID(seed[:32]))
        self.context = str(uuid.UUID(seed[32:64]))
        self.message = "a2a-m-" + seed[:32]


def _require_id(task_id: str) -> None:
    if not task_id:
        raise error("INVALID_PARAMS", "id is required: the task's id")


def _history_length(value: int | None) -> int | None:
    if value is not None and value < 0:
        raise error("INVALID_PARAMS", "historyLength must be 0 or more", historyLength=value)
    return value


__all__ = ["A2AError", "A2AService"]
