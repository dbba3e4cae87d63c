"""Task commands as data: one frozen dataclass per command, and the one gate that builds it from a
request body. The HTTP handler (functions/tasks_api) and the worker-event path both go through these
gates; service methods take the dataclasses, never a dict.

A gate checks in the order the service always has (docs/design/tasks.md#the-check-order), the
caller's role included: a request that is both unauthorized and malformed keeps the answer it
always had. The pydantic models at the edge describe the same rules for OpenAPI, built from the
constants here (patterns, bounds, enums); tests/unit/test_task_commands.py holds the two together.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeGuard
from urllib.parse import urlsplit

from dovecote.platform import jsonvalues
from dovecote.platform.errors import DomainError, Forbidden, InvalidArgument, PayloadTooLarge
from dovecote.platform.ids import check_id
from dovecote.platform.media import validate_media_type
from dovecote.platform.principal import Principal
from dovecote.tasks import machine
from dovecote.tasks.limits import (
    DIGEST,
    FILENAME_CHARS,
    HOST_MISSING,
    MAX_CLAIM_WAIT,
    NOT_FILENAMES,
    PART_FORMS,
    REVISION_CHARS,
    SHA256_HEX,
    URL_CHARS,
    WORKER_EVENT_KINDS,
)
from dovecote.tasks.model import (
    DECISIONS,
    MAX_ACCEPT_TIMEOUT,
    MAX_COUNTER,
    MAX_FAIL_REASON_BYTES,
    MAX_FENCE,
    MAX_FILENAME_CHARS,
    MAX_LEASE_TIMEOUT,
    MAX_MESSAGE_BYTES,
    MAX_METADATA_BYTES,
    MAX_PARTS,
    MAX_RECEIPT_CODE_BYTES,
    MAX_RECEIPT_MESSAGE_BYTES,
    MAX_REVISION_BYTES,
    MAX_URL_CHARS,
    ApplyReceipt,
    MessageInput,
    Part,
    PayloadInput,
    intent_digest,
)

_SHA256_HEX, _DIGEST, _REVISION = re.compile(SHA256_HEX), re.compile(DIGEST), re.compile(REVISION_CHARS)
_FILENAME, _URL, _HOST_MISSING = re.compile(FILENAME_CHARS), re.compile(URL_CHARS), re.compile(HOST_MISSING)

_EVENT_FIELDS: dict[str, set[str]] = {
    "accept_task": set(),
    "reject_task": set(),
    "fail_task": {"reason"},
    "request_input": {"message"},
    "complete_task": {"message", "submission", "artifact"},
    "freeze_artifact": {"freeze"},
}
_EVENT_KNOWN = {
    "event_id",
    "kind",
    "task",
    "fence",
    "expected_revision",
    "message",
    "submission",
    "artifact",
    "freeze",
    "reason",
}
# The fields a kind may leave empty (every other field of its _EVENT_FIELDS is required).
_EVENT_OPTIONAL = {"artifact", "reason"}
# Domain error code → the worker event NACK code (docs/design/tasks.md#worker-events: fence exhausted is
# state_conflict).
# Any other error is not a deterministic rejection (an AWS failure): it settles nothing.
NACK_CODES = {
    "invalid_argument": "invalid",
    "payload_too_large": "invalid",
    "forbidden": "forbidden",
    "not_found": "not_found",
    "stale_lease": "stale_lease",
    "revision_conflict": "revision_conflict",
    "terminal_task": "state_conflict",
    "invalid_transition": "state_conflict",
    "lease_fence_exhausted": "state_conflict",
    "artifact_conflict": "state_conflict",
    "artifact_state": "state_conflict",
    "workspace_conflict": "state_conflict",
    "message_conflict": "command_conflict",
    "submission_conflict": "command_conflict",
    "idempotency_conflict": "command_conflict",
}


# ---- the commands -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateTask:
    command_id: str
    id: str
    workspace: str
    context: str
    message: MessageInput
    lease_timeout: int | None = None  # None: the deployment's default
    accept_timeout: int | None = None  # None: the deployment's default


@dataclass(frozen=True, slots=True)
class TaskCommand:
    """A command that moves a task through its state machine (machine.TRANSITIONS[KIND])."""

    KIND: ClassVar[str] = ""
    task: str
    command_id: str
    expected_revision: int


@dataclass(frozen=True, slots=True)
class Cancel(TaskCommand):
    KIND: ClassVar[str] = "cancel_task"


@dataclass(frozen=True, slots=True)
class Reply(TaskCommand):
    KIND: ClassVar[str] = "reply_task"
    message: MessageInput


@dataclass(frozen=True, slots=True)
class WorkerCommand(TaskCommand):
    """A worker's transition: it carries the lease generation it holds."""

    fence: int


