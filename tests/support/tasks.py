"""A driver for task flows, shared by the unit, conformance and race tests."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from dovecote.platform.principal import Principal
from dovecote.tasks.service import Outcome, TaskService

CALLER = Principal("acme", "caller")
WORKER = Principal("acme", "worker", "w1")
OTHER_WORKER = Principal("acme", "worker", "w2")
_ids = itertools.count(1)


def uid(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


def message(text: str = "hello", message_id: str | None = None) -> dict[str, Any]:
    return {"id": message_id or uid("m"), "parts": [{"media_type": "text/plain", "text": text}]}


@dataclass
class Flow:
    """One task driven through the service, tracking revision and fence like a real client."""

    service: TaskService
    task_id: str = field(default_factory=lambda: uid("t"))
    revision: int = 0
    fence: int = 0
    worker: Principal = WORKER
    context: str = "ctx"
    workspace: str = "ws"

    def create(self, **extra: Any) -> Outcome:
        out = self.service.create(
            CALLER,
            {
                "command_id": uid("c"),
                "workspace": self.workspace,
                "id": self.task_id,
                "context": self.context,
                "message": message("do it"),
                **extra,
            },
        )
        self.revision = out.body["revision"]
        return out

    def acquire(self) -> Outcome:
        out = self.service.acquire(self.worker, self.task_id, {"command_id": uid("c")})
        self.fence = out.body["assignment"]["fence"]
        return out

    def worker_cmd(self, kind: str, **extra: Any) -> Outcome:
        body = {"command_id": uid("c"), "expected_revision": self.revision, "fence": max(self.fence, 1), **extra}
        if kind in ("request_input", "complete") and "message" not in body:
            body["message"] = message("from the agent")
        if kind == "complete" and "submission_id" not in body:
            body["submission_id"] = uid("s")
        out = getattr(self.service, kind)(self.worker, self.task_id, body)
        self.revision = out.body["revision"]
        return out

    def caller_cmd(self, kind: str, **extra: Any) -> Outcome:
        body = {"command_id": uid("c"), "expected_revision": self.revision, **extra}
        if kind == "reply" and "message" not in body:
            body["message"] = message("from the caller")
        out = getattr(self.service, kind)(CALLER, self.task_id, body)
        self.revision = out.body["revision"]
        return out

    def to_state(self, state: str) -> Flow:
        """Drive a new task to `state` the shortest way."""
        self.create()
        if state == "submitted":
            return self
        if state == "canceled":
            self.caller_cmd("cancel")
            return self
        self.acquire()
        if state == "rejected":
            self.worker_cmd("reject")
            return self
        self.worker_cmd("accept")
        if state == "working":
            return self
        if state == "completed":
            self.worker_cmd("complete")
            return self
        if state == "failed":
            self.worker_cmd("fail")
            return self
        self.worker_cmd("request_input")
        assert state == "input_required"
        return self
