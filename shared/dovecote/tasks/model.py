"""Task records: the aggregate, its messages, events, grants, receipts, artifacts, workspace heads
and apply receipts, and their invariants. Pure. (The gates that build commands from requests are in
tasks/commands.py.)"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from dovecote.platform import paging
from dovecote.platform.errors import StaleLease
from dovecote.platform.records import Receipt as Receipt  # a committed command's, as every service keeps it
from dovecote.platform.records import canonical_digest, fields_json
from dovecote.platform.records import intent_digest as intent_digest  # the tasks' commands bind their ids with it
from dovecote.tasks.limits import ARTIFACT_INLINE_ANSWER as ARTIFACT_INLINE_ANSWER  # the adapters read it here
from dovecote.tasks.limits import DEFAULT_PAGE, EXPIRY_SHARDS, MAX_PAGE
from dovecote.tasks.limits import TOTAL_SIZE_CAP as TOTAL_SIZE_CAP  # the adapters read it here


def page_limit(limit: int | None) -> int:
    """The reference's MaxPageSize: 0 or none means 100, over 100 is invalid."""
    return paging.page_limit(limit, default=DEFAULT_PAGE, maximum=MAX_PAGE)


@dataclass(frozen=True, slots=True)
class Part:
    """A message part: bytes of a media type, or a reference by `url` (no bytes; `media_type` is
    then the type of what the URL points at). Either may carry a `filename`."""

    media_type: str
    data: bytes
    # A part read back without its bytes (stored in S3 past the inline size): its digest and size,
    # served as a download_url rather than carried in a page.
    sha256: str = ""
    size: int = 0
    filename: str = ""
    url: str = ""

    @property
    def remote(self) -> bool:
        return bool(self.sha256) and not self.data

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"media_type": self.media_type}
        # The new keys only when set: the intent digest of a part without them is unchanged.
        if self.url:
            out["url"] = self.url
        else:
            out["data_b64"] = base64.b64encode(self.data).decode()
        if self.filename:
            out["filename"] = self.filename
        return out


@dataclass(frozen=True, slots=True)
class MessageInput:
    """A message as a command gives it: its id, parts and metadata, before the task numbers it."""

    id: str
    parts: tuple[Part, ...]
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        # metadata is absent when empty: the intent digest of a message without it is unchanged
        return {"id": self.id, "parts": [p.to_json() for p in self.parts], **fields_json(self, (), ("metadata",))}


# What a task's JSON names as the record does (the timeouts are renamed, artifact and submission optional).
TASK_FIELDS = ("id", "workspace", "context", "state", "revision", "message_count", "event_count", "created_at")


@dataclass(frozen=True, slots=True)
class Task:
    """The task aggregate: its state, revision, counters, lease and the fields every command checks."""

    authority: str
    id: str
    workspace: str
    context: str
    state: str
    revision: int
    message_count: int
    event_count: int
    created_at: str
    updated_at: str
    # Current lease: an empty owner means unleased; the fence never decreases.
    owner: str = ""
    fence: int = 0
    granted_at: str = ""
    # The last sign of life of the current lease (its grant, a heartbeat, or a worker command).
    heartbeat_at: str = ""
    # When the current grant was accepted: by accept_task (or any worker command), or, for a task a
    # fenced worker left past `submitted`, by its new owner's first sign of life (a heartbeat too).
    # Empty while the grant is not accepted; then `accept_timeout` bounds how long it may stay so.
    accepted_at: str = ""
    lease_timeout: int = 0
    accept_timeout: int = 0
    # The artifact this task froze (at most one), by id within the task's workspace.
    artifact: str = ""
    # The published submission: {"id", "final_message", "published_at"}, set on completion.
    submission: dict[str, str] | None = None
    # How the last lease generation that ended did end (kept until the next one ends): what the
    # lease history reads, beside the event log and never in it (the log's events are the reference's).
    last_end: LeaseEnd | None = None

    def to_json(self) -> dict[str, Any]:
        return TaskView.of(self).to_json()

    def evolve(self, **changes: Any) -> Task:
        return replace(self, **changes)


