"""The delivery of queued notifications (the `push_sender` function), and the fan-out that queues
them (the `push_fanout` function). Pure apart from the ports.

Fan-out: each event the task log commits (the tasks table's stream, filtered to event inserts)
becomes one Notice per live config of its task whose cursor is behind it, sent to the FIFO queue
(group = the task, deduplication = the notice). One Query of the task's configs per event batch of
a task; most tasks have none.

Delivery of a Notice (authority, task, config, sequence), exactly once in effect over the queue's
at-least-once delivery, in order per config:
1. Read the config (strongly consistent). Gone or expired: nothing to do. Its cursor at or past the
   sequence: delivered already (a redelivery, or a later notice caught up): nothing to do.
2. For every event after the cursor up to the sequence (normally just this one: a notice the
   stream sent out of order, or one whose fan-out ran before the config existed, is caught up
   here, from the durable log), the A2A StreamResponses the task's stream carries for it
   (push/ports.Bodies), each POSTed (push/dial.py) with its headers:
   Content-Type application/a2a+json, `Authorization: <scheme> <credentials>` and
   `X-A2A-Notification-Token` from the config, and Standard Webhooks' `webhook-id` (the same on
   every retry), `webhook-timestamp` and `webhook-signature` (v1a, Ed25519; push/keys.py). The URL
   is checked again first, against the addresses its host resolves to now, and the post dials
   the first of them (DNS rebinding cannot move it to a private address).
3. A 2xx settles the notification; the cursor moves past the event (a conditional UpdateItem).
   408, 429, 5xx or no answer: the message is hidden for `retry_delay` (Retry-After honoured) and
   comes back (SQS ChangeMessageVisibility; the FIFO group waits behind it, so order holds); on its
   MAX_ATTEMPTS-th receive it goes to the dead-letter queue instead. Any other answer, or a URL
   refused now, goes to the dead-letter queue at once. Either way the failure is recorded on the
   config (`last_failure`: when, which notification, the status, why), the cursor moves on, and
   the config is kept for the dead-letter queue's retention so a redrive can deliver it.
4. After the final notification of a terminal task settles, the config expires GRACE_SECONDS later.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal, Protocol

from dovecote.platform.clock import rfc3339, utc_now
from dovecote.platform.errors import InvalidArgument
from dovecote.push import addresses
from dovecote.push.keys import KeyRing
from dovecote.push.model import (
    DEAD_LETTER_KEEP_SECONDS,
    GRACE_SECONDS,
    MAX_ATTEMPTS,
    MEDIA_TYPE,
    RETRY_BASE_S,
    Notice,
    PushConfig,
    notification_id,
    retry_delay,
    verdict,
)
from dovecote.push.ports import Answer, Built, ConfigStore, EventBodies, NotificationQueue, Poster

log = logging.getLogger("dovecote.push")
USER_AGENT = "Dovecote-Webhooks/1"


class RetryLater(Exception):
    """The notification waits (its message hidden for `seconds`) and is received again."""

    def __init__(self, seconds: int) -> None:
        super().__init__(f"retry in {seconds} s")
        self.seconds = seconds


class KeySource(Protocol):
    def ring(self) -> KeyRing: ...


Result = Literal["delivered", "skipped", "gone", "dead"]


@dataclass(eq=False)
class Sender:
    store: ConfigStore
    queue: NotificationQueue
    bodies: EventBodies
    keys: KeySource
    poster: Poster
    _: KW_ONLY
    resolver: addresses.Resolver = field(default_factory=addresses.SystemResolver)
    allow_loopback: bool = False
    retry_base: int = RETRY_BASE_S
    now: Callable[[], float] = time.time
    rng: random.Random = field(default_factory=random.Random)
    _published: dict[str, Any] | None = None
    attempts: int = 0  # POSTs made (the bench)

    def deliver(self, notice: Notice, *, receive_count: int = 1, handle: str = "") -> Result:
        config = self.store.get(notice.authority, notice.task, notice.config)
        if config is None:
            log.info("webhook gone: notice dropped", extra={"task": notice.task, "webhook": notice.config})
            return "gone"
        if not notice.redrive and config.delivered >= notice.sequence:
            return "skipped"
        first = notice.sequence if notice.redrive else config.delivered + 1
        result: Result = "delivered"
        for sequence in range(first, notice.sequence + 1):
            built = self.bodies.built(notice.authority, notice.task, sequence)
            outcome = self._event(config, sequence, built, receive_count=receive_count, handle=handle)
            if outcome == "dead":
                result = "dead"
                self.store.advance(config, sequence, expires_at=int(self.now()) + DEAD_LETTER_KEEP_SECONDS)
            else:
                self.store.advance(
                    config, sequence, expires_at=int(self.now()) + GRACE_SECONDS if built.terminal else None
                )
        return result

    def _event(self, config: PushConfig, sequence: int, built: Built, *, receive_count: int, handle: str) -> str:
        """Deliver the event's notifications in order: "delivered", or "dead" when one was given up
        (buried, recorded); RetryLater when one is to be tried again."""
        for index, body in enumerate(built.bodies):
            webhook_id = notification_id(config.authority, config.task, config.id, sequence, index)
            status, answer, why = self._post(config, webhook_id, body)
            if status == "settled":
                continue
            attempt = receive_count
            failure = {
                "at": rfc3339(utc_now()),
                "webhook_id": webhook_id,
                "sequence": sequence,
                "status": answer.status if answer else 0,
                "attempt": attempt,
                "reason": why,
            }
            if status == "retry" and attempt < MAX_ATTEMPTS:
                wait = retry_delay(
                    attempt, base=self.retry_base, retry_after=answer.retry_after if answer else None, rng=self.rng
                )
                failure["retry_in_s"] = wait
                self.store.record_failure(config, failure)
                log.warning(
                    "webhook delivery failed: retrying",
                    extra={"task": config.task, "webhook": config.id, "status": failure["status"], "in_s": wait},
                )
                if handle:
                    self.queue.retry_later(handle, wait)
                raise RetryLater(wait)
            failure["dead_lettered"] = True
            self.store.record_failure(config, failure)
            self.queue.bury(Notice(config.authority, config.task, config.id, sequence))
            log.error(
                "webhook delivery given up: dead-lettered",
                extra={"task": config.task, "webhook": config.id, "status": failure["status"], "attempt": attempt},
            )
            return "dead"
        return "delivered"

    def _post(self, config: PushConfig, webhook_id: str, body: bytes) -> tuple[str, Answer | None, str]:
        try:
            target = addresses.check(config.url, self.resolver, allow_loopback=self.allow_loopback)
        except InvalidArgument as exc:
            return "dead", None, f"refused at send time: {exc.message}"
        ring = self._ring()
        stamp = int(self.now())
        headers = {
            "Content-Type": MEDIA_TYPE,
            "User-Agent": USER_AGENT,
            "webhook-id": webhook_id,
            "webhook-timestamp": str(stamp),
            "webhook-signature": ring.signature(webhook_id, stamp, body, self.now()),
        }
        if config.token:
            headers["X-A2A-Notification-Token"] = config.token
        if config.scheme and config.credentials:
            headers["Authorization"] = f"{config.scheme} {config.credentials}"
        self.attempts += 1
        answer = self.poster.post(target, target.addresses[0], body, headers)
        if answer.status == 0:
            return "retry", answer, f"no answer ({answer.detail or 'connection failed'})"
        found = verdict(answer.status)
        why = {"settled": "", "retry": f"the receiver answered {answer.status}"}.get(
            found, f"the receiver answered {answer.status}: not retried"
        )
        return found, answer, why

    def _ring(self) -> KeyRing:
        """The key ring, its JWKS published before its first signature."""
        ring = self.keys.ring()
        jwks = ring.jwks(self.now())
        if jwks != self._published:
            if self.store.published_keys() != jwks:
                self.store.publish_keys(jwks)
            self._published = jwks
        return ring


@dataclass(eq=False)
class Fanout:
    store: ConfigStore
    queue: NotificationQueue
    _: KW_ONLY
    now: Callable[[], float] = time.time

    def events(self, committed: Iterable[tuple[str, str, int]]) -> int:
        """Queue a notice per (event, live config behind it); returns how many."""
        by_task: dict[tuple[str, str], list[int]] = {}
        for authority, task, sequence in committed:
            by_task.setdefault((authority, task), []).append(sequence)
        notices: list[Notice] = []
        now = self.now()
        for (authority, task), sequences in by_task.items():
            configs = [c for c in self.store.list(authority, task) if c.live(now)]
            for sequence in sorted(sequences):
                notices.extend(Notice(authority, task, c.id, sequence) for c in configs if c.delivered < sequence)
        if notices:
            self.queue.send(notices)
        return len(notices)
