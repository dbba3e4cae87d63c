"""Task records and the one validation gate per command input. Pure."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from dovecote.platform import paging
from dovecote.platform.errors import InvalidArgument, PayloadTooLarge
from dovecote.platform.ids import ID_PATTERN, check_id  # noqa: F401 (re-exported)
from dovecote.platform.media import validate_media_type

MAX_PARTS = 32
MAX_MESSAGE_BYTES = 2 * 1024 * 1024
MAX_FENCE = 2**63 - 1
# A lease that stays silent (no heartbeat, no worker command) this long is fenced by the dispatcher.
# 0 means never: the seed's explicit fencing only.
MAX_LEASE_TIMEOUT = 86_400
# The lease-expiry index is spread over this many partitions, so heartbeats from many workers do
# not all write one GSI partition; the dispatcher queries each (a constant number per run).
EXPIRY_SHARDS = 8
MAX_COUNTER = 2**63 - 1
DEFAULT_PAGE = 100
# `total_size` counts at most this many tasks: a list request never reads more than it returns plus
# this constant. Past it, the count is reported as a lower bound.
TOTAL_SIZE_CAP = 1000
MAX_PAGE = 100


def page_limit(limit: int | None) -> int:
    """The seed's MaxPageSize: 0 or none means 100, over 100 is invalid."""
    return paging.page_limit(limit, default=DEFAULT_PAGE, maximum=MAX_PAGE)


@dataclass(frozen=True, slots=True)
class Part:
    media_type: str
    data: bytes
    # A part read back without its bytes (stored in S3 past the inline size): its digest and size,
    # served as a download_url rather than carried in a page.
    sha256: str = ""
    size: int = 0

    @property
    def remote(self) -> bool:
        return bool(self.sha256) and not self.data

    def to_json(self) -> dict[str, Any]:
        return {"media_type": self.media_type, "data_b64": base64.b64encode(self.data).decode()}


@dataclass(frozen=True, slots=True)
class MessageInput:
    id: str
    parts: tuple[Part, ...]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "parts": [p.to_json() for p in self.parts]}


def gate_message(raw: Any) -> MessageInput:
    """The one gate for a message: id pattern, 1–32 parts, non-empty data, ≤ 2 MiB in total,
    parseable media types."""
    if not isinstance(raw, dict):
        raise InvalidArgument("message must be an object {id, parts}", field="message")
    message_id = check_id(raw.get("id"), "message.id")
    parts_raw = raw.get("parts")
    if not isinstance(parts_raw, list) or not 1 <= len(parts_raw) <= MAX_PARTS:
        raise InvalidArgument(f"message.parts must hold 1 to {MAX_PARTS} parts", field="message.parts")
    parts: list[Part] = []
    total = 0
    for i, part in enumerate(parts_raw):
        where = f"message.parts[{i}]"
        if not isinstance(part, dict):
            raise InvalidArgument(f"{where} must be an object", field=where)
        media_type = part.get("media_type")
        if not isinstance(media_type, str):
            raise InvalidArgument(f"{where}.media_type is required", field=f"{where}.media_type")
        validate_media_type(media_type, field=f"{where}.media_type")
        text, data_b64 = part.get("text"), part.get("data_b64")
        if (text is None) == (data_b64 is None):
            raise InvalidArgument(f"{where} needs exactly one of text or data_b64", field=where)
        if text is not None:
            if not isinstance(text, str):
                raise InvalidArgument(f"{where}.text must be a string", field=f"{where}.text")
            data = text.encode("utf-8")
        else:
            if not isinstance(data_b64, str):
                raise InvalidArgument(f"{where}.data_b64 must be a string", field=f"{where}.data_b64")
            try:
                data = base64.b64decode(data_b64, validate=True)
            except (binascii.Error, ValueError):
                raise InvalidArgument(f"{where}.data_b64 is not valid base64", field=f"{where}.data_b64") from None
        if not data:
            raise InvalidArgument(f"{where} has empty data", field=where)
        total += len(data)
        if total > MAX_MESSAGE_BYTES:
            raise InvalidArgument(
                f"message parts exceed {MAX_MESSAGE_BYTES} bytes in total",
                field="message.parts",
                limit=MAX_MESSAGE_BYTES,
            )
        parts.append(Part(media_type, data))
    return MessageInput(message_id, tuple(parts))


@dataclass(frozen=True, slots=True)
class Task:
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
    lease_timeout: int = 0
    # The artifact this task froze (at most one), by id within the task's workspace.
    artifact: str = ""
    # The published submission: {"id", "final_message", "published_at"}, set on completion.
    submission: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "workspace": self.workspace,
            "context": self.context,
            "state": self.state,
            "revision": self.revision,
            "message_count": self.message_count,
            "event_count": self.event_count,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "lease_timeout_seconds": self.lease_timeout,
        }
        if self.artifact:
            out["artifact"] = self.artifact
        if self.submission:
            out["submission"] = dict(self.submission)
        return out

    def evolve(self, **changes: Any) -> Task:
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class Message:
    task: str
    id: str
    sequence: int
    author: str  # caller | agent
    parts: tuple[Part, ...]
    created_at: str

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "sequence": self.sequence,
            "author": self.author,
            "parts": [_render_part(p) for p in self.parts],
            "created_at": self.created_at,
        }