class TaskView(NamedTuple):
    """A task as the service answers it, after a command or in a read, under the names the API gives
    its fields: what a command's receipt stores (`to_json`) and an exact retry answers again
    (`from_json`), so a replay answers what the first run did, to the field."""

    id: str
    workspace: str
    context: str
    state: str
    revision: int
    message_count: int
    event_count: int
    created_at: str
    updated_at: str
    lease_timeout_seconds: int
    accept_timeout_seconds: int
    artifact: str | None = None  # the frozen artifact's id, once there is one
    submission: dict[str, str] | None = None  # {"id", "final_message", "published_at"}, once completed

    @classmethod
    def of(cls, task: Task) -> TaskView:
        return cls(
            task.id,
            task.workspace,
            task.context,
            task.state,
            task.revision,
            task.message_count,
            task.event_count,
            task.created_at,
            task.updated_at,
            task.lease_timeout,
            task.accept_timeout,
            task.artifact or None,
            dict(task.submission) if task.submission else None,
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskView:
        return cls(
            **{name: data[name] for name in (*TASK_FIELDS, "updated_at")},
            lease_timeout_seconds=int(data.get("lease_timeout_seconds", 0)),
            accept_timeout_seconds=int(data.get("accept_timeout_seconds", 0)),
            artifact=data.get("artifact") or None,
            submission=data.get("submission") or None,
        )

    def to_json(self) -> dict[str, Any]:
        out = fields_json(self, (*TASK_FIELDS, "updated_at", "lease_timeout_seconds", "accept_timeout_seconds"))
        if self.artifact:
            out["artifact"] = self.artifact
        if self.submission:
            out["submission"] = dict(self.submission)
        return out


def stale_lease(task: Task, fence: int, carrier: str = "command") -> StaleLease:
    """A worker's `fence` that is not the task's current lease: `current_fence` when someone holds it.
    When nobody does, the message says so (a worker that never held it, or whose lease ended, is told
    to claim or acquire it, not that its lease is stale)."""
    if not task.owner:
        message = (
            f"no worker holds this task's lease now (released, fenced or never granted): the {carrier}'s "
            f"fence {fence} is not current; claim or acquire the task first"
        )
    else:
        message = f"the lease this {carrier} carries is not current"
    return StaleLease(message, fence=fence, current_fence=task.fence if task.owner else None)


# Why a lease generation ended: its owner released it; an admin fenced it; the dispatcher fenced it
# for silence past its lease timeout, or for a grant not accepted within its accept timeout; or the
# task reached a terminal state (completed, failed, rejected by the worker, canceled by the caller).
LEASE_END_REASONS = ("released", "fenced", "expired", "unaccepted", "task_ended")


@dataclass(frozen=True, slots=True)
class LeaseEnd:
    """How one lease generation ended: the grant, what it did (accepted, last sign of life), when
    it ended, why (LEASE_END_REASONS) and by whom (a worker id, `admin`, `dispatcher`, `caller`)."""

    fence: int
    worker: str
    granted_at: str
    accepted_at: str
    heartbeat_at: str
    ended_at: str
    reason: str
    by: str

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in LEASE_END_FIELDS}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LeaseEnd:
        return cls(**{name: data[name] for name in LEASE_END_FIELDS})


LEASE_END_FIELDS = ("fence", "worker", "granted_at", "accepted_at", "heartbeat_at", "ended_at", "reason", "by")


def lease_end(task: Task, reason: str, by: str, at: str) -> LeaseEnd:
    """The end of `task`'s current lease, as the commit that ends it sees it."""
    return LeaseEnd(task.fence, task.owner, task.granted_at, task.accepted_at, task.heartbeat_at, at, reason, by)


@dataclass(frozen=True, slots=True)
class Message:
    """A message of a task's conversation, numbered in the order it was appended."""

    task: str
    id: str
    sequence: int
    author: str  # caller | agent
    parts: tuple[Part, ...]
    created_at: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = fields_json(self, ("id", "sequence", "author"))
        out["parts"] = [_render_part(p) for p in self.parts]
        return {**out, **fields_json(self, ("created_at",), ("metadata",))}


def _render_part(part: Part) -> dict[str, Any]:
    from dovecote.platform.media import is_textual

    out: dict[str, Any]
    if part.url:
        return part.to_json()
    if part.remote:
        out = {"media_type": part.media_type, "sha256": part.sha256, "size": part.size}
    elif is_textual(part.media_type):
        try:
            out = {"media_type": part.media_type, "text": part.data.decode("utf-8")}
        except UnicodeDecodeError:
            return part.to_json()
    else:
        return part.to_json()
    if part.filename:
        out["filename"] = part.filename
    return out