@dataclass(frozen=True, slots=True)
class Accept(WorkerCommand):
    KIND: ClassVar[str] = "accept_task"


@dataclass(frozen=True, slots=True)
class Reject(WorkerCommand):
    KIND: ClassVar[str] = "reject_task"


@dataclass(frozen=True, slots=True)
class Fail(WorkerCommand):
    KIND: ClassVar[str] = "fail_task"
    reason: str = ""  # why, in the worker's words (optional): kept on the task_failed event


@dataclass(frozen=True, slots=True)
class RequestInput(WorkerCommand):
    KIND: ClassVar[str] = "request_input"
    message: MessageInput


@dataclass(frozen=True, slots=True)
class Complete(WorkerCommand):
    KIND: ClassVar[str] = "complete_task"
    message: MessageInput
    submission: str
    artifact: str | None = None  # exactly the frozen artifact, or None when none was frozen


@dataclass(frozen=True, slots=True)
class Freeze(WorkerCommand):
    """freeze_artifact: what the artifact will be, known before the task is read (an uploaded
    payload's size comes from staging it)."""

    KIND: ClassVar[str] = "freeze_artifact"
    artifact_id: str
    base_revision: str
    payload: PayloadInput
    size: int

    def intent(self) -> dict[str, Any]:
        # The payload enters the command digest by its digest and type, never by its bytes.
        return {
            "artifact": self.artifact_id,
            "base": self.base_revision,
            "payload": self.payload.digest,
            "media_type": self.payload.media_type,
            "size": self.size,
        }


@dataclass(frozen=True, slots=True)
class Acquire:
    task: str
    command_id: str


@dataclass(frozen=True, slots=True)
class Claim:
    command_id: str
    wait_seconds: int = 0


@dataclass(frozen=True, slots=True)
class Fence:
    """Retire a lease generation: its owner releasing it, an admin, or the dispatcher."""

    task: str
    command_id: str
    fence: int


@dataclass(frozen=True, slots=True)
class Heartbeat:
    task: str
    fence: int


@dataclass(frozen=True, slots=True)
class CreateArtifactUpload:
    task: str
    size: int
    sha256: str  # hex, without its prefix
    fence: int


@dataclass(frozen=True, slots=True)
class RecordReceipt:
    """The caller's apply receipt as proposed: in its authority, not yet recorded (no time)."""

    command_id: str
    receipt: ApplyReceipt


@dataclass(frozen=True, slots=True)
class WorkerEvent:
    """One worker event delivery: the command it carries, or the deterministic refusal its gate found
    (a NACK, as data). `digest` is the event's as delivered: an exact retry is the same delivery."""

    delivery_id: str
    event_id: str
    digest: str
    command: WorkerCommand | None = None
    refusal: DomainError | None = None


# ---- field gates --------------------------------------------------------------------------------------


def worker_id(principal: Principal) -> str:
    principal.require("worker")
    if not principal.worker:
        raise Forbidden("worker commands need a token with a worker id")
    return principal.worker


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _expected_revision(body: dict[str, Any], *, create: bool) -> int:
    value = body.get("expected_revision", 0 if create else None)
    if not _is_int(value):
        raise InvalidArgument("expected_revision must be an integer", field="expected_revision")
    if create and value != 0:
        raise InvalidArgument("expected_revision must be 0 for create", field="expected_revision")
    if not create and not 0 < value <= MAX_COUNTER:
        raise InvalidArgument("expected_revision must be > 0", field="expected_revision")
    return int(value)


