"""The state machine of docs/design/tasks.md#the-state-machine, as data, and the one transition function. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

State = Literal["submitted", "working", "input_required", "completed", "canceled", "rejected", "failed"]
STATES: tuple[State, ...] = ("submitted", "working", "input_required", "completed", "canceled", "rejected", "failed")
TERMINAL: frozenset[str] = frozenset({"completed", "canceled", "rejected", "failed"})
Actor = Literal["caller", "worker"]


@dataclass(frozen=True, slots=True)
class Transition:
    by: Actor
    allowed_from: frozenset[str]  # empty for create
    to: State
    event: str
    message: Literal["caller", "agent"] | None  # whose message the command carries, if any


TRANSITIONS: dict[str, Transition] = {
    "create_task": Transition("caller", frozenset(), "submitted", "task_submitted", "caller"),
    "accept_task": Transition("worker", frozenset({"submitted"}), "working", "task_accepted", None),
    "reject_task": Transition("worker", frozenset({"submitted"}), "rejected", "task_rejected", None),
    "request_input": Transition("worker", frozenset({"working"}), "input_required", "input_required", "agent"),
    "reply_task": Transition("caller", frozenset({"input_required"}), "working", "caller_replied", "caller"),
    "cancel_task": Transition(
        "caller", frozenset({"submitted", "working", "input_required"}), "canceled", "task_canceled", None
    ),
    "fail_task": Transition("worker", frozenset({"working", "input_required"}), "failed", "task_failed", None),
    "complete_task": Transition("worker", frozenset({"working"}), "completed", "task_completed", "agent"),
    # Freezing an artifact keeps the task working; it still counts as a transition (revision + 1).
    "freeze_artifact": Transition("worker", frozenset({"working"}), "working", "artifact_frozen", None),
}
WORKER_COMMANDS = frozenset(k for k, t in TRANSITIONS.items() if t.by == "worker")
CALLER_COMMANDS = frozenset(k for k, t in TRANSITIONS.items() if t.by == "caller")


def next_state(kind: str, state: str) -> State | None:
    """The state `kind` moves a task in `state` to, or None when the transition is not allowed."""
    transition = TRANSITIONS[kind]
    return transition.to if state in transition.allowed_from else None


def is_terminal(state: str) -> bool:
    return state in TERMINAL
