"""In-memory adapters of the push ports (tests, the bench's model): the config store held to the
DynamoDB store's conformance suite (tests/integration/test_push_store.py), a queue that keeps
what was sent, retried and buried, and the task facts of a fake task table."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

from dovecote.platform.errors import InvalidArgument, NotFound
from dovecote.platform.principal import Principal
from dovecote.push.model import Notice, PushConfig
from dovecote.push.ports import TaskFacts


class MemoryConfigStore:
    def __init__(self, *, clock: Any = time.time) -> None:
        self._configs: dict[tuple[str, str, str], PushConfig] = {}
        self._keys: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._clock = clock

    def put(self, config: PushConfig, *, limit: int) -> PushConfig:
        now = self._clock()
        key = (config.authority, config.task, config.id)
        with self._lock:
            live = [c for k, c in self._configs.items() if k[:2] == key[:2] and c.live(now)]
            same = next((c for c in live if c.id == config.id), None)
            if same is None and len(live) >= limit:
                raise InvalidArgument(f"a task has at most {limit} webhooks", field="id", limit=limit)
            if same is not None:
                config = replace(
                    config, delivered=same.delivered, created_at=same.created_at, expires_at=same.expires_at
                )
            self._configs[key] = config
            return config

    def get(self, authority: str, task: str, config_id: str) -> PushConfig | None:
        found = self._configs.get((authority, task, config_id))
        return found if found is not None and found.live(self._clock()) else None

    def list(self, authority: str, task: str) -> list[PushConfig]:
        return sorted((c for k, c in self._configs.items() if k[:2] == (authority, task)), key=lambda c: c.id)

    def delete(self, authority: str, task: str, config_id: str) -> None:
        with self._lock:
            self._configs.pop((authority, task, config_id), None)

    def record_failure(self, config: PushConfig, failure: dict[str, Any]) -> None:
        key = (config.authority, config.task, config.id)
        with self._lock:
            if (found := self._configs.get(key)) is not None:
                self._configs[key] = replace(found, last_failure=failure)

    def advance(self, config: PushConfig, delivered: int, *, expires_at: int | None = None) -> None:
        key = (config.authority, config.task, config.id)
        with self._lock:
            found = self._configs.get(key)
            if found is None:
                return
            if delivered > found.delivered:
                found = replace(found, delivered=delivered)
            if expires_at is not None and (not found.expires_at or found.expires_at < expires_at):
                found = replace(found, expires_at=expires_at)
            self._configs[key] = found

    def published_keys(self) -> dict[str, Any] | None:
        return self._keys

    def publish_keys(self, jwks: dict[str, Any]) -> None:
        self._keys = jwks


class MemoryQueue:
    """What the sender and the fan-out did to the queue, in order."""

    def __init__(self) -> None:
        self.sent: list[Notice] = []
        self.buried: list[Notice] = []
        self.retries: list[tuple[str, int]] = []
        self.letters: list[tuple[Notice | None, str]] = []

    def send(self, notices: list[Notice]) -> None:
        self.sent.extend(notices)

    def retry_later(self, handle: str, seconds: int) -> None:
        self.retries.append((handle, seconds))

    def bury(self, notice: Notice) -> None:
        self.buried.append(notice)
        self.letters.append((notice, f"letter-{len(self.letters)}"))

    def dead_letters(self, limit: int) -> list[tuple[Notice | None, str]]:
        return list(self.letters[:limit])

    def forget_dead_letter(self, handle: str) -> None:
        self.letters = [letter for letter in self.letters if letter[1] != handle]

    def release_dead_letter(self, handle: str) -> None:
        return None


class MemoryTasks:
    """Task facts set by the test."""

    def __init__(self) -> None:
        self.tasks: dict[tuple[str, str], TaskFacts] = {}

    def facts(self, principal: Principal, task: str) -> TaskFacts:
        found = self.tasks.get((principal.authority, task))
        if found is None:
            raise NotFound("task not found", task_id=task)
        return found
