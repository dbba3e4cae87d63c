"""The task facts a config is checked against (push/ports.Tasks), two ways:

- `TaskServiceFacts`: through the task service's own read (the A2A function has the service built);
- `StoreFacts`: one read of the task item through the TaskStore port, for the push API, whose cold
  start then loads no command, gate or lifecycle module. The authority rule is the store's key: a
  task is read under the caller's authority only, so another authority's is not found (NotFound).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dovecote.platform.errors import NotFound
from dovecote.platform.ids import check_id
from dovecote.platform.principal import Principal
from dovecote.push.ports import TaskFacts
from dovecote.tasks import machine

if TYPE_CHECKING:
    from dovecote.tasks.ports import TaskStore
    from dovecote.tasks.service import TaskService


class TaskServiceFacts:
    def __init__(self, tasks: TaskService) -> None:
        self._tasks = tasks

    def facts(self, principal: Principal, task: str) -> TaskFacts:
        found = self._tasks.get(principal, task).task
        return TaskFacts(found.state, found.event_count, machine.is_terminal(found.state))


class StoreFacts:
    def __init__(self, store: TaskStore) -> None:
        self._store = store

    def facts(self, principal: Principal, task: str) -> TaskFacts:
        principal.require("caller", "worker")
        check_id(task, "task_id")
        found = self._store.read(principal.authority, None, task).task
        if found is None:
            raise NotFound("task not found", task_id=task)
        return TaskFacts(found.state, found.event_count, machine.is_terminal(found.state))