def _render_part(part: Part) -> dict[str, Any]:
    from dovecote.platform.media import is_textual

    if part.remote:
        return {"media_type": part.media_type, "sha256": part.sha256, "size": part.size}
    if is_textual(part.media_type):
        try:
            return {"media_type": part.media_type, "text": part.data.decode("utf-8")}
        except UnicodeDecodeError:
            pass
    return part.to_json()


@dataclass(frozen=True, slots=True)
class Event:
    task: str
    sequence: int
    type: str
    state: str
    revision: int
    occurred_at: str
    message: str = ""
    submission: str = ""
    artifact: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sequence": self.sequence,
            "type": self.type,
            "state": self.state,
            "revision": self.revision,
            "occurred_at": self.occurred_at,
        }
        if self.message:
            out["message"] = self.message
        if self.submission:
            out["submission"] = self.submission
        if self.artifact:
            out["artifact"] = self.artifact
        return out


@dataclass(frozen=True, slots=True)
class Grant:
    task: str
    worker: str
    fence: int
    granted_at: str


@dataclass(frozen=True, slots=True)
class Receipt:
    """The durable idempotency receipt of one committed command, keyed by (authority, id)."""

    authority: str
    id: str
    kind: str
    digest: str
    status: int
    result: dict[str, Any] = field(default_factory=dict)


