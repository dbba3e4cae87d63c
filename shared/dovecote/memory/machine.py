"""The memory write's states as data, and the one transition function. Pure.

    queued ──start──▶ started ──complete──▶ complete
      │                  │
      ├──cancel──▶ cancelled        (exactly one of start and cancel wins: one conditional flip)
      │                  │
      └──────fail────────┴──▶ failed ──requeue──▶ queued     (the worker gives up; a redrive retries)

`cancelled` carries a `consumed` flag (set when the worker sees the write) instead of a state of its
own, because docs/design/memory.md#submitting fixes the status values; the reference's Cancel answers differ on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["queued", "started", "cancelled", "complete", "failed"]
STATUSES: tuple[Status, ...] = ("queued", "started", "cancelled", "complete", "failed")
# No further work will happen unless an operator redrives a failed write.
SETTLED: frozenset[str] = frozenset({"cancelled", "complete", "failed"})
Actor = Literal["caller", "worker", "admin"]


@dataclass(frozen=True, slots=True)
class Transition:
    by: Actor
    allowed_from: frozenset[str]
    to: Status


TRANSITIONS: dict[str, Transition] = {
    "start": Transition("worker", frozenset({"queued"}), "started"),
    "cancel": Transition("caller", frozenset({"queued"}), "cancelled"),
    "complete": Transition("worker", frozenset({"started"}), "complete"),
    "fail": Transition("worker", frozenset({"queued", "started"}), "failed"),
    "requeue": Transition("admin", frozenset({"failed"}), "queued"),
}


def next_status(kind: str, status: str) -> Status | None:
    """The status `kind` moves a write in `status` to, or None when it is not allowed."""
    transition = TRANSITIONS[kind]
    return transition.to if status in transition.allowed_from else None


def allowed_from(kind: str) -> frozenset[str]:
    return TRANSITIONS[kind].allowed_from


def is_settled(status: str) -> bool:
    return status in SETTLED