@dataclass(frozen=True, slots=True)
class Event:
    """A state change of a task, numbered: the stream `GET /v1/tasks/{id}/events` pages through."""

    task: str
    sequence: int
    type: str
    state: str
    revision: int
    occurred_at: str
    message: str = ""
    submission: str = ""
    artifact: str = ""
    reason: str = ""  # task_failed only: the worker's reason, when it gave one

    def to_json(self) -> dict[str, Any]:
        return fields_json(
            self,
            ("sequence", "type", "state", "revision", "occurred_at"),
            ("message", "submission", "artifact", "reason"),
        )


@dataclass(frozen=True, slots=True)
class Grant:
    """A lease granted to a worker on a task: its fence and when it was granted. A grant record is
    written once; it also carries how the generation before it ended (`previous`), which the task
    held until then, so the lease history costs no item of its own."""

    task: str
    worker: str
    fence: int
    granted_at: str
    previous: LeaseEnd | None = None


class Lease(NamedTuple):
    """The current lease as a task read shows it: who holds it, its fence, its grant, acceptance and
    last sign of life, its timeouts, and when the dispatcher will fence it if nothing changes
    (`fenced_after`: None when no timeout applies)."""

    worker: str
    fence: int
    state: str  # granted | accepted
    granted_at: str
    accepted_at: str | None
    heartbeat_at: str
    lease_timeout_seconds: int
    accept_timeout_seconds: int
    fenced_after: str | None

    @classmethod
    def of(cls, task: Task) -> Lease | None:
        """The task's current lease, or None when it is unleased."""
        if not task.owner:
            return None
        return cls(
            task.owner,
            task.fence,
            "accepted" if task.accepted_at else "granted",
            task.granted_at,
            task.accepted_at or None,
            task.heartbeat_at or task.granted_at,
            task.lease_timeout,
            task.accept_timeout,
            lease_deadline(task),
        )

    def to_json(self) -> dict[str, Any]:
        """Fields with no value absent, as the API leaves them out."""
        return {name: getattr(self, name) for name in LEASE_FIELDS if getattr(self, name) is not None}


LEASE_FIELDS = (
    "worker",
    "fence",
    "state",
    "granted_at",
    "accepted_at",
    "heartbeat_at",
    "lease_timeout_seconds",
    "accept_timeout_seconds",
    "fenced_after",
)


def lease_deadline(task: Task) -> str | None:
    """When the dispatcher fences the current lease, or None (unleased, or no timeout applies): the
    grant's accept deadline while it is not accepted, or the lease's silence deadline, whichever
    comes first. The expiry index is keyed on it, so an unaccepted grant is found as cheaply as a
    silent lease."""
    due = [d for d in (silence_deadline(task), accept_deadline(task)) if d is not None]
    return min(due) if due else None


def silence_deadline(task: Task) -> str | None:
    """The last sign of life of the lease + its lease timeout (None: unleased, or never)."""
    if not task.owner or task.lease_timeout <= 0 or not task.heartbeat_at:
        return None
    return _after(task.heartbeat_at, task.lease_timeout)


def accept_deadline(task: Task) -> str | None:
    """The grant + its accept timeout, while the grant is not accepted (None: accepted, unleased, or
    never)."""
    if not task.owner or task.accepted_at or task.accept_timeout <= 0 or not task.granted_at:
        return None
    return _after(task.granted_at, task.accept_timeout)


def _after(timestamp: str, seconds: int) -> str:
    """An RFC 3339 UTC time `seconds` later, in the same form (the forms sort as their instants)."""
    from datetime import datetime, timedelta

    from dovecote.platform.clock import rfc3339

    return rfc3339(datetime.fromisoformat(timestamp.replace("Z", "+00:00")) + timedelta(seconds=seconds))


def expiry_shard(authority: str, task_id: str) -> int:
    return int(hashlib.sha256(f"{authority}#{task_id}".encode()).hexdigest()[:8], 16) % EXPIRY_SHARDS


def task_violations(task: Task) -> list[str]:
    """The aggregate's invariants (docs/design/tasks.md#counters-and-invariants); a non-empty answer
    means the store is corrupt."""
    from dovecote.tasks import machine

    found = []
    if task.revision != task.event_count:
        found.append(f"revision {task.revision} != event count {task.event_count}")
    if task.message_count > task.revision:
        found.append(f"message count {task.message_count} > revision {task.revision}")
    if task.revision < 1 or task.message_count < 1:
        found.append("a task has at least revision 1 and one message")
    if task.state not in machine.STATES:
        found.append(f"unknown state {task.state!r}")
    if task.state == "completed" and not task.submission:
        found.append("completed without a submission")
    if machine.is_terminal(task.state) and task.owner:
        found.append(f"terminal but leased by {task.owner!r}")
    if task.owner and (task.fence < 1 or not task.granted_at):
        found.append("leased without a fence or a grant time")
    return found


