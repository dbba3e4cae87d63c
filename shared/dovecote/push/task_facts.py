"""The task facts a config is checked against (push/ports.Tasks), read through the task service:
the caller's authority and role rules are the task service's own (another authority's task is
NotFound there)."""

from __future__ import annotations

from dovecote.platform.principal import Principal
from dovecote.push.ports import TaskFacts
from dovecote.tasks import machine
from dovecote.tasks.service import TaskService


class TaskServiceFacts:
    def __init__(self, tasks: TaskService) -> None:
        self._tasks = tasks

    def facts(self, principal: Principal, task: str) -> TaskFacts:
        found = self._tasks.get(principal, task)["task"]
        state = str(found["state"])
        return TaskFacts(state, int(found["event_count"]), machine.is_terminal(state))
