"""The task service: a thin facade over the task capabilities, each in its own module.

- commands.py      the commands as frozen dataclasses, and the one gate per command (`gate`)
- unit_of_work.py  the shared machinery: load, replay, decide, commit (and the fail-closed load)
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
from collections.abc import Callable

from dovecote.platform.clock import Clock, utc_now
from dovecote.platform.cursors import CursorSigner, LazySigner
from dovecote.tasks.artifacts import Artifacts
from dovecote.tasks.commands import MAX_CLAIM_WAIT, WORKER_EVENT_KINDS, CommandGate
from dovecote.tasks.leases import Leases
from dovecote.tasks.lifecycle import Lifecycle
from dovecote.tasks.model import ARTIFACT_DEFAULT_MAX, ARTIFACT_HARD_MAX
from dovecote.tasks.ports import TaskStore
from dovecote.tasks.reads import Pages, Reads
from dovecote.tasks.unit_of_work import OnCorrupt, Outcome, UnitOfWork
from dovecote.tasks.worker_events import WorkerEvents

__all__ = ["MAX_CLAIM_WAIT", "WORKER_EVENT_KINDS", "Outcome", "TaskService"]

DEFAULT_LEASE_TIMEOUT = 300
DEFAULT_ACCEPT_TIMEOUT = 30


class TaskService:
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
    ) -> None:
        if not 0 < artifact_max_bytes <= ARTIFACT_HARD_MAX:
            raise ValueError(f"artifact_max_bytes must be between 1 and {ARTIFACT_HARD_MAX}")
        self.store = store
        self.work = UnitOfWork(store, clock=clock, on_corrupt=on_corrupt)
        self.gate = CommandGate(artifact_max=artifact_max_bytes, stage_upload=store.stage_artifact_upload)
        self.pages = Pages(LazySigner(signer, signer_factory))
        self.lifecycle = Lifecycle(
            self.work, default_lease_timeout=default_lease_timeout, default_accept_timeout=default_accept_timeout
        )
        self.leases = Leases(self.work, self.pages, self.gate, sleep=sleep, monotonic=monotonic)
        self.artifacts = Artifacts(self.work, presign_seconds=presign_seconds)
        self.worker_events = WorkerEvents(self.work, self.lifecycle)
        self.reads = Reads(self.work, self.pages, presign_seconds=presign_seconds)
        # The commands and reads by the names the gates and the routes use.
        self.create = self.lifecycle.create
        self.acquire = self.leases.acquire
        self.claim = self.leases.claim
        self.fence = self.leases.fence
        self.heartbeat = self.leases.heartbeat
        self.expire_silent_leases = self.leases.expire_silent_leases
        self.get_lease = self.leases.get_lease
        self.list_leases = self.leases.list_leases
        self.create_artifact_upload = self.artifacts.create_artifact_upload
        self.record_apply_receipt = self.artifacts.record_apply_receipt
        self.get_apply_receipt = self.artifacts.get_apply_receipt
        self.get_artifact = self.artifacts.get_artifact
        self.get_head = self.artifacts.get_head
        self.worker_event = self.worker_events.worker_event
        self.get = self.reads.get
        self.snapshot = self.reads.snapshot
        self.messages = self.reads.messages
        self.message = self.reads.message
        self.events = self.reads.events
        self.list_context = self.reads.list_context
        self.list_tasks = self.reads.list_tasks
        # Every transition, freeze_artifact included, by the name its gate and route use: the lifecycle
        # runs them all the same way (the command's type says which). A freeze (worker, working, at most
        # once per task) commits the artifact, its result revision and the workspace head claim in the
        # task's one transaction, and answers {task, artifact}.
        transition = self.lifecycle.transition
        self.reply = self.cancel = self.accept = self.reject = self.fail = transition
        self.request_input = self.complete = self.freeze = transition

    @property
    def signer(self) -> CursorSigner:
        return self.pages.signer
