"""Webhook configs (create, get, list, delete) and the dead letters' redrive: the one home of their
rules, for Dovecote's own API (/v1/tasks/{id}/webhooks) and both A2A bindings. Pure apart from the
ports.

- Every call names a task of the caller's authority: another authority's task is NotFound, never
  forbidden (TaskNotFound on A2A). Callers (and admins) manage webhooks; a worker token may not.
- Create checks the URL now (push/addresses.py: SSRF, against the resolver) and stores the config
  with its cursor at the task's current event count: it is notified of what happens from now on.
  `pending`: the task is about to be created by the same request (A2A SendMessage with
  `taskPushNotificationConfig`), so the config is stored first, from the task's first event, and
  the commit that follows cannot outrun it.
- A config of a task that has already ended lives GRACE_SECONDS (nothing more will come).
- Delete is idempotent: deleting what is not there is not an error.
- Redrive (admin): the authority's dead letters back to the queue, each delivered again whatever
  the config's cursor says (a new deduplication id, the same webhook-id).

Round trips: create = the task read + the store's put (a Query and a PutItem); get = the task read
+ 1 GetItem; list = the task read + 1 Query; delete = the task read + 1 DeleteItem.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from dovecote.platform.clock import rfc3339, utc_now
from dovecote.platform.errors import InvalidArgument, NotFound
from dovecote.platform.ids import check_id
from dovecote.platform.principal import Principal
from dovecote.platform.redrive import redrive_size
from dovecote.push import addresses
from dovecote.push.model import GRACE_SECONDS, MAX_CONFIGS_PER_TASK, ConfigInput, Notice, PushConfig
from dovecote.push.ports import ConfigStore, NotificationQueue, Tasks


@dataclass(eq=False)
class PushService:
    store: ConfigStore
    tasks: Tasks
    _: KW_ONLY
    resolver: addresses.Resolver = field(default_factory=addresses.SystemResolver)
    # `dovecote dev --allow-loopback-webhooks` only: plain http to loopback receivers.
    allow_loopback: bool = False
    queue: NotificationQueue | None = None
    now: Callable[[], float] = time.time

    def create(self, principal: Principal, task_id: str, given: ConfigInput, *, pending: bool = False) -> PushConfig:
        principal.require("caller")
        check_id(task_id, "task_id")
        addresses.check(given.url, self.resolver, allow_loopback=self.allow_loopback)
        delivered, expires = 0, 0
        if not pending:
            facts = self.tasks.facts(principal, task_id)
            delivered = facts.event_count
            if facts.terminal:
                expires = int(self.now()) + GRACE_SECONDS
        config = PushConfig(
            authority=principal.authority,
            task=task_id,
            id=given.id or "wh-" + uuid.uuid4().hex[:20],
            url=given.url,
            created_at=rfc3339(utc_now()),
            token=given.token,
            scheme=given.scheme,
            credentials=given.credentials,
            delivered=delivered,
            expires_at=expires,
        )
        return self.store.put(config, limit=MAX_CONFIGS_PER_TASK)

    def forget(self, principal: Principal, task_id: str, config_id: str) -> None:
        """Take back a `pending` create whose task was never created (its commit failed)."""
        self.store.delete(principal.authority, task_id, config_id)

    def get(self, principal: Principal, task_id: str, config_id: str) -> PushConfig:
        self._task(principal, task_id)
        check_id(config_id, "config_id")
        found = self.store.get(principal.authority, task_id, config_id)
        if found is None:
            raise NotFound("webhook not found", task_id=task_id, id=config_id)
        return found

    def list(self, principal: Principal, task_id: str) -> list[PushConfig]:
        self._task(principal, task_id)
        now = self.now()
        return [c for c in self.store.list(principal.authority, task_id) if c.live(now)]

    def delete(self, principal: Principal, task_id: str, config_id: str) -> None:
        self._task(principal, task_id)
        check_id(config_id, "config_id")
        self.store.delete(principal.authority, task_id, config_id)

    def _task(self, principal: Principal, task_id: str) -> None:
        principal.require("caller")
        check_id(task_id, "task_id")
        self.tasks.facts(principal, task_id)

    def redrive(self, principal: Principal, limit: int | None = None) -> dict[str, Any]:
        """Move this authority's dead letters back to the queue (admin); other authorities' are
        left in the dead-letter queue."""
        principal.require("admin")
        size = redrive_size(limit)
        if self.queue is None:
            raise InvalidArgument("this deployment has no webhook queue")
        moved: list[dict[str, Any]] = []
        stamp = int(self.now() * 1000)
        for notice, handle in self.queue.dead_letters(size):
            if notice is None or notice.authority != principal.authority:
                self.queue.release_dead_letter(handle)
                continue
            again = Notice(notice.authority, notice.task, notice.config, notice.sequence, redrive=stamp)
            self.queue.send([again])
            self.queue.forget_dead_letter(handle)
            moved.append({"task_id": notice.task, "webhook_id": notice.config, "sequence": notice.sequence})
        return {"moved": len(moved), "notifications": moved}
