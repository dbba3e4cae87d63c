"""The push context's records and rules (docs/guides/webhooks.md). Pure.

- A config (`PushConfig`) is one webhook of one task: its URL, an optional `token` (sent as
  X-A2A-Notification-Token) and an optional `authentication` (scheme + credentials, sent as
  `Authorization: <scheme> <credentials>`). The token and the credentials are secrets: sealed at rest
  (platform/protection.py, like message parts), never in a log line, and never in an answer of
  Dovecote's own API (which says only that they are set). `delivered` is the config's cursor: the
  last task event sequence delivered (or given up on), so a redelivered or late message is skipped
  and a later one catches up, in order, from the durable log.
- A config lives until the task ends, plus GRACE_SECONDS after its final notification settled (a
  config of a task that had already ended: GRACE_SECONDS from its creation), or until it is
  deleted; a dead-lettered notification keeps its config for DEAD_LETTER_KEEP_SECONDS, so a
  redrive can still deliver it.
- A queued notification (`Notice`) names (authority, task, config, sequence): its body is built at
  send time from the durable log, its credentials read from the config then. The SQS FIFO group is
  the task (one task's notifications arrive in order; another task's never wait behind them); the
  deduplication id is the notification's id.
- `webhook-id` (`notification_id`) is derived from what it notifies, so every retry carries the
  same id, and a receiver dedupes by it.
- Retries: attempt n waits `retry_delay(n)`: min(RETRY_CAP_S, base·2^(n-1)), jittered to between
  half and all of it, or the receiver's Retry-After when longer (at most RETRY_CAP_S). After
  MAX_ATTEMPTS attempts the notification goes to the dead-letter queue: with the default base of 5 s
  that is 14 waits, between 2.7 and 5.4 hours after the first attempt (`retry_window`).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from dovecote.platform.errors import InvalidArgument
from dovecote.platform.ids import check_id

MAX_CONFIGS_PER_TASK = 10
MAX_URL = 2048
MAX_TOKEN = 512
MAX_CREDENTIALS = 4096
# An HTTP authentication scheme is a token (RFC 9110 §11.1): Bearer, Basic, ...
SCHEME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}")
# What a header value may hold here: visible ASCII and spaces (no CR, LF or other control), so a
# config can never add a header line of its own.
HEADER_TEXT = re.compile(r"[\x21-\x7e][\x20-\x7e]*")
GRACE_SECONDS = 24 * 3600
DEAD_LETTER_KEEP_SECONDS = 14 * 24 * 3600  # the dead-letter queue's retention
MAX_ATTEMPTS = 15
RETRY_BASE_S = 5
RETRY_CAP_S = 3600
TIMEOUT_S = 10.0  # one delivery attempt, connection to last byte read
READ_BOUND = 4096  # bytes of a receiver's answer read, at most
MEDIA_TYPE = "application/a2a+json"

Verdict = Literal["settled", "retry", "dead"]


@dataclass(frozen=True, slots=True)
class ConfigInput:
    """A config as a client gave it, checked (`gate_config`). `id` empty: the server names it."""

    id: str
    url: str
    token: str = field(default="", repr=False)
    scheme: str = ""
    credentials: str = field(default="", repr=False)


@dataclass(frozen=True, slots=True)
class PushConfig:
    authority: str
    task: str
    id: str
    url: str
    created_at: str
    token: str = field(default="", repr=False)
    scheme: str = ""
    credentials: str = field(default="", repr=False)
    delivered: int = 0
    expires_at: int = 0  # epoch seconds; 0: until the task ends
    last_failure: dict[str, Any] | None = None

    def live(self, now: float) -> bool:
        return not self.expires_at or self.expires_at > now

    def public_json(self) -> dict[str, Any]:
        """The config as Dovecote's own API answers it: never the token or the credentials."""
        out: dict[str, Any] = {
            "id": self.id,
            "task_id": self.task,
            "url": self.url,
            "has_token": bool(self.token),
            "authentication": {"scheme": self.scheme, "has_credentials": bool(self.credentials)}
            if self.scheme
            else None,
            "created_at": self.created_at,
            "delivered": self.delivered,
        }
        if self.last_failure:
            out["last_failure"] = self.last_failure
        return out


