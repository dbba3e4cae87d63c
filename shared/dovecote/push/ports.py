"""The push context's ports: the config store (DynamoDB: push/dynamo.py; in memory: push/memory.py,
held to the same conformance suite), the notification queue (SQS FIFO: push/queue.py), the task
facts a config is checked against, the body of a notification (A2A: dovecote/a2a/notifications.py),
and the HTTP post (push/dial.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from dovecote.platform.principal import Principal
from dovecote.push.addresses import Target
from dovecote.push.model import Notice, PushConfig


@dataclass(frozen=True, slots=True)
class TaskFacts:
    """What a config needs to know of its task: whether it ended, and how far its log goes."""

    state: str
    event_count: int
    terminal: bool


class ConfigStore(Protocol):
    def put(self, config: PushConfig, *, limit: int) -> PushConfig:
        """Store `config` (its secrets as given: the store seals them). The same id again replaces
        its settings and keeps its cursor. InvalidArgument when the task holds `limit` live configs."""
        ...

    def get(self, authority: str, task: str, config_id: str) -> PushConfig | None: ...

    def list(self, authority: str, task: str) -> list[PushConfig]:
        """The task's configs, live or not, by id."""
        ...

    def delete(self, authority: str, task: str, config_id: str) -> None:
        """Gone (whether it was there or not)."""
        ...

    def advance(self, config: PushConfig, delivered: int, *, expires_at: int | None = None) -> None:
        """Move the cursor up to `delivered` (never down), set the expiry when given (never
        shortened below one already set later). A config deleted meanwhile stays deleted."""
        ...

    def record_failure(self, config: PushConfig, failure: dict[str, Any]) -> None:
        """Keep `failure` as the config's last one (the cursor stays). A config deleted meanwhile
        stays deleted."""
        ...

    def published_keys(self) -> dict[str, Any] | None:
        """The JWKS the sender last published (None before any)."""
        ...

    def publish_keys(self, jwks: dict[str, Any]) -> None: ...


class NotificationQueue(Protocol):
    def send(self, notices: list[Notice]) -> None:
        """Queue the notices (SQS FIFO: group = task, deduplication = notice)."""
        ...

    def retry_later(self, handle: str, seconds: int) -> None:
        """Hide a received message for `seconds` before it is received again."""
        ...

    def bury(self, notice: Notice) -> None:
        """Into the dead-letter queue."""
        ...

    def dead_letters(self, limit: int) -> list[tuple[Notice | None, str]]:
        """Up to `limit` dead letters (the notice, None when unreadable; the receipt handle)."""
        ...

    def forget_dead_letter(self, handle: str) -> None: ...

    def release_dead_letter(self, handle: str) -> None: ...


class Tasks(Protocol):
    def facts(self, principal: Principal, task: str) -> TaskFacts:
        """The task as `principal` may read it: NotFound for none (another authority's included)."""
        ...


@dataclass(frozen=True, slots=True)
class Built:
    """The notifications of one event: each the JSON of one A2A StreamResponse, in the order the
    task's A2A stream sends them ([] when the stream carries nothing for it), and whether the event
    ends the task."""

    bodies: list[bytes]
    terminal: bool


class EventBodies(Protocol):
    def built(self, authority: str, task: str, sequence: int) -> Built: ...


@dataclass(frozen=True, slots=True)
class Answer:
    """A receiver's answer: its status (0 when there was none: a timeout, a refused connection),
    its Retry-After in seconds, and at most READ_BOUND bytes of its body."""

    status: int
    retry_after: int | None = None
    detail: str = ""


class Poster(Protocol):
    def post(self, target: Target, address: str, body: bytes, headers: dict[str, str]) -> Answer:
        """POST `body` to `target`, dialling `address` (one of its checked addresses) and nothing
        else: no redirect followed, no proxy."""
        ...