def message_violations(message: Message) -> list[str]:
    """Authors alternate: odd sequence numbers are the caller's, even ones the agent's."""
    want = "caller" if message.sequence % 2 == 1 else "agent"
    return [] if message.author == want else [f"message {message.sequence} is by {message.author}, not {want}"]


# ---- artifacts, workspace heads, apply receipts (docs/design/tasks.md#artifacts-and-apply-receipts) ---


def result_revision(base: str, artifact_id: str, payload_digest: str) -> str:
    """The workspace revision an artifact produces: {base, surface "agent", artifact, payload}."""
    return canonical_digest({"base": base, "surface": "agent", "artifact": artifact_id, "payload": payload_digest})


# The artifact's identity digest: its key → the field it is read from.
_DIGEST_NAMES = {
    "workspace": "workspace",
    "artifact": "id",
    "task": "task",
    "base": "base_revision",
    "result": "result_revision",
    "payload": "payload_digest",
    "size": "payload_size",
    "media_type": "media_type",
}
_ARTIFACT_JSON = (
    "id",
    "task",
    "workspace",
    "state",
    "base_revision",
    "result_revision",
    "digest",
    "payload_digest",
    "payload_size",
    "media_type",
    "frozen_at",
)


@dataclass(frozen=True, slots=True)
class Artifact:
    """A task's output in a workspace: frozen, then published or discarded."""

    authority: str
    workspace: str
    id: str
    task: str
    state: str
    base_revision: str
    result_revision: str
    payload_digest: str
    payload_size: int
    media_type: str
    frozen_at: str
    published_at: str = ""
    discarded_at: str = ""

    @property
    def digest(self) -> str:
        """The artifact's identity digest: what an apply receipt names. Derived, never stored."""
        return canonical_digest({key: getattr(self, name) for key, name in _DIGEST_NAMES.items()})

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, _ARTIFACT_JSON, ("published_at", "discarded_at"))

    @classmethod
    def from_json(cls, data: dict[str, Any], authority: str) -> Artifact:
        """An artifact from its JSON (a freeze's receipt keeps it), in `authority`."""
        names = [name for name in _ARTIFACT_JSON if name != "digest"]
        found = cls(
            authority, **{name: data[name] for name in names}, **_optional(data, "published_at", "discarded_at")
        )
        return found


@dataclass(frozen=True, slots=True)
class WorkspaceHead:
    """The revision a workspace has confirmed: the compare-and-swap point of apply receipts."""

    authority: str
    workspace: str
    confirmed_revision: str
    updated_at: str

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, ("workspace", "confirmed_revision", "updated_at"))


@dataclass(frozen=True, slots=True)
class ApplyReceipt:
    """What applying an artifact to its workspace decided, recorded once per artifact."""

    authority: str
    workspace: str
    artifact: str
    id: str
    artifact_digest: str
    base_revision: str
    result_revision: str
    decision: str
    observed_revision: str = ""
    code: str = ""
    message: str = ""
    recorded_at: str = ""

    def same_decision(self, other: ApplyReceipt) -> bool:
        """An identical repeat: everything but the time it was recorded."""
        return replace(self, recorded_at="") == replace(other, recorded_at="")

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, _RECEIPT_JSON, ("observed_revision", "code", "message"))

    @classmethod
    def from_json(cls, data: dict[str, Any], authority: str, workspace: str) -> ApplyReceipt:
        """A receipt from its JSON (its command's receipt keeps it), in `authority` and `workspace`."""
        given = {name: data[name] for name in _RECEIPT_JSON}
        return cls(authority, workspace, **given, **_optional(data, "observed_revision", "code", "message"))


_RECEIPT_JSON = ("id", "artifact", "artifact_digest", "base_revision", "result_revision", "decision", "recorded_at")


def _optional(data: dict[str, Any], *names: str) -> dict[str, Any]:
    """The optional fields a record's JSON holds (absent: empty)."""
    return {name: data[name] for name in names if name in data}


@dataclass(frozen=True, slots=True)
class PayloadInput:
    """An artifact payload as it arrives: inline bytes, or the digest of a presigned upload."""

    media_type: str
    data: bytes | None = None
    upload_sha256: str = ""

    @property
    def digest(self) -> str:
        return "sha256:" + (hashlib.sha256(self.data).hexdigest() if self.data is not None else self.upload_sha256)
