"""The mapping between A2A 1.0's objects (a2a-sdk's protobuf types) and Dovecote's tasks. Pure.

- Task.id, contextId: the task id (server-generated), its context.
- TASK_STATE_*: the seven Dovecote states, name for name (STATES).
- ROLE_USER, ROLE_AGENT: the message authors caller, agent.
- Message.messageId, metadata, extensions, referenceTaskIds: the message metadata's `a2a` object
  (the Dovecote message id is the server's own: A2A clients repeat messageIds).
- Part text / raw / url / data: a message part (the text; the bytes; a URL part; the JSON as its
  compact text, application/json unless A2A names another type), with its mediaType and filename.
  What a Dovecote part cannot hold is in the message metadata, `a2a.parts` (one hint per part, with
  `a2a.partsVersion: 2`, written only when some part needs one): `kind` when the stored part does not
  imply it (a URL part is url; bytes Dovecote renders as text are text; other bytes are raw: so a
  data part, or a raw part of a textual type, says its kind), `mediaType: ""` when A2A gave none
  (Dovecote's part then has a default type), and the part's A2A `metadata`. Messages stored before
  parts had filenames and URLs hold the first convention (every part's kind, filename and mediaType
  in `a2a.parts`, no version; a URL as a text/uri-list part) and read back as they did.
- Task.status.timestamp: updated_at. Task.history: the messages, oldest first (historyLength: the
  last N). Task.status.message: the agent's message that goes with the state.
- Task.artifacts: the published artifact, one part by its media type, or, for ARTIFACT_MEDIA_TYPE,
  the A2A Artifact its payload holds.

A worker answers in A2A terms through the same conventions: a URL or a filename is a part's own,
its message metadata `a2a.parts` (with `a2a.partsVersion: 2`) gives the hints above, and
`a2a.messageResponse: true` on its final message makes a blocking SendMessage answer that Message
instead of the Task (a Message-only answer, as the spec allows).
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any, NamedTuple

from a2a.types import Artifact, Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf import json_format

from dovecote.a2a.errors import error
from dovecote.platform import jsonvalues
from dovecote.platform.media import text_of
from dovecote.tasks.model import Event, TaskView
from dovecote.tasks.model import Part as StoredPart

if TYPE_CHECKING:
    from dovecote.tasks.artifacts import ArtifactRead
    from dovecote.tasks.reads import MessageRead

# The message metadata key under which A2A's own message fields are kept.
A2A_KEY = "a2a"
# The metadata key (of a Part, a Message or an Artifact) that marks what a read could not serve as
# stored (a number protobuf JSON cannot hold, an artifact that is no A2A Artifact), and how it served it.
UNREPRESENTABLE = "dovecote.unrepresentable"
# The metadata key (of a Task or an Artifact) that says what an answer left out, or served by URL, to
# stay within its size bound.
TRUNCATED = "dovecote.truncated"
# Every A2A answer stays within this many bytes (by `weight`), as /v1 keeps its pages within 4 MiB:
# far below Lambda's 6 MB response limit, with room for the envelope.
ANSWER_BYTES = 4 * 1024 * 1024
# An artifact payload of this type is an A2A Artifact in protobuf JSON (its artifactId is Dovecote's).
ARTIFACT_MEDIA_TYPE = "application/a2a-artifact+json"
URL_MEDIA_TYPE = "text/uri-list"  # how the first convention stored a URL part (read only)
# The message metadata's `a2a.partsVersion` when `a2a.parts` holds hints (this module's docstring).
PARTS_VERSION = 2
DATA_MEDIA_TYPE = "application/json"
TEXT_MEDIA_TYPE = "text/plain"
RAW_MEDIA_TYPE = "application/octet-stream"
# Media types a message part may declare (the agent card's defaultInputModes); any other is
# ContentTypeNotSupported. Compared by essence (no parameters), case-insensitively.
INPUT_MODES = (
    "text/plain",
    "text/markdown",
    "text/csv",
    "text/html",
    "application/json",
    "application/octet-stream",
    "application/pdf",
    "image/png",
    "image/jpeg",
)
OUTPUT_MODES = INPUT_MODES

STATES: dict[str, TaskState] = {
    "submitted": TaskState.TASK_STATE_SUBMITTED,
    "working": TaskState.TASK_STATE_WORKING,
    "input_required": TaskState.TASK_STATE_INPUT_REQUIRED,
    "completed": TaskState.TASK_STATE_COMPLETED,
    "canceled": TaskState.TASK_STATE_CANCELED,
    "failed": TaskState.TASK_STATE_FAILED,
    "rejected": TaskState.TASK_STATE_REJECTED,
}
DOVECOTE_STATES = {a2a: dovecote for dovecote, a2a in STATES.items()}
ROLES = {"caller": Role.ROLE_USER, "agent": Role.ROLE_AGENT}
# A blocking SendMessage returns once the task is in one of these: terminal, or interrupted.
SETTLED = frozenset({"input_required", "completed", "canceled", "failed", "rejected"})


class PartBody(NamedTuple):
    """A part as the message's rule (tasks/inputs.py `message`) reads one, the edge's PartIn alike."""

    media_type: str | None = None
    text: str | None = None
    data_b64: str | None = None
    data: Any = None
    url: str | None = None
    filename: str | None = None


class MessageBody(NamedTuple):
    id: str
    parts: tuple[PartBody, ...]
    metadata: dict[str, Any] | None = None


def essence(media_type: str) -> str:
    return media_type.split(";", 1)[0].strip().lower()


# ---- A2A → Dovecote ------------------------------------------------------------------------------------


def check_media_type(media_type: str, where: str) -> None:
    if media_type and essence(media_type) not in INPUT_MODES:
        raise error(
            "CONTENT_TYPE_NOT_SUPPORTED",
            f"{where}.mediaType {media_type!r} is not supported (the agent card's defaultInputModes are)",
            mediaType=media_type,
        )


def message_body(message: Message, message_id: str) -> MessageBody:
    """An A2A Message as the body of a Dovecote message (what the message's rule, tasks/inputs.py
    `message`, takes): each part as a Dovecote part (text, bytes, JSON or URL, with its filename), and
    what Dovecote's parts cannot say in the metadata. Refuses what Dovecote cannot keep faithfully
    (ContentTypeNotSupported, InvalidParams)."""
    if not message.message_id:
        raise error("INVALID_PARAMS", "message.messageId is required")
    if message.role not in (Role.ROLE_USER, Role.ROLE_UNSPECIFIED):
        known = message.role in Role.values()
        raise error(
            "INVALID_PARAMS",
            "a client's message has role ROLE_USER",
            role=Role.Name(message.role) if known else str(message.role),
        )
    if not message.parts:
        raise error("INVALID_PARAMS", "message.parts must hold at least one part")
    parts: list[PartBody] = []
    hints: list[dict[str, Any]] = []
    for i, part in enumerate(message.parts):
        stored, hint = _part_body(part, f"message.parts[{i}]")
        parts.append(stored)
        hints.append(hint)
    a2a: dict[str, Any] = {"messageId": message.message_id}
    if any(hints):
        a2a["parts"], a2a["partsVersion"] = hints, PARTS_VERSION
    if message.HasField("metadata"):
        a2a["metadata"] = json_format.MessageToDict(message.metadata)
    if message.extensions:
        a2a["extensions"] = list(message.extensions)
    if message.reference_task_ids:
        a2a["referenceTaskIds"] = list(message.reference_task_ids)
    return MessageBody(message_id, tuple(parts), {A2A_KEY: a2a})


def _part_body(part: Part, where: str) -> tuple[PartBody, dict[str, Any]]:
    """A part as the message's rule takes it, and its hint: what the Dovecote part cannot hold."""
    content = part.WhichOneof("content")
    check_media_type(part.media_type, where)
    filename = part.filename or None
    stored: PartBody
    if content == "text":
        stored = PartBody(part.media_type or TEXT_MEDIA_TYPE, text=part.text, filename=filename)
    elif content == "raw":
        raw = base64.b64encode(part.raw).decode()
        stored = PartBody(part.media_type or RAW_MEDIA_TYPE, data_b64=raw, filename=filename)
    elif content == "url":
        stored = PartBody(part.media_type or RAW_MEDIA_TYPE, url=part.url, filename=filename)
    elif content == "data":
        # A protobuf Value may be null, which the rule's `data` form refuses: its JSON text instead.
        value = json_format.MessageToDict(part.data)
        text = json.dumps(value, **_COMPACT)
        stored = PartBody(part.media_type or DATA_MEDIA_TYPE, text=text, filename=filename)
    else:
        raise error("INVALID_PARAMS", f"{where} has no content: one of text, raw, url or data")
    hint: dict[str, Any] = {}
    data = stored.text.encode("utf-8") if stored.text is not None else base64.b64decode(stored.data_b64 or "")
    if content != _implied_kind(stored.media_type or "", stored.url, data):
        hint["kind"] = content
    if not part.media_type:
        hint["mediaType"] = ""  # A2A gave none: the stored one is Dovecote's default
    if part.HasField("metadata"):
        hint["metadata"] = json_format.MessageToDict(part.metadata)
    return stored, hint


