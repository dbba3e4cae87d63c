"""The generic transcript form read from a file, for `dovecote recall push` (`--format generic`, or
sniffed): a conversation of any tool, sent as `POST /v1/transcripts` takes the generic form
(`DovecoteClient.ingest_messages`). A file is either

- one JSON document, the request body itself: `{"session_id", "messages": [...], "source"?, "project"?}`;
- or JSON Lines, one message a line: `{"role", "text" | "content", "timestamp"?, "uuid"?, "kind"?,
  "parent_uuid"?, "subagent"?}`, with an optional first line `{"session_id"?, "source"?, "project"?}`
  (no `role`) for the whole session. `content` is the chat-completions spelling of `text`: a string,
  or a list of parts whose `text` are joined.

A message's `role` is user, assistant or system, its `kind` text (the default), tool or thinking.
What a file leaves out is filled in, the same way at every push so that a re-push replaces the same
session: `source` "generic"; `session_id` the file's name without its extension, with the first 8 hex
digits of the SHA-256 of its absolute path (two `chat.jsonl` in two folders are two sessions); a
message's `uuid` derived from the session and its line (or position); its `timestamp` the file's
modification time (UTC). The body is checked by the server's own gate
(`dovecote.recall.model.gate_ingest`) before it is sent, so a bad line is refused here, named by its
line number, and nothing of the file is sent.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

GENERIC = "generic"
DEFAULT_SOURCE = "generic"
HEADER_FIELDS = ("session_id", "source", "project")
MESSAGE_FIELDS = ("uuid", "role", "text", "timestamp", "kind", "parent_uuid", "subagent")
SESSION_ID = re.compile(r"[A-Za-z0-9._-]{1,100}")
_NAMESPACE = uuid.UUID("8f4d2c1e-6b3a-4e5f-9a7c-1d2e3f4a5b6c")  # the generic form's derived uuids


class GenericFormError(ValueError):
    """A file that is not the generic form, with the line it stops at (0: the file as a whole)."""

    def __init__(self, message: str, line: int = 0) -> None:
        super().__init__(message)
        self.line = line


def looks_generic(first: Any) -> bool:
    """Whether a file's first JSON value (its first line, or the whole document) is the generic form:
    a message line with a role and a text, a header line, or the request body itself. Claude Code and
    Codex lines carry `type` (or `sessionId`) and are never taken for it."""
    if not isinstance(first, dict) or "type" in first or "sessionId" in first:
        return False
    if isinstance(first.get("messages"), list):
        return True
    if "role" in first:
        return "text" in first or "content" in first
    return bool(first) and set(first) <= set(HEADER_FIELDS)


def _text(value: Any, line: int) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [p.get("text") for p in value if isinstance(p, dict)] if all(isinstance(p, dict) for p in value) else []
        if len(parts) == len(value) and all(isinstance(p, str) for p in parts):
            return "\n".join(str(p) for p in parts)
    raise GenericFormError(f"line {line}: content must be a string, or a list of parts with a text each", line)


def _session_id(path: Path) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]", "-", path.name.split(".", 1)[0]).strip("-.") or "session"
    digest = hashlib.sha256(str(path.absolute()).encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{stem[:80]}-{digest}"


def _records(data: bytes) -> tuple[dict[str, Any] | None, list[tuple[int, dict[str, Any]]]]:
    """(the document when the file is one JSON body, else None; the JSON Lines with their numbers)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GenericFormError(f"the file is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict) and isinstance(whole.get("messages"), list):
        return whole, []
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise GenericFormError(f"line {number} is not JSON ({exc})", number) from None
        if not isinstance(value, dict):
            raise GenericFormError(f"line {number} is not a JSON object", number)
        lines.append((number, value))
    return None, lines


def read_generic(path: Path, data: bytes, *, project: str | None = None, mtime: float | None = None) -> dict[str, Any]:
    """The `POST /v1/transcripts` body of a generic-form file (`data`, its bytes), checked by the
    server's gate. `project` (the command's `--project`) wins over the file's. Raises
    GenericFormError naming the line that is wrong."""
    document, lines = _records(data)
    header: dict[str, Any] = {}
    raw_messages: list[tuple[int, dict[str, Any]]]
    if document is not None:
        header = {k: v for k, v in document.items() if k != "messages"}
        raw_messages = [(i + 1, m) for i, m in enumerate(document["messages"])]
        where = "message"
    else:
        if lines and not looks_generic(lines[0][1]) and {"type", "sessionId", "payload"} & set(lines[0][1]):
            raise GenericFormError(
                "line 1 is a Claude Code or Codex record, not the generic form: push it without --format "
                "(its format is sniffed)",
                1,
            )
        if lines and "role" not in lines[0][1]:
            header = lines.pop(0)[1]
            unknown = sorted(set(header) - set(HEADER_FIELDS))
            if unknown:
                raise GenericFormError(f"the header line holds {unknown[0]!r}: only {', '.join(HEADER_FIELDS)}", 1)
        raw_messages = lines
        where = "line"
    if not raw_messages:
        raise GenericFormError("the file holds no message")
    session_id = header.get("session_id") or _session_id(path)
    stamp = datetime.fromtimestamp(path.stat().st_mtime if mtime is None else mtime, UTC)
    default_time = stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"
    messages = []
    for number, raw in raw_messages:
        if not isinstance(raw, dict):
            raise GenericFormError(f"{where} {number} is not a JSON object", number)
        message = dict(raw)
        if "content" in message:
            if "text" in message:
                raise GenericFormError(f"{where} {number}: give text or content, not both", number)
            message["text"] = _text(message.pop("content"), number)
        message.setdefault("timestamp", default_time)
        message.setdefault("uuid", str(uuid.uuid5(_NAMESPACE, f"{session_id}\x1f{number}")))
        messages.append(message)
    body = {
        "source": header.get("source") or DEFAULT_SOURCE,
        "project": project if project is not None else (header.get("project") or ""),
        "session_id": session_id,
        "messages": messages,
    }
    _check(body, where, [number for number, _ in raw_messages])
    return body


def _check(body: dict[str, Any], where: str, numbers: list[int]) -> None:
    """The server's gate, here: its field names (`messages[3].role`) become the file's line numbers."""
    from dovecote.platform.errors import DomainError
    from dovecote.recall.model import gate_ingest

    try:
        gate_ingest(body)
    except DomainError as exc:
        found = re.fullmatch(r"messages\[(\d+)\](\..*)?", str(exc.details.get("field") or ""))
        if found is not None and int(found.group(1)) < len(numbers):
            index = int(found.group(1))
            detail = exc.message.removeprefix(f"messages[{index}].").removeprefix(f"messages[{index}] ")
            raise GenericFormError(f"{where} {numbers[index]}: {detail}", numbers[index]) from None
        raise GenericFormError(exc.message) from None


def body_digest(body: dict[str, Any]) -> str:
    """The SHA-256 the server keeps for a generic body (dovecote.recall.service: the body's JSON,
    keys sorted, ASCII), so `POST /v1/transcripts/check` can say whether it has this one."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=True).encode("ascii")).hexdigest()


__all__ = ["GENERIC", "GenericFormError", "body_digest", "looks_generic", "read_generic"]
