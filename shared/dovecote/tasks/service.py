"""The task service: a thin facade over the task capabilities, each in its own module.

- commands.py      the commands as frozen dataclasses, and the one gate per command (`gate`)
- command_loop.py  the shared machinery: load, replay, decide, commit (and the fail-closed load)
- lifecycle.py     create and every transition of the state machine
- leases.py        acquire, claim, heartbeat, fence (release), the dispatcher's expiries, lease reads
- artifacts.py     freeze decisions, upload URLs, apply receipts, artifact and head reads
- worker_events.py one delivery settled as ACK or NACK, in the command's commit
- reads.py         task reads, streams and lists, sealed cursors

A request is gated first (`service.gate.accept(principal, task_id, body)`), then run
(`service.accept(principal, command)`). Pure apart from the TaskStore port.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import cached_property
from typing import TYPE_CHECKING, Any

from dovecote.platform.clock import Clock, utc_now
from dovecote.platform.cursors import CursorSigner, LazySigner
from dovecote.tasks import machine
from dovecote.tasks.command_loop import CommandLoop, OnCorrupt, Outcome
from dovecote.tasks.limits import (
    ARTIFACT_DEFAULT_MAX,
    ARTIFACT_HARD_MAX,
    DEFAULT_ACCEPT_TIMEOUT,
    DEFAULT_LEASE_TIMEOUT,
    DEFAULT_STREAM_SECONDS,
    MAX_CLAIM_WAIT,
    WORKER_EVENT_KINDS,
)
from dovecote.tasks.ports import TaskFilter, TaskStore
from dovecote.tasks.reads import Generation, ListPage, MessageRead, Pages, Reads, StreamPage, TaskRead

if TYPE_CHECKING:
    from dovecote.platform.principal import Principal
    from dovecote.tasks.artifacts import ArtifactRead, Artifacts, Frozen, UploadGrant
    from dovecote.tasks.commands import (
        Accept,
        Acquire,
        Cancel,
        Claim,
        CommandGate,
        Complete,
        CreateArtifactUpload,
        CreateTask,
        Fail,
        Fence,
        Freeze,
        Heartbeat,
        RecordReceipt,
        Reject,
        Reply,
        RequestInput,
        TaskCommand,
        WorkerEvent,
    )
    from dovecote.tasks.leases import Assignment, Leases
    from dovecote.tasks.lifecycle import Lifecycle
    from dovecote.tasks.model import ApplyReceipt, Event, Receipt, Task, TaskView, WorkspaceHead
    from dovecote.tasks.streams import StreamItem, Streams
    from dovecote.tasks.worker_events import Settlement, WorkerEvents

__all__ = ["MAX_CLAIM_WAIT", "WORKER_EVENT_KINDS", "Outcome", "TaskService"]

# The capabilities, built on first use (and all at once by `prime`).
CAPABILITIES = ("gate", "lifecycle", "leases", "artifacts", "worker_events")


class TaskService:
    """One typed method per command and read, each delegating to the capability that serves it.
    The capabilities are built on first use, each importing its module then: a cold start whose
    first request is a read loads neither the commands' dataclasses nor the lifecycle, leases,
    artifacts and worker-event modules (bench/coldstart.py)."""

    def __init__(
        self,
        store: TaskStore,
        signer: CursorSigner | None = None,
        *,
        clock: Clock = utc_now,
        signer_factory: Callable[[], CursorSigner] | None = None,
        default_lease_timeout: int = DEFAULT_LEASE_TIMEOUT,
        default_accept_timeout: int = DEFAULT_ACCEPT_TIMEOUT,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        presign_seconds: int = 900,
        on_corrupt: OnCorrupt | None = None,
        artifact_max_bytes: int = ARTIFACT_DEFAULT_MAX,
        stream_seconds: float = DEFAULT_STREAM_SECONDS,
    ) -> None:
        if not 0 < artifact_max_bytes <= ARTIFACT_HARD_MAX:
            raise ValueError(f"artifact_max_bytes must be between 1 and {ARTIFACT_HARD_MAX}")
        self.store = store
        self.work = CommandLoop(store, clock=clock, on_corrupt=on_corrupt)
        self.pages = Pages(LazySigner(signer, signer_factory))
        self.reads = Reads(self.work, self.pages, presign_seconds=presign_seconds)
        self._artifact_max = artifact_max_bytes
        self._timeouts = {
            "default_lease_timeout": default_lease_timeout,
            "default_accept_timeout": default_accept_timeout,
        }
        self._sleep, self._monotonic, self._presign_seconds = sleep, monotonic, presign_seconds
        self._stream_seconds = stream_seconds

    @cached_property
    def gate(self) -> CommandGate:
        from dovecote.tasks.commands import CommandGate

        return CommandGate(artifact_max=self._artifact_max, stage_upload=self.store.stage_artifact_upload)

    @cached_property
    def lifecycle(self) -> Lifecycle:
        from dovecote.tasks.lifecycle import Lifecycle

        return Lifecycle(self.work, **self._timeouts)

    @cached_property
    def leases(self) -> Leases:
        from dovecote.tasks.leases import Leases

        return Leases(self.work, self.pages, sleep=self._sleep, monotonic=self._monotonic)

    @cached_property
    def artifacts(self) -> Artifacts:
        from dovecote.tasks.artifacts import Artifacts

        return Artifacts(self.work, presign_seconds=self._presign_seconds)

    @cached_property
    def streams(self) -> Streams:
        from dovecote.tasks.streams import Streams

        return Streams(self.work, max_seconds=self._stream_seconds, sleep=self._sleep, monotonic=self._monotonic)

    @cached_property
    def worker_events(self) -> WorkerEvents:
        from dovecote.tasks.worker_events import WorkerEvents

        return WorkerEvents(self.work, self.lifecycle)

    def prime(self) -> None:
        """Every capability built now (before a SnapStart snapshot: platform/http.prime), so the
        snapshot holds their modules rather than the first command after each restore loading them."""
        for capability in CAPABILITIES:
            getattr(self, capability)

    # ---- the state machine, for adapters that speak another protocol (A2A) ---------------------

    def allows(self, command: type[TaskCommand], state: str) -> bool:
        """Whether `command` is allowed from `state` (tasks/machine.py): an adapter asks here rather
        than restating the rule (A2A answers a reply outside input_required with its own error)."""
        return machine.next_state(command.KIND, state) is not None

    # ---- commands: one typed method each, delegating to its capability ------------------------------
    # Every transition (freeze included) runs through the lifecycle's `transition`: the command's
    # type says which. A freeze answers {task, artifact}.

    def create(self, principal: Principal, command: CreateTask) -> Outcome[TaskView]:
        return self.lifecycle.create(principal, command)

    def reply(self, principal: Principal, command: Reply) -> Outcome[TaskView]:
        return self.lifecycle.move(principal, command)

    def cancel(self, principal: Principal, command: Cancel) -> Outcome[TaskView]:
        return self.lifecycle.move(principal, command)

    def accept(self, principal: Principal, command: Accept) -> Outcome[TaskView]:
        return self.lifecycle.move(principal, command)

    def reject(self, principal: Principal, command: Reject) -> Outcome[TaskView]:
        return self.lifecycle.move(principal, command)

    def fail(self, principal: Principal, command: Fail) -> Outcome[TaskView]:
        return self.lifecycle.move(principal, command)

    def request_input(self, principal: Principal, command: RequestInput) -> Outcome[TaskView]:
        return self.lifecycle.move(principal, command)

    def complete(self, principal: Principal, command: Complete) -> Outcome[TaskView]:
        return self.lifecycle.move(principal, command)

    def freeze(self, principal: Principal, command: Freeze) -> Outcome[Frozen]:
        return self.lifecycle.freeze(principal, command)

    def acquire(self, principal: Principal, command: Acquire) -> Outcome[Assignment]:
        return self.leases.acquire(principal, command)

    def claim(self, principal: Principal, command: Claim) -> Outcome[Assignment]:
        return self.leases.claim(principal, command)

    def fence(
        self, principal: Principal, command: Fence, *, if_silent_since: str | None = None, if_unaccepted: bool = False
    ) -> Outcome[None]:
        """The dispatcher's fences are conditional (`if_silent_since`, `if_unaccepted`: Leases.fence)."""
        return self.leases.fence(principal, command, if_silent_since=if_silent_since, if_unaccepted=if_unaccepted)

    def heartbeat(self, principal: Principal, command: Heartbeat) -> Assignment:
        return self.leases.heartbeat(principal, command)

    def create_artifact_upload(self, principal: Principal, command: CreateArtifactUpload) -> UploadGrant:
        return self.artifacts.create_artifact_upload(principal, command)

    def record_apply_receipt(self, principal: Principal, command: RecordReceipt) -> Outcome[ApplyReceipt]:
        return self.artifacts.record_apply_receipt(principal, command)

    def worker_event(self, principal: Principal, event: WorkerEvent) -> Settlement:
        return self.worker_events.worker_event(principal, event)

    # ---- the dispatcher's passes ------------------------------------------------------------------

    def expire_silent_leases(self, shard: int, *, limit: int, command_id: Callable[[Task], str]) -> dict[str, int]:
        return self.leases.expire_silent_leases(shard, limit=limit, command_id=command_id)

    def reshard_claimable(self, *, time_left_ms: Callable[[], int] = lambda: 10**9) -> dict[str, Any]:
        return self.leases.reshard_claimable(time_left_ms=time_left_ms)

    # ---- reads ------------------------------------------------------------------------------------

    def get(self, principal: Principal, task_id: str) -> TaskRead:
        return self.reads.get(principal, task_id)

    def snapshot(self, principal: Principal, task_id: str) -> TaskRead:
        """The task and its event count from one read (`event_cursor`): read the events after it."""
        return self.reads.get(principal, task_id)

    def messages(
        self, principal: Principal, task_id: str, after: int | None, limit: int | None
    ) -> StreamPage[MessageRead]:
        return self.reads.messages(principal, task_id, after, limit)

    def message(self, principal: Principal, task_id: str, message_id: str) -> MessageRead:
        return self.reads.message(principal, task_id, message_id)

    def events(self, principal: Principal, task_id: str, after: int | None, limit: int | None) -> StreamPage[Event]:
        return self.reads.events(principal, task_id, after, limit)

    def grants(
        self, principal: Principal, task_id: str, after: int | None, limit: int | None
    ) -> StreamPage[Generation]:
        return self.reads.grants(principal, task_id, after, limit)

    def follow(self, principal: Principal, task_id: str, after: int | None) -> Iterator[StreamItem]:
        """The task's stream after sequence `after` (dovecote/tasks/streams.py). Its checks (role,
        task, `after`) raise here, before the first item."""
        return self.streams.follow(principal, task_id, after)

    def list_context(
        self, principal: Principal, context: str, limit: int | None, cursor: str | None
    ) -> ListPage[TaskView]:
        return self.reads.list_context(principal, context, limit, cursor)

    def list_tasks(
        self, principal: Principal, task_filter: TaskFilter, limit: int | None, cursor: str | None
    ) -> ListPage[TaskView]:
        return self.reads.list_tasks(principal, task_filter, limit, cursor)

    def list_tasks_after(self, principal: Principal, task_filter: TaskFilter, task: TaskView) -> str:
        return self.reads.list_tasks_after(principal, task_filter, task)

    def command_receipt(self, principal: Principal, command_id: str) -> Receipt | None:
        return self.reads.command_receipt(principal, command_id)

    def get_lease(self, principal: Principal, task_id: str) -> Assignment:
        return self.leases.get_lease(principal, task_id)

    def list_leases(self, principal: Principal, limit: int | None, cursor: str | None) -> ListPage[Assignment]:
        return self.leases.list_leases(principal, limit, cursor)

    def get_artifact(
        self, principal: Principal, workspace: str, artifact_id: str, *, inline: bool = True
    ) -> ArtifactRead:
        return self.artifacts.get_artifact(principal, workspace, artifact_id, inline=inline)

    def get_apply_receipt(self, principal: Principal, workspace: str, artifact_id: str) -> ApplyReceipt:
        return self.artifacts.get_apply_receipt(principal, workspace, artifact_id)

    def get_head(self, principal: Principal, workspace: str) -> WorkspaceHead:
        return self.artifacts.get_head(principal, workspace)

    @property
    def signer(self) -> CursorSigner:
        return self.pages.signer
