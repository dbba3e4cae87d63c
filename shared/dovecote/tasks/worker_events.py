"""Worker events: the transport-neutral commit boundary (docs/design/tasks.md#worker-events). One delivery
settles into a receipt stored under (authority, worker, delivery id): ACK when its command committed
(or is an exact replay), NACK with a stable code for a deterministic rejection. An ACK is stored with
its command, in the same transaction; a NACK alone. An exact retry answers the same receipt and a
reused delivery id is refused. An infrastructure failure settles nothing (it raises: 503, retry the
exact delivery)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

from dovecote.platform.errors import DomainError
from dovecote.platform.principal import Principal
from dovecote.tasks.command_loop import AlreadySettled, CommandLoop
from dovecote.tasks.commands import NACK_CODES, WorkerEvent
from dovecote.tasks.lifecycle import Lifecycle
from dovecote.tasks.ports import Delivery, DeliveryTaken

CONFLICT = "this delivery id was settled for a different event"


class Settlement(NamedTuple):
    """How a delivery settled: ack, or nack with a stable code and why. Its JSON is the delivery's
    stored receipt, which an exact retry answers again."""

    delivery_id: str
    event_id: str
    decision: str  # ack | nack
    code: str | None = None
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"delivery_id": self.delivery_id, "event_id": self.event_id, "decision": self.decision}
        if self.code:
            out.update(code=self.code, message=self.message or "")
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Settlement:
        return cls(data["delivery_id"], data["event_id"], data["decision"], data.get("code"), data.get("message"))


class WorkerEvents:
    def __init__(self, work: CommandLoop, lifecycle: Lifecycle) -> None:
        self.work = work
        self.lifecycle = lifecycle

    def worker_event(self, principal: Principal, event: WorkerEvent) -> Settlement:
        """Settle one delivery: its command committed with the ACK, or its refusal stored as a NACK."""
        return Settlement.from_json(self._settle(principal, event))

    def _settle(self, principal: Principal, event: WorkerEvent) -> dict[str, Any]:
        worker = principal.worker

        def settlement(decision: str, code: str = "", message: str = "") -> dict[str, Any]:
            return Settlement(event.delivery_id, event.event_id, decision, code or None, message).to_json()

        ack = settlement("ack")
        delivery = Delivery(principal.authority, worker, event.delivery_id, event.digest, ack)
        try:
            if event.refusal is not None:
                raise event.refusal
            assert event.command is not None  # the gate gives one or the other
            outcome = self.lifecycle.transition(principal, event.command, delivery=delivery)
        except AlreadySettled as settled:
            if settled.delivery.digest == event.digest:
                return settled.delivery.receipt  # an exact retry: the same receipt
            return settlement("nack", "command_conflict", CONFLICT)
        except DomainError as exc:
            code = NACK_CODES.get(exc.code)
            if code is None:
                raise  # not a deterministic rejection (an AWS failure): nothing settles
            nack = settlement("nack", code, exc.message)
            return self._settle_alone(replace(delivery, receipt=nack))
        if outcome.replayed:
            # The command committed earlier outside this delivery (or its settlement was lost):
            # the replay is an ACK, stored now.
            return self._settle_alone(delivery)
        return ack

    def _settle_alone(self, delivery: Delivery) -> dict[str, Any]:
        store = self.work.store
        try:
            store.settle(delivery)
        except DeliveryTaken:
            stored = store.read(delivery.authority, None, None, delivery=(delivery.worker, delivery.id)).delivery
            if stored is not None and stored.digest == delivery.digest:
                return stored.receipt
            return {**delivery.receipt, "decision": "nack", "code": "command_conflict", "message": CONFLICT}
        return delivery.receipt