def gate_config(raw: Mapping[str, Any]) -> ConfigInput:
    """The one validator of a config's input (Dovecote's API and both A2A bindings): `id` (optional),
    `url`, `token`, `authentication: {scheme, credentials}`. The URL's address is checked apart
    (push/addresses.py), against the resolver."""
    config_id = raw.get("id") or ""
    if config_id:
        check_id(config_id, "id")
    url = raw.get("url")
    if not isinstance(url, str) or not url:
        raise InvalidArgument("url is required: the webhook's https URL", field="url")
    if len(url) > MAX_URL:
        raise InvalidArgument(f"url is at most {MAX_URL} characters", field="url")
    token = raw.get("token") or ""
    _header_text(token, "token", MAX_TOKEN)
    auth = raw.get("authentication") or {}
    if not isinstance(auth, Mapping):
        raise InvalidArgument("authentication is an object: {scheme, credentials}", field="authentication")
    scheme, credentials = auth.get("scheme") or "", auth.get("credentials") or ""
    if not isinstance(scheme, str) or (scheme and not SCHEME.fullmatch(scheme)):
        raise InvalidArgument(
            "authentication.scheme is an HTTP authentication scheme (a token: Bearer, Basic, ...)",
            field="authentication.scheme",
        )
    _header_text(credentials, "authentication.credentials", MAX_CREDENTIALS)
    if credentials and not scheme:
        raise InvalidArgument(
            "authentication.credentials need a scheme: they are sent as `Authorization: <scheme> <credentials>`",
            field="authentication.scheme",
        )
    return ConfigInput(str(config_id), url, token, scheme, credentials)


def _header_text(value: Any, name: str, limit: int) -> None:
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} is text", field=name)
    if value and (len(value) > limit or not HEADER_TEXT.fullmatch(value)):
        raise InvalidArgument(
            f"{name} is 1 to {limit} visible ASCII characters (it is sent in an HTTP header)", field=name
        )


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()


def notification_id(authority: str, task: str, config: str, sequence: int, index: int) -> str:
    """`webhook-id`: one per notification (the `index`-th StreamResponse of event `sequence`),
    the same on every retry and redrive."""
    return "wh_" + _digest(authority, task, config, str(sequence), str(index))[:32]


@dataclass(frozen=True, slots=True)
class Notice:
    """One queued notification: event `sequence` of `task` for `config`. `redrive`: a dead letter
    sent back, delivered whatever the config's cursor says."""

    authority: str
    task: str
    config: str
    sequence: int
    redrive: int = 0

    def to_body(self) -> str:
        out: dict[str, Any] = {"authority": self.authority, "task": self.task, "config": self.config}
        out["sequence"] = self.sequence
        if self.redrive:
            out["redrive"] = self.redrive
        return json.dumps(out, separators=(",", ":"))

    @classmethod
    def from_body(cls, body: str) -> Notice:
        try:
            raw = json.loads(body)
            return cls(
                str(raw["authority"]),
                str(raw["task"]),
                str(raw["config"]),
                int(raw["sequence"]),
                int(raw.get("redrive", 0)),
            )
        except (ValueError, KeyError, TypeError):
            raise ValueError("not a push notification message") from None

    @property
    def group_id(self) -> str:
        return "t" + _digest(self.authority, self.task)[:64]

    @property
    def deduplication_id(self) -> str:
        base = _digest(self.authority, self.task, self.config, str(self.sequence))[:64]
        return f"{base}-r{self.redrive}" if self.redrive else base


def retry_delay(
    attempt: int, *, base: int = RETRY_BASE_S, retry_after: int | None = None, rng: random.Random | None = None
) -> int:
    """Seconds to wait after failed attempt `attempt` (1-based): exponential, capped, jittered
    between half and all of it; a longer Retry-After wins, up to the cap."""
    ceiling = min(RETRY_CAP_S, base * 2 ** min(attempt - 1, 30))
    wait = ceiling / 2 + (rng or random).random() * ceiling / 2
    if retry_after is not None and retry_after > wait:
        wait = min(retry_after, RETRY_CAP_S)
    return max(1, int(round(wait)))


def retry_window(base: int = RETRY_BASE_S) -> tuple[float, float]:
    """The shortest and longest time from the first attempt to the dead-letter queue, in seconds."""
    longest = sum(min(RETRY_CAP_S, base * 2 ** (n - 1)) for n in range(1, MAX_ATTEMPTS))
    return longest / 2, float(longest)


def verdict(status: int) -> Verdict:
    """2xx settles; 408, 429 and 5xx are tried again; any other answer (a redirect, another 4xx)
    never will succeed as it is: straight to the dead-letter queue."""
    if 200 <= status < 300:
        return "settled"
    if status in (408, 429) or 500 <= status < 600:
        return "retry"
    return "dead"


def retry_after_seconds(value: str) -> int | None:
    """A Retry-After header's delay in seconds (delta-seconds, or an HTTP date), None if unreadable."""
    value = value.strip()
    if value.isdigit():
        return int(value[:9])
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    from datetime import UTC, datetime

    if when.tzinfo is None:
        return None
    return max(0, int((when - datetime.now(UTC)).total_seconds()))