def intent_digest(kind: str, command: dict[str, Any]) -> str:
    """SHA-256 of a canonical encoding of {kind, command}: sorted keys, no whitespace, UTF-8."""
    canonical = json.dumps(
        {"kind": kind, "command": command}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def assignment_json(task: Task, worker: str, fence: int, granted_at: str) -> dict[str, Any]:
    return {
        "task": task.to_json(),
        "fence": fence,
        "worker": worker,
        "granted_at": granted_at,
        "heartbeat_at": task.heartbeat_at or granted_at,
    }


def lease_deadline(task: Task) -> str | None:
    """When the current lease expires if it stays silent, or None (unleased, or no timeout)."""
    if not task.owner or task.lease_timeout <= 0 or not task.heartbeat_at:
        return None
    from datetime import datetime, timedelta

    from dovecote.platform.clock import rfc3339

    seen = datetime.fromisoformat(task.heartbeat_at.replace("Z", "+00:00"))
    return rfc3339(seen + timedelta(seconds=task.lease_timeout))


def expiry_shard(authority: str, task_id: str) -> int:
    return int(hashlib.sha256(f"{authority}#{task_id}".encode()).hexdigest()[:8], 16) % EXPIRY_SHARDS


# A page of messages stops before its parts pass this many bytes (inline parts; remote ones are URLs),
# so a page stays far below the 6 MB Lambda response limit whatever `limit` asks for.
MESSAGE_PAGE_BYTES = 4 * 1024 * 1024


def task_violations(task: Task) -> list[str]:
    """The aggregate's invariants (SEMANTICS §2); a non-empty answer means the store is corrupt."""
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


# ---- artifacts, workspace heads, apply receipts (SEMANTICS §2) ---------------------------------------

ARTIFACT_DEFAULT_MAX = 16 * 1024 * 1024
# GET artifact answers a payload up to this size inline (read back and checked against its digest);
# a larger one comes as a presigned download_url.
ARTIFACT_INLINE_ANSWER = 4 * 1024 * 1024
ARTIFACT_HARD_MAX = 64 * 1024 * 1024
MAX_REVISION_BYTES = 512
MAX_RECEIPT_CODE_BYTES = 128
MAX_RECEIPT_MESSAGE_BYTES = 4096
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
DECISIONS = ("success", "conflict", "rejected", "indeterminate")
ARTIFACT_STATES = ("frozen", "published", "discarded")


def canonical_digest(value: dict[str, Any]) -> str:
    """`sha256:` of a canonical JSON encoding (sorted keys, no whitespace, UTF-8)."""
    encoded = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return "sha256:" + hashlib.sha256(encoded).hexdigest()


def result_revision(base: str, artifact_id: str, payload_digest: str) -> str:
    """The workspace revision an artifact produces: {base, surface "agent", artifact, payload}."""
    return canonical_digest({"base": base, "surface": "agent", "artifact": artifact_id, "payload": payload_digest})


@dataclass(frozen=True, slots=True)
class Artifact:
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
        return canonical_digest(
            {
                "workspace": self.workspace,
                "artifact": self.id,
                "task": self.task,
                "base": self.base_revision,
                "result": self.result_revision,
                "payload": self.payload_digest,
                "size": self.payload_size,
                "media_type": self.media_type,
            }
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "task": self.task,
            "workspace": self.workspace,
            "state": self.state,
            "base_revision": self.base_revision,
            "result_revision": self.result_revision,
            "digest": self.digest,
            "payload_digest": self.payload_digest,
            "payload_size": self.payload_size,
            "media_type": self.media_type,
            "frozen_at": self.frozen_at,
        }
        if self.published_at:
            out["published_at"] = self.published_at
        if self.discarded_at:
            out["discarded_at"] = self.discarded_at
        return out


@dataclass(frozen=True, slots=True)
class WorkspaceHead:
    authority: str
    workspace: str
    confirmed_revision: str
    updated_at: str

    def to_json(self) -> dict[str, Any]:
        return {
            "workspace": self.workspace,
            "confirmed_revision": self.confirmed_revision,
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True, slots=True)
class ApplyReceipt:
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
        out: dict[str, Any] = {
            "id": self.id,
            "artifact": self.artifact,
            "artifact_digest": self.artifact_digest,
            "base_revision": self.base_revision,
            "result_revision": self.result_revision,
            "decision": self.decision,
            "recorded_at": self.recorded_at,
        }
        for name in ("observed_revision", "code", "message"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        return out


def gate_revision(value: Any, field_name: str, *, required: bool = True) -> str:
    """A workspace revision: an opaque, non-empty string of at most 512 bytes, no control characters."""
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{field_name} must be a non-empty string", field=field_name)
    if len(value.encode("utf-8")) > MAX_REVISION_BYTES:
        raise InvalidArgument(f"{field_name} is longer than {MAX_REVISION_BYTES} bytes", field=field_name)
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InvalidArgument(f"{field_name} must not contain control characters", field=field_name)
    return value


def gate_digest(value: Any, field_name: str) -> str:
    if not isinstance(value, str) or not DIGEST.fullmatch(value):
        raise InvalidArgument(f"{field_name} must be sha256: followed by 64 lowercase hex digits", field=field_name)
    return value


@dataclass(frozen=True, slots=True)
class PayloadInput:
    """An artifact payload as it arrives: inline bytes, or the digest of a presigned upload."""

    media_type: str
    data: bytes | None = None
    upload_sha256: str = ""

    @property
    def digest(self) -> str:
        return "sha256:" + (hashlib.sha256(self.data).hexdigest() if self.data is not None else self.upload_sha256)


def gate_payload(raw: Any, max_bytes: int) -> PayloadInput:
    if not isinstance(raw, dict):
        raise InvalidArgument(
            "payload must be an object {media_type, text | data_b64 | upload_sha256}", field="payload"
        )
    media_type = raw.get("media_type")
    if not isinstance(media_type, str):
        raise InvalidArgument("payload.media_type is required", field="payload.media_type")
    validate_media_type(media_type, field="payload.media_type")
    forms = [k for k in ("text", "data_b64", "upload_sha256") if raw.get(k) is not None]
    if len(forms) != 1:
        raise InvalidArgument("payload needs exactly one of text, data_b64 or upload_sha256", field="payload")
    unknown = set(raw) - {"media_type", "text", "data_b64", "upload_sha256"}
    if unknown:
        raise InvalidArgument(f"payload.{sorted(unknown)[0]} is not a payload field", field="payload")
    if forms[0] == "upload_sha256":
        digest = raw["upload_sha256"]
        if not isinstance(digest, str) or not re.fullmatch(r"(sha256:)?[0-9a-f]{64}", digest):
            raise InvalidArgument(
                "payload.upload_sha256 must be 64 lowercase hex digits", field="payload.upload_sha256"
            )
        return PayloadInput(media_type, upload_sha256=digest.removeprefix("sha256:"))
    if forms[0] == "text":
        if not isinstance(raw["text"], str):
            raise InvalidArgument("payload.text must be a string", field="payload.text")
        data = raw["text"].encode("utf-8")
    else:
        if not isinstance(raw["data_b64"], str):
            raise InvalidArgument("payload.data_b64 must be a string", field="payload.data_b64")
        if len(raw["data_b64"]) > (max_bytes * 4) // 3 + 4:
            raise PayloadTooLarge(f"artifact payloads are limited to {max_bytes} bytes", limit=max_bytes)
        try:
            data = base64.b64decode(raw["data_b64"], validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgument("payload.data_b64 is not valid base64", field="payload.data_b64") from None
    if len(data) > max_bytes:
        raise PayloadTooLarge(f"artifact payloads are limited to {max_bytes} bytes", size=len(data), limit=max_bytes)
    return PayloadInput(media_type, data=data)