def _fence(body: dict[str, Any]) -> int:
    value = body.get("fence")
    if not _is_int(value) or not 0 < value <= MAX_FENCE:
        raise InvalidArgument("fence must be an integer between 1 and 2^63-1", field="fence")
    return int(value)


def _timeout(body: dict[str, Any], name: str, maximum: int) -> int | None:
    """`lease_timeout_seconds` or `accept_timeout_seconds`: absent (the default), or 0 (never) to
    `maximum` seconds."""
    if name not in body:
        return None
    value = body[name]
    if not _is_int(value) or not 0 <= value <= maximum:
        raise InvalidArgument(f"{name} must be an integer between 0 and {maximum}", field=name)
    return int(value)


def _wait_seconds(body: dict[str, Any]) -> int:
    value = body.get("wait_seconds", 0)
    if not _is_int(value) or not 0 <= value <= MAX_CLAIM_WAIT:
        raise InvalidArgument(f"wait_seconds must be an integer between 0 and {MAX_CLAIM_WAIT}", field="wait_seconds")
    return int(value)


def _bounded_text(value: Any, field_name: str, limit: int) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidArgument(f"{field_name} must be a string", field=field_name)
    if len(_utf8(value, field_name)) > limit:
        raise InvalidArgument(f"{field_name} is longer than {limit} bytes", field=field_name, limit=limit)
    return value


def gate_fail_reason(value: Any, field_name: str) -> str:
    """fail_task's optional reason: absent, or text of at most MAX_FAIL_REASON_BYTES in UTF-8 (valid
    Unicode; shown as text wherever it is shown, never as markup)."""
    return _bounded_text(value, field_name, MAX_FAIL_REASON_BYTES)


def gate_message(raw: Any) -> MessageInput:
    """The one gate for a message: id pattern, 1–32 parts, ≤ 2 MiB of bytes in total, and an
    optional metadata object of at most 16 KiB. Each part is exactly one of `text`, `data_b64`
    (non-empty), `data` (any JSON value but null: its compact JSON, media type application/json
    unless given) or `url` (a reference, no bytes), with a parseable media type and an optional
    filename."""
    if not isinstance(raw, dict):
        raise InvalidArgument("message must be an object {id, parts}", field="message")
    message_id = check_id(raw.get("id"), "message.id")
    parts_raw = raw.get("parts")
    if not isinstance(parts_raw, list) or not 1 <= len(parts_raw) <= MAX_PARTS:
        raise InvalidArgument(f"message.parts must hold 1 to {MAX_PARTS} parts", field="message.parts")
    parts: list[Part] = []
    total = 0
    for i, raw_part in enumerate(parts_raw):
        part = _gate_part(raw_part, f"message.parts[{i}]")
        total += len(part.data)
        if total > MAX_MESSAGE_BYTES:
            raise InvalidArgument(
                f"message parts exceed {MAX_MESSAGE_BYTES} bytes in total",
                field="message.parts",
                limit=MAX_MESSAGE_BYTES,
            )
        parts.append(part)
    return MessageInput(message_id, tuple(parts), gate_metadata(raw.get("metadata")))


DATA_MEDIA_TYPE = "application/json"  # a `data` part's media type unless it names one


def _gate_part(part: Any, where: str) -> Part:
    if not isinstance(part, dict):
        raise InvalidArgument(f"{where} must be an object", field=where)
    forms = [k for k in PART_FORMS if part.get(k) is not None]
    if len(forms) != 1:
        raise InvalidArgument(f"{where} needs exactly one of text, data_b64, data or url", field=where)
    form = forms[0]
    media_type = part.get("media_type", DATA_MEDIA_TYPE if form == "data" else None)
    if not isinstance(media_type, str):
        raise InvalidArgument(f"{where}.media_type is required", field=f"{where}.media_type")
    validate_media_type(media_type, field=f"{where}.media_type")
    filename = gate_filename(part.get("filename"), f"{where}.filename")
    value = part[form]
    if form == "url":
        return Part(media_type, b"", filename=filename, url=gate_url(value, f"{where}.url"))
    if form == "text":
        if not isinstance(value, str):
            raise InvalidArgument(f"{where}.text must be a string", field=f"{where}.text")
        data = _utf8(value, f"{where}.text")
    elif form == "data":
        unheld = jsonvalues.problem(value, f"{where}.data")
        if unheld:
            raise InvalidArgument(unheld, field=f"{where}.data")
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError):
            raise InvalidArgument(f"{where}.data is not a JSON value", field=f"{where}.data") from None
        data = _utf8(text, f"{where}.data")
    else:
        data = _base64(value, f"{where}.data_b64")
    if not data:
        raise InvalidArgument(f"{where} has empty data", field=where)
    return Part(media_type, data, filename=filename)


