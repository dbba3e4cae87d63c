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
from functools import cached_property
from typing import TYPE_CHECKING, Any

from dovecote.platform.clock import Clock, utc_now
from dovecote.platform.cursors import CursorSigner, LazySigner
from dovecote.tasks.limits import MAX_CLAIM_WAIT, WORKER_EVENT_KINDS
from dovecote.tasks.model import ARTIFACT_DEFAULT_MAX, ARTIFACT_HARD_MAX
from dovecote.tasks.ports import TaskStore
from dovecote.tasks.reads import Pages, Reads
from dovecote.tasks.unit_of_work import OnCorrupt, Outcome, UnitOfWork

if TYPE_CHECKING:
    from dovecote.tasks.artifacts import Artifacts
    from dovecote.tasks.commands import CommandGate
    from dovecote.tasks.leases import Leases
    from dovecote.tasks.lifecycle import Lifecycle
    from dovecote.tasks.worker_events import WorkerEvents

__all__ = ["MAX_CLAIM_WAIT", "WORKER_EVENT_KINDS", "Outcome", "TaskService"]

DEFAULT_LEASE_TIMEOUT = 300
DEFAULT_ACCEPT_TIMEOUT = 30

# The commands and reads by the names the gates and the routes use → the capability that serves each.
# Every transition, freeze_artifact included, runs through the lifecycle's `transition` (the command's
# type says which). A freeze (worker, working, at most once per task) commits the artifact, its result
# revision and the workspace head claim in the task's one transaction, and answers {task, artifact}.
TRANSITIONS = ("reply", "cancel", "accept", "reject", "fail", "request_input", "complete", "freeze")
SERVED_BY: dict[str, str] = {
    "create": "lifecycle",
    **{name: "lifecycle" for name in TRANSITIONS},
    **dict.fromkeys(
        (
            "acquire",
            "claim",
            "fence",
            "heartbeat",
            "expire_silent_leases",
            "reshard_claimable",
            "get_lease",
            "list_leases",
        ),
        "leases",
    ),
    **dict.fromkeys(
        ("create_artifact_upload", "record_apply_receipt", "get_apply_receipt", "get_artifact", "get_head"),
        "artifacts",
    ),
    "worker_event": "worker_events",
    **dict.fromkeys(
        (
            "get",
            "snapshot",
            "messages",
            "message",
            "events",
            "grants",
            "list_context",
            "list_tasks",
            "list_tasks_after",
            "command_receipt",
        ),
        "reads",
    ),
}


class TaskService:
    """The capabilities are built on first use, each importing its module then: a cold start whose
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
    ) -> None:
        if not 0 < artifact_max_bytes <= ARTIFACT_HARD_MAX:
            raise ValueError(f"artifact_max_bytes must be between 1 and {ARTIFACT_HARD_MAX}")
        self.store = store
        self.work = UnitOfWork(store, clock=clock, on_corrupt=on_corrupt)
        self.pages = Pages(LazySigner(signer, signer_factory))
        self.reads = Reads(self.work, self.pages, presign_seconds=presign_seconds)
        self._artifact_max = artifact_max_bytes
        self._timeouts = {
            "default_lease_timeout": default_lease_timeout,
            "default_accept_timeout": default_accept_timeout,
        }
        self._sleep, self._monotonic, self._presign_seconds = sleep, monotonic, presign_seconds

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

        return Leases(self.work, self.pages, self.gate, sleep=self._sleep, monotonic=self._monotonic)

    @cached_property
    def artifacts(self) -> Artifacts:
        from dovecote.tasks.artifacts import Artifacts

        return Artifacts(self.work, presign_seconds=self._presign_seconds)

    @cached_property
    def worker_events(self) -> WorkerEvents:
        from dovecote.tasks.worker_events import WorkerEvents

        return WorkerEvents(self.work, self.lifecycle)

    def __getattr__(self, name: str) -> Any:
        """A command or read by its route's name (SERVED_BY), bound once: `service.create` is
        `service.lifecycle.create`, `service.reply` is `service.lifecycle.transition`."""
        capability = SERVED_BY.get(name)
        if capability is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        method = getattr(getattr(self, capability), "transition" if name in TRANSITIONS else name)
        setattr(self, name, method)
        return method

    def prime(self) -> None:
        """Every capability built now (before a SnapStart snapshot: platform/http.prime), so the
        snapshot holds their modules rather than the first command after each restore loading them."""
        for capability in ("gate", *SERVED_BY.values()):
            getattr(self, capability)

    @property
    def signer(self) -> CursorSigner:
        return self.pages.signer