_COMPACT: dict[str, Any] = {"ensure_ascii": False, "separators": (",", ":")}


def _implied_kind(media_type: str, url: str | None, data: bytes) -> str:
    """The A2A content a stored part reads back as without a hint: a URL part is a url; bytes that
    Dovecote renders as text (a textual media type, UTF-8) are text; other bytes are raw."""
    if url:
        return "url"
    return "text" if text_of(media_type, data) is not None else "raw"


# ---- Dovecote → A2A ------------------------------------------------------------------------------------


def a2a_of(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """The A2A fields a message's metadata keeps (empty for a message written without them)."""
    found = (metadata or {}).get(A2A_KEY)
    return found if isinstance(found, dict) else {}


def message(read: MessageRead, task_id: str, context_id: str) -> Message:
    """A Dovecote message (as the task service reads it) as an A2A Message."""
    record = read.message
    a2a = a2a_of(record.metadata)
    out = Message(
        message_id=str(a2a.get("messageId") or record.id),
        context_id=context_id,
        task_id=task_id,
        role=ROLES.get(record.author, Role.ROLE_UNSPECIFIED),
    )
    found = a2a.get("parts")
    hints: list[Any] = found if isinstance(found, list) else []
    # Hints without the version are the first convention (kind, filename, mediaType of every part,
    # a URL stored as text/uri-list), kept readable for the messages stored with it.
    read_part = part if a2a.get("partsVersion") == PARTS_VERSION or not hints else _legacy_part
    for i, (stored, download_url) in enumerate(zip(record.parts, read.download_urls, strict=True)):
        hint = hints[i] if i < len(hints) and isinstance(hints[i], dict) else {}
        out.parts.append(read_part(stored, download_url, hint))
    if isinstance(a2a.get("metadata"), dict):
        held_into(out.metadata, a2a["metadata"], "metadata")
    for name, target in (("extensions", out.extensions), ("referenceTaskIds", out.reference_task_ids)):
        values = a2a.get(name)
        if isinstance(values, list):
            target.extend(str(v) for v in values)
    return out


def part(stored: StoredPart, download_url: str, hint: dict[str, Any]) -> Part:
    """One stored part (bytes, a url, or one kept in S3 past the inline size, with its presigned
    `download_url`) as an A2A Part. Its hint (from the message metadata) gives its A2A kind where the
    stored part does not imply it, an A2A mediaType of "" when A2A gave none, and the part's A2A
    metadata."""
    media_type = stored.media_type
    a2a_media_type = str(hint["mediaType"]) if isinstance(hint.get("mediaType"), str) else media_type
    out = Part()
    content = hint.get("kind") or _implied_kind(media_type, stored.url, stored.data)
    if download_url:
        # Kept in S3 past the inline size: the client fetches it by its presigned URL.
        out.url = download_url
    elif stored.url:
        out.url = stored.url
    elif content == "data":
        unheld = _parse_data(stored.data, out)
        if unheld is not None:
            out.raw, a2a_media_type = stored.data, media_type
            if unheld:
                out.metadata.update({UNREPRESENTABLE: unheld + "; served as its bytes"})
    elif content == "text":
        out.text = stored.data.decode("utf-8", "replace")
    else:
        out.raw = stored.data
    if a2a_media_type:
        out.media_type = a2a_media_type
    return _named(out, stored.filename, hint.get("metadata"))


def _parse_data(data: bytes, out: Part) -> str | None:
    """The stored bytes as JSON into the part's data: None when they are, else why not ("" when
    they are not JSON at all, the problem when they are JSON protobuf cannot hold: NaN, Infinity,
    an integer beyond a double). Either way the caller keeps them as raw bytes."""
    try:
        value = json.loads(data)
    except ValueError:
        return ""
    unheld = jsonvalues.problem(value, "data")
    if unheld:
        return unheld
    try:
        json_format.ParseDict(value, out.data)
    except (ValueError, json_format.ParseError):
        return ""
    return None


def held_into(target: Any, value: dict[str, Any], what: str) -> None:
    """`value` into a protobuf Struct (an A2A `metadata`), or, when it holds a number protobuf JSON
    cannot (written before the gates refused them, or by a path that never met one), only the mark
    that says so: the read answers the rest, never fails on it."""
    unheld = jsonvalues.problem(value, what)
    if unheld:
        target.update({UNREPRESENTABLE: unheld + "; left out"})
        return
    target.update(value)


def _named(out: Part, filename: Any, metadata: Any) -> Part:
    """The part with its filename and its A2A metadata, where they are given."""
    if filename:
        out.filename = str(filename)
    if isinstance(metadata, dict):
        held_into(out.metadata, metadata, "metadata")
    return out


def _legacy_part(stored: StoredPart, download_url: str, kind: dict[str, Any]) -> Part:
    """A part of a message stored under the first convention: its A2A kind, filename, mediaType and
    metadata all in the message metadata, a URL as a text/uri-list part."""
    media_type = stored.media_type
    out = Part()
    as_text = not stored.url and not stored.remote and text_of(media_type, stored.data) is not None
    content = kind.get("kind") or ("text" if as_text else "raw")
    if download_url:
        out.url = download_url
        out.media_type = str(kind.get("mediaType") or media_type)
    elif content == "url":
        out.url = stored.data.decode("utf-8", "replace")
        if kind.get("mediaType"):
            out.media_type = str(kind["mediaType"])
    elif content == "data":
        unheld = _parse_data(stored.data, out)
        if unheld is not None:
            out.raw = stored.data
            out.media_type = media_type
            if unheld:
                out.metadata.update({UNREPRESENTABLE: unheld + "; served as its bytes"})
        if kind.get("mediaType"):
            out.media_type = str(kind["mediaType"])
    elif content == "text":
        out.text = stored.data.decode("utf-8", "replace")
        if kind.get("mediaType") or not kind:
            out.media_type = str(kind.get("mediaType") or media_type)
    else:
        out.raw = stored.data
        out.media_type = media_type
    return _named(out, kind.get("filename"), kind.get("metadata"))


def artifact(read: ArtifactRead) -> Artifact:
    """A published Dovecote artifact as an A2A Artifact: the A2A Artifact its payload holds (for
    ARTIFACT_MEDIA_TYPE), else one part by its media type: text/*, JSON as data, bytes, or the
    presigned URL of a payload too large to answer inline. A payload of ARTIFACT_MEDIA_TYPE that is
    no A2A Artifact protobuf can hold is one part of its bytes, the artifact marked (UNREPRESENTABLE):
    a worker's mistake never fails the task's reads, or every page of a list that shows it."""
    artifact_id, media_type = read.artifact.id, read.artifact.media_type
    data = read.data or b""
    out = Artifact(artifact_id=artifact_id, name=artifact_id)
    if essence(media_type) == ARTIFACT_MEDIA_TYPE and read.download_url is None:
        unheld = _parse_artifact(data, out)
        if unheld is None:
            out.artifact_id = artifact_id
            return out
        out = Artifact(artifact_id=artifact_id, name=artifact_id)
        out.parts.append(Part(raw=data, media_type=media_type))
        out.metadata.update({UNREPRESENTABLE: f"the payload is not an A2A Artifact ({unheld}); served as its bytes"})
        return out
    text = text_of(media_type, data) if read.download_url is None else None
    if read.download_url:
        out.parts.append(Part(url=read.download_url, media_type=media_type))
    elif essence(media_type) == DATA_MEDIA_TYPE:
        out.parts.append(part(StoredPart(media_type, data), "", {"kind": "data", "mediaType": ""}))
    elif essence(media_type).startswith("text/") and text is not None:
        out.parts.append(Part(text=text, media_type=media_type))
    else:
        out.parts.append(Part(raw=data, media_type=media_type))
    return out


def _parse_artifact(data: bytes, out: Artifact) -> str | None:
    """The payload as an A2A Artifact into `out`: None when it is one, else why it is not."""
    try:
        value = json.loads(data)
    except ValueError as exc:
        return f"not JSON: {str(exc)[:200]}"
    unheld = jsonvalues.problem(value, "artifact")
    if unheld:
        return unheld
    try:
        json_format.ParseDict(value, out, ignore_unknown_fields=True)
    except (ValueError, json_format.ParseError) as exc:
        return str(exc)[:200]
    return None


def status_message(messages: list[MessageRead], state: str) -> MessageRead | None:
    """The agent's message that goes with the current state (its question, or its last word), or None."""
    if state in ("submitted", "working") or not messages:
        return None
    last = messages[-1]
    return last if last.message.author == "agent" else None


def reason_message(task_id: str, context_id: str, sequence: int, reason: str) -> Message:
    """The worker's reason for failing (the task_failed event's, tasks/inputs.py bounds it) as the
    agent's word on the failed status: A2A carries a status's explanation in its message. Its id is
    the event's, so a replayed or resumed stream, every retry of a notification and GetTask send
    the same."""
    return Message(
        message_id=f"{task_id}:event:{sequence}",
        context_id=context_id,
        task_id=task_id,
        role=Role.ROLE_AGENT,
        parts=[Part(text=reason)],
    )


def task(
    record: TaskView,
    messages: list[MessageRead],
    artifacts: list[Artifact],
    *,
    history_length: int | None,
    with_artifacts: bool = True,
    room: int | None = None,
    failure: Event | None = None,
) -> Task:
    """A Dovecote task (as the service answers it, its messages oldest first, its published artifact)
    as an A2A Task. With `room` (bytes, by `weight`), the history keeps the latest messages that fit.
    `failure`: a failed task's task_failed event, whose reason (when the worker gave one) is the
    status's message, as on the task's stream. `history_length` trims the history, never the status:
    `messages` holds at least the last one."""
    task_id, context_id = record.id, record.context
    status = TaskStatus(state=STATES[record.state])
    status.timestamp.FromJsonString(record.updated_at)
    current = status_message(messages, record.state)
    if failure is not None and failure.reason:  # why it failed, not the agent's earlier word
        status.message.CopyFrom(reason_message(task_id, context_id, failure.sequence, failure.reason))
    elif current is not None:
        status.message.CopyFrom(message(current, task_id, context_id))
    out = Task(id=task_id, context_id=context_id, status=status)
    if with_artifacts:
        out.artifacts.extend(artifacts)
    shown = messages if history_length is None else (messages[-history_length:] if history_length > 0 else [])
    history = [message(m, task_id, context_id) for m in shown]
    if room is not None:
        # The latest messages that fit in what the answer has left; the older ones are left out, marked.
        room -= weight(out)
        kept = 0
        while kept < len(history) and weight(history[-1 - kept]) <= room:
            room -= weight(history[-1 - kept])
            kept += 1
        if kept < len(history):
            out.metadata.update(
                {
                    TRUNCATED: f"history: the {len(history) - kept} oldest of {len(history)} messages are left out "
                    f"(an A2A answer is at most {ANSWER_BYTES} bytes); ask for fewer with historyLength"
                }
            )
        history = history[len(history) - kept :]
    out.history.extend(history)
    return out


def weight(value: Any) -> int:
    """What `value` (a protobuf message) adds to an answer, in bytes as Lambda returns it: its
    protobuf JSON (UTF-8) inside the answer's body, a JSON string in Lambda's response, where each
    quote and backslash is escaped once more."""
    text = json.dumps(as_json(value), ensure_ascii=False)
    return len(text.encode("utf-8")) + text.count('"') + text.count("\\")


def answers_with_message(messages: list[MessageRead], state: str) -> bool:
    """The worker's final message asks to be the answer itself (a Message-only answer)."""
    current = status_message(messages, state)
    return (
        state == "completed" and current is not None and a2a_of(current.message.metadata).get("messageResponse") is True
    )


def as_json(value: Any) -> dict[str, Any]:
    """Protobuf JSON: camelCase, enum names, RFC 3339 timestamps ending in Z, bytes as base64."""
    return dict(json_format.MessageToDict(value))