def _utf8(value: str, field_name: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: valid in JSON, not text
        raise InvalidArgument(f"{field_name} must be valid Unicode (no lone surrogate)", field=field_name) from None


def _short_string(value: Any, field_name: str, limit: int) -> str:
    """A string of valid Unicode, at most `limit` characters: what a filename and a URL share."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{field_name} must be a string", field=field_name)
    _utf8(value, field_name)
    if len(value) > limit:
        raise InvalidArgument(f"{field_name} is longer than {limit} characters", field=field_name, limit=limit)
    return value


def gate_filename(value: Any, field_name: str) -> str:
    """Absent, or 1–255 characters with no control character and no / or \\, and not . or .."""
    if value is None:
        return ""
    _short_string(value, field_name, MAX_FILENAME_CHARS)
    if not _FILENAME.fullmatch(value) or value in NOT_FILENAMES:
        raise InvalidArgument(
            f"{field_name} must be a file name: no control characters, no / or \\, not . or ..", field=field_name
        )
    return value


def gate_url(value: Any, field_name: str) -> str:
    """An absolute http(s) URL of at most 2,048 characters with a host, no whitespace or control
    characters, and one urllib.parse can split (it refuses, e.g., an unclosed IPv6 host). The one
    validator of a URL part, for /v1 and A2A alike."""
    _short_string(value, field_name, MAX_URL_CHARS)
    if not _URL.fullmatch(value) or _HOST_MISSING.match(value):
        raise InvalidArgument(
            f"{field_name} must be an absolute http(s) URL with a host, without whitespace or control characters",
            field=field_name,
        )
    try:
        urlsplit(value)
    except ValueError as exc:
        raise InvalidArgument(f"{field_name} is not a URL: {exc}", field=field_name) from None
    return value


def gate_metadata(value: Any) -> dict[str, Any]:
    """A message's metadata: absent, or a JSON object of at most MAX_METADATA_BYTES as canonical
    JSON, whose numbers every binding can carry (platform/jsonvalues.py). Stored and returned as
    given; the service never reads it."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidArgument("message.metadata must be an object", field="message.metadata")
    unheld = jsonvalues.problem(value, "message.metadata")
    if unheld:
        raise InvalidArgument(unheld, field="message.metadata")
    size = len(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise InvalidArgument(
            f"message.metadata is longer than {MAX_METADATA_BYTES} bytes as JSON",
            field="message.metadata",
            limit=MAX_METADATA_BYTES,
        )
    return value


def _base64(value: Any, field_name: str) -> bytes:
    if not isinstance(value, str):
        raise InvalidArgument(f"{field_name} must be a string", field=field_name)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgument(f"{field_name} is not valid base64", field=field_name) from None


def gate_revision(value: Any, field_name: str, *, required: bool = True) -> str:
    """A workspace revision: an opaque, non-empty string of at most 512 bytes, no control characters."""
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{field_name} must be a non-empty string", field=field_name)
    if len(value.encode("utf-8")) > MAX_REVISION_BYTES:
        raise InvalidArgument(f"{field_name} is longer than {MAX_REVISION_BYTES} bytes", field=field_name)
    if not _REVISION.fullmatch(value):
        raise InvalidArgument(f"{field_name} must not contain control characters", field=field_name)
    return value


def gate_digest(value: Any, field_name: str) -> str:
    if not isinstance(value, str) or not _DIGEST.fullmatch(value):
        raise InvalidArgument(f"{field_name} must be sha256: followed by 64 lowercase hex digits", field=field_name)
    return value


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
        if not isinstance(digest, str) or not _SHA256_HEX.fullmatch(digest):
            raise InvalidArgument(
                "payload.upload_sha256 must be 64 lowercase hex digits", field="payload.upload_sha256"
            )
        return PayloadInput(media_type, upload_sha256=digest.removeprefix("sha256:"))
    if forms[0] == "text":
        if not isinstance(raw["text"], str):
            raise InvalidArgument("payload.text must be a string", field="payload.text")
        data = raw["text"].encode("utf-8")
    else:
        if isinstance(raw["data_b64"], str) and len(raw["data_b64"]) > (max_bytes * 4) // 3 + 4:
            raise PayloadTooLarge(f"artifact payloads are limited to {max_bytes} bytes", limit=max_bytes)
        data = _base64(raw["data_b64"], "payload.data_b64")
    if len(data) > max_bytes:
        raise PayloadTooLarge(f"artifact payloads are limited to {max_bytes} bytes", size=len(data), limit=max_bytes)
    return PayloadInput(media_type, data=data)


# ---- the gate -------------------------------------------------------------------------------------------


# Stages an uploaded payload (authority, sha256, max bytes) and answers its size: see
# TaskStore.stage_artifact_upload.
StageUpload = Callable[[str, str, int], int]


class CommandGate:
    """One gate per command: a request body (and its path ids) in, a command out, or the first
    InvalidArgument / Forbidden / ... in the order of docs/design/tasks.md#the-check-order.
    `artifact_max` bounds payloads
    and uploads; `stage_upload` gives a freeze by upload its size (the upload is hashed and moved
    into place before the command, as its size is part of the artifact it commits)."""

    def __init__(self, *, artifact_max: int, stage_upload: StageUpload) -> None:
        self.artifact_max = artifact_max
        self._stage_upload = stage_upload

    # ---- caller ----------------------------------------------------------------------------------

    def create(self, principal: Principal, body: dict[str, Any]) -> CreateTask:
        principal.require("caller")
        command_id = check_id(body.get("command_id"), "command_id")
        task_id = check_id(body.get("id"), "id")
        workspace = check_id(body.get("workspace"), "workspace")
        context = check_id(body.get("context"), "context")
        _expected_revision(body, create=True)
        message = gate_message(body.get("message"))
        lease_timeout = _timeout(body, "lease_timeout_seconds", MAX_LEASE_TIMEOUT)
        accept_timeout = _timeout(body, "accept_timeout_seconds", MAX_ACCEPT_TIMEOUT)
        return CreateTask(command_id, task_id, workspace, context, message, lease_timeout, accept_timeout)

    def reply(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Reply:
        principal.require("caller")
        message = gate_message(body.get("message"))
        return Reply(*self._task_command(principal, Reply, task_id, body), message=message)

    def cancel(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Cancel:
        principal.require("caller")
        return Cancel(*self._task_command(principal, Cancel, task_id, body))

    # ---- worker transitions ----------------------------------------------------------------------

    def accept(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Accept:
        return Accept(*self._worker_command(principal, Accept, task_id, body))

    def reject(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Reject:
        return Reject(*self._worker_command(principal, Reject, task_id, body))

    def fail(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Fail:
        head = self._worker_command(principal, Fail, task_id, body)
        return Fail(*head, reason=gate_fail_reason(body.get("reason"), "reason"))

    def request_input(self, principal: Principal, task_id: str, body: dict[str, Any]) -> RequestInput:
        message = gate_message(body.get("message"))
        return RequestInput(*self._worker_command(principal, RequestInput, task_id, body), message=message)

    def complete(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Complete:
        submission = check_id(body.get("submission_id"), "submission_id")
        message = gate_message(body.get("message"))
        artifact = body.get("artifact_id")
        if artifact is not None:
            check_id(artifact, "artifact_id")
        head = self._worker_command(principal, Complete, task_id, body)
        return Complete(*head, message=message, submission=submission, artifact=artifact)

    def freeze(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Freeze:
        """freeze_artifact (worker, working, at most once per task): the artifact with its payload
        (inline, or a presigned upload committed by SHA-256)."""
        worker_id(principal)
        check_id(task_id, "task")
        artifact_id = check_id(body.get("artifact_id"), "artifact_id")
        base = gate_revision(body.get("expected_base_revision"), "expected_base_revision")
        payload = gate_payload(body.get("payload"), self.artifact_max)
        if payload.data is not None:
            size = len(payload.data)
        else:
            # Read no further than the maximum + 1 byte, hashed, and moved into place.
            size = self._stage_upload(principal.authority, payload.upload_sha256, self.artifact_max)
        head = self._worker_command(principal, Freeze, task_id, body)
        return Freeze(*head, artifact_id=artifact_id, base_revision=base, payload=payload, size=size)

    def _task_command(
        self, principal: Principal, command: type[TaskCommand], task_id: str, body: dict[str, Any]
    ) -> tuple[str, str, int]:
        """What every transition checks last, in this order: (worker id,) task, command id, revision."""
        if machine.TRANSITIONS[command.KIND].by == "worker":
            worker_id(principal)
        check_id(task_id, "task")
        command_id = check_id(body.get("command_id"), "command_id")
        return task_id, command_id, _expected_revision(body, create=False)

    def _worker_command(
        self, principal: Principal, command: type[WorkerCommand], task_id: str, body: dict[str, Any]
    ) -> tuple[str, str, int, int]:
        return (*self._task_command(principal, command, task_id, body), _fence(body))

    # ---- leases ------------------------------------------------------------------------------------

    def acquire(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Acquire:
        worker_id(principal)
        check_id(task_id, "task")
        return Acquire(task_id, check_id(body.get("command_id"), "command_id"))

    def claim(self, principal: Principal, body: dict[str, Any]) -> Claim:
        worker_id(principal)
        command_id = check_id(body.get("command_id"), "command_id")
        return Claim(command_id, _wait_seconds(body))

    def fence(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Fence:
        principal.require("worker")  # an admin may fence any lease of its authority
        check_id(task_id, "task")
        command_id = check_id(body.get("command_id"), "command_id")
        return Fence(task_id, command_id, _fence(body))

    def heartbeat(self, principal: Principal, task_id: str, body: dict[str, Any]) -> Heartbeat:
        worker_id(principal)
        check_id(task_id, "task")
        return Heartbeat(task_id, _fence(body))

    # ---- artifacts and receipts ----------------------------------------------------------------------

    def create_artifact_upload(self, principal: Principal, task_id: str, body: dict[str, Any]) -> CreateArtifactUpload:
        worker_id(principal)
        check_id(task_id, "task")
        size = body.get("size")
        if not _is_int(size) or not 0 < size <= self.artifact_max:
            raise InvalidArgument(f"size must be between 1 and {self.artifact_max}", field="size")
        sha = body.get("sha256")
        if not isinstance(sha, str) or not _SHA256_HEX.fullmatch(sha):
            raise InvalidArgument("sha256 must be 64 lowercase hex digits", field="sha256")
        return CreateArtifactUpload(task_id, int(size), sha.removeprefix("sha256:"), _fence(body))

    def record_apply_receipt(
        self, principal: Principal, workspace: str, artifact_id: str, body: dict[str, Any]
    ) -> RecordReceipt:
        principal.require("caller")
        check_id(workspace, "workspace")
        check_id(artifact_id, "artifact")
        command_id = check_id(body.get("command_id"), "command_id")
        receipt_id = check_id(body.get("receipt_id"), "receipt_id")
        digest = gate_digest(body.get("artifact_digest"), "artifact_digest")
        base = gate_revision(body.get("base_revision"), "base_revision")
        result = gate_revision(body.get("result_revision"), "result_revision")
        decision = body.get("decision")
        if decision not in DECISIONS:
            raise InvalidArgument(f"decision must be one of {', '.join(DECISIONS)}", field="decision")
        observed = gate_revision(body.get("observed_revision"), "observed_revision", required=False)
        if decision == "success" and observed != result:
            raise InvalidArgument("a success must observe the result revision", field="observed_revision")
        if decision == "conflict" and not observed:
            raise InvalidArgument("a conflict must name the observed revision", field="observed_revision")
        code = _bounded_text(body.get("code"), "code", MAX_RECEIPT_CODE_BYTES)
        message = _bounded_text(body.get("message"), "message", MAX_RECEIPT_MESSAGE_BYTES)
        proposed = ApplyReceipt(
            principal.authority,
            workspace,
            artifact_id,
            receipt_id,
            digest,
            base,
            result,
            str(decision),
            observed,
            code,
            message,
        )
        return RecordReceipt(command_id, proposed)

    # ---- worker events ---------------------------------------------------------------------------------

    def worker_event(self, principal: Principal, body: dict[str, Any]) -> WorkerEvent:
        """A delivery that is itself malformed raises (400); a refused event is a WorkerEvent with
        its refusal, which the service settles as a NACK; an AWS failure while staging raises."""
        worker = worker_id(principal)
        delivery_id = check_id(body.get("delivery_id"), "delivery_id")
        event = body.get("event")
        if not isinstance(event, dict):
            raise InvalidArgument("event must be an object", field="event")
        event_id = event.get("event_id") if isinstance(event.get("event_id"), str) else ""
        digest = intent_digest("worker_event", {"worker": worker, "event": event})
        try:
            if principal.role != "worker":
                # An admin token carrying a worker id may drive the task routes, but a worker's
                # outbox settles only under a worker token: deterministic, so a NACK.
                raise Forbidden("worker events settle only for worker tokens", role=principal.role)
            command = self._event_command(principal, event)
        except DomainError as exc:
            if exc.code not in NACK_CODES:
                raise
            return WorkerEvent(delivery_id, str(event_id), digest, refusal=exc)
        return WorkerEvent(delivery_id, str(event_id), digest, command=command)

    def _event_command(self, principal: Principal, event: dict[str, Any]) -> WorkerCommand:
        """The event's kind, every field the kind does not use empty (so no adapter can smuggle an
        ignored interpretation through), then the kind's own gate on the command body."""
        kind = event.get("kind")
        if kind not in WORKER_EVENT_KINDS:
            raise InvalidArgument(f"event.kind must be one of {', '.join(WORKER_EVENT_KINDS)}", field="event.kind")
        unknown = set(event) - _EVENT_KNOWN
        if unknown:
            raise InvalidArgument(f"event.{sorted(unknown)[0]} is not an event field", field="event")
        for name in ("message", "submission", "artifact", "freeze", "reason"):
            if name not in _EVENT_FIELDS[kind] and event.get(name) not in (None, "", {}):
                raise InvalidArgument(f"event.{name} must be empty for {kind}", field=f"event.{name}")
        for name in _EVENT_FIELDS[kind] - _EVENT_OPTIONAL:
            if event.get(name) in (None, "", {}):
                raise InvalidArgument(f"event.{name} is required for {kind}", field=f"event.{name}")
        task_id = check_id(event.get("task"), "event.task")
        artifact = (
            check_id(event["artifact"], "event.artifact") if kind == "complete_task" and event.get("artifact") else None
        )
        body: dict[str, Any] = {
            "command_id": event.get("event_id"),
            "expected_revision": event.get("expected_revision"),
            "fence": event.get("fence"),
        }
        if kind == "freeze_artifact":
            freeze = event["freeze"]
            if not isinstance(freeze, dict):
                raise InvalidArgument("event.freeze must be an object", field="event.freeze")
            body.update(
                artifact_id=freeze.get("artifact"),
                expected_base_revision=freeze.get("expected_base_revision"),
                payload=freeze.get("payload"),
            )
            return self.freeze(principal, task_id, body)
        message = gate_message(event["message"]) if kind in ("request_input", "complete_task") else None
        if kind == "complete_task":
            submission = check_id(event["submission"], "submission")
            head = self._worker_command(principal, Complete, task_id, body)
            assert message is not None
            return Complete(*head, message=message, submission=submission, artifact=artifact)
        if kind == "request_input":
            assert message is not None
            return RequestInput(*self._worker_command(principal, RequestInput, task_id, body), message=message)
        if kind == "fail_task":
            head = self._worker_command(principal, Fail, task_id, body)
            return Fail(*head, reason=gate_fail_reason(event.get("reason"), "event.reason"))
        command = {"accept_task": Accept, "reject_task": Reject}[kind]
        return command(*self._worker_command(principal, command, task_id, body))
