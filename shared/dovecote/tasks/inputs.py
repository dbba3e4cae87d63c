"""The rule of every task input, one function each: the one validator of that input.

A rule takes a value that already has its type (a string, an integer, an object of the right
fields: the edge's pydantic models check types, dovecote/tasks/bodies.py) and returns it, or what it
means (a message's parts as bytes), or raises the DomainError that is its refusal, with the stable
code, the message and the details the API has always given. `label` is the name the refusal gives
the input (`command_id`, `message.parts[0].url`, `event.task`).

Who applies them: the edge models, each field's rule as its validator (platform/schema.py
`checked`); the A2A binding, which builds its messages itself (`message` over its own body); and
the command gate (tasks/commands.py) for the rules that need what only the service knows (an artifact
payload's and an upload's size against the deployment's maximum). Pure, no pydantic: the A2A
function never loads it.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from dovecote.platform import jsonvalues
from dovecote.platform.errors import InvalidArgument, PayloadTooLarge
from dovecote.platform.ids import check_id
from dovecote.platform.media import validate_media_type
from dovecote.tasks.limits import (
    DATA_MEDIA_TYPE,
    DECISIONS,
    DIGEST,
    FILENAME_CHARS,
    HOST_MISSING,
    MAX_CLAIM_WAIT,
    MAX_COUNTER,
    MAX_FENCE,
    MAX_FILENAME_CHARS,
    MAX_MESSAGE_BYTES,
    MAX_METADATA_BYTES,
    MAX_PARTS,
    MAX_REVISION_BYTES,
    MAX_URL_CHARS,
    NOT_FILENAMES,
    REVISION_CHARS,
    SHA256_HEX,
    URL_CHARS,
    WORKER_EVENT_KINDS,
)
from dovecote.tasks.model import MessageInput, Part, PayloadInput

if TYPE_CHECKING:
    # What the rules read: the edge models (tasks/bodies.py) and a binding's own bodies (A2A's) alike.
    class PartFields(Protocol):
        """A message part as it arrives: exactly one of its forms is given."""

        @property
        def media_type(self) -> str | None: ...
        @property
        def text(self) -> str | None: ...
        @property
        def data_b64(self) -> str | None: ...
        @property
        def data(self) -> Any: ...
        @property
        def url(self) -> str | None: ...
        @property
        def filename(self) -> str | None: ...

    class MessageFields(Protocol):
        @property
        def id(self) -> str: ...
        @property
        def parts(self) -> Sequence[PartFields]: ...
        @property
        def metadata(self) -> dict[str, Any] | None: ...

    class PayloadFields(Protocol):
        """An artifact payload as it arrives (the edge's PayloadIn)."""

        media_type: str
        text: str | None
        data_b64: str | None
        upload_sha256: str | None


# The patterns are compiled on first use (re keeps them), and the types above exist for the type
# checker only: the edge imports this module on a cold start, whose first request may check nothing.
Rule = Callable[[Any, str], Any]

__all__ = ["check_id"]  # the ids' rule is the platform's, shared by every context


# ---- numbers ------------------------------------------------------------------------------------------


def created_revision(value: int, label: str) -> int:
    """A create's `expected_revision`: 0, the revision of a task that does not exist yet."""
    if value != 0:
        raise InvalidArgument(f"{label} must be 0 for create", field=label)
    return value


def expected_revision(value: int, label: str) -> int:
    """The revision a transition expects (compare-and-swap)."""
    if not 0 < value <= MAX_COUNTER:
        raise InvalidArgument(f"{label} must be > 0", field=label)
    return value


def fence(value: int, label: str) -> int:
    """The lease generation a worker holds."""
    if not 0 < value <= MAX_FENCE:
        raise InvalidArgument(f"{label} must be an integer between 1 and 2^63-1", field=label)
    return value


def at_most(maximum: int) -> Rule:
    """An integer from 0 to `maximum` (a timeout in seconds, where 0 means never; a claim's wait)."""
    return functools.partial(_at_most, maximum)


def _at_most(maximum: int, value: int, label: str) -> int:
    if not 0 <= value <= maximum:
        raise InvalidArgument(f"{label} must be an integer between 0 and {maximum}", field=label)
    return value


wait_seconds = at_most(MAX_CLAIM_WAIT)


# ---- strings ------------------------------------------------------------------------------------------


def bounded_text(limit: int) -> Rule:
    """Free text of at most `limit` bytes of UTF-8."""
    return functools.partial(_bounded_text, limit)


def _bounded_text(limit: int, value: str, label: str) -> str:
    if len(_utf8(value, label)) > limit:
        raise InvalidArgument(f"{label} is longer than {limit} bytes", field=label, limit=limit)
    return value


def revision(value: str, label: str) -> str:
    """A workspace revision: an opaque, non-empty string of at most 512 bytes, no control characters."""
    if not value:
        raise InvalidArgument(f"{label} must be a non-empty string", field=label)
    if len(value.encode("utf-8")) > MAX_REVISION_BYTES:
        raise InvalidArgument(f"{label} is longer than {MAX_REVISION_BYTES} bytes", field=label)
    if not re.fullmatch(REVISION_CHARS, value):
        raise InvalidArgument(f"{label} must not contain control characters", field=label)
    return value


def digest(value: str, label: str) -> str:
    """An artifact's digest: `sha256:` and 64 lowercase hex digits."""
    if not re.fullmatch(DIGEST, value):
        raise InvalidArgument(f"{label} must be sha256: followed by 64 lowercase hex digits", field=label)
    return value


def sha256(value: str, label: str) -> str:
    """An upload's SHA-256, with or without its `sha256:` prefix; answered without it."""
    if not re.fullmatch(SHA256_HEX, value):
        raise InvalidArgument(f"{label} must be 64 lowercase hex digits", field=label)
    return value.removeprefix("sha256:")


def decision(value: str, label: str) -> str:
    if value not in DECISIONS:
        raise InvalidArgument(f"{label} must be one of {', '.join(DECISIONS)}", field=label)
    return value


def event_kind(value: str, label: str) -> str:
    if value not in WORKER_EVENT_KINDS:
        raise InvalidArgument(f"{label} must be one of {', '.join(WORKER_EVENT_KINDS)}", field=label)
    return value


def optional_id(value: str, label: str) -> str:
    """An id that may be left empty ("": none)."""
    return check_id(value, label) if value else value


def _utf8(value: str, label: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: valid in JSON, not text
        raise InvalidArgument(f"{label} must be valid Unicode (no lone surrogate)", field=label) from None


def _short_string(value: str, label: str, limit: int) -> str:
    """A string of valid Unicode, at most `limit` characters: what a filename and a URL share."""
    _utf8(value, label)
    if len(value) > limit:
        raise InvalidArgument(f"{label} is longer than {limit} characters", field=label, limit=limit)
    return value


def filename(value: str | None, label: str) -> str:
    """Absent, or 1–255 characters with no control character and no / or \\, and not . or .."""
    if value is None:
        return ""
    _short_string(value, label, MAX_FILENAME_CHARS)
    if not re.fullmatch(FILENAME_CHARS, value) or value in NOT_FILENAMES:
        raise InvalidArgument(
            f"{label} must be a file name: no control characters, no / or \\, not . or ..", field=label
        )
    return value


def url(value: str, label: str) -> str:
    """An absolute http(s) URL of at most 2,048 characters with a host, no whitespace or control
    characters, and one urllib.parse can split (it refuses, e.g., an unclosed IPv6 host). The one
    validator of a URL part, for /v1 and A2A alike."""
    _short_string(value, label, MAX_URL_CHARS)
    if not re.fullmatch(URL_CHARS, value) or re.match(HOST_MISSING, value):
        raise InvalidArgument(
            f"{label} must be an absolute http(s) URL with a host, without whitespace or control characters",
            field=label,
        )
    try:
        urlsplit(value)
    except ValueError as exc:
        raise InvalidArgument(f"{label} is not a URL: {exc}", field=label) from None
    return value


def _base64(value: str, label: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgument(f"{label} is not valid base64", field=label) from None


# ---- messages -------------------------------------------------------------------------------------------


def message(body: MessageFields, label: str = "message") -> MessageInput:
    """The rule of a message: id pattern, 1–32 parts, ≤ 2 MiB of bytes in total, and an optional
    metadata object of at most 16 KiB. Each part is exactly one of `text`, `data_b64` (non-empty),
    `data` (any JSON value but null: its compact JSON, media type application/json unless given) or
    `url` (a reference, no bytes), with a parseable media type and an optional filename. Checked in
    that order, part by part; the first refusal wins."""
    message_id = check_id(body.id, f"{label}.id")
    if not 1 <= len(body.parts) <= MAX_PARTS:
        raise InvalidArgument(f"{label}.parts must hold 1 to {MAX_PARTS} parts", field=f"{label}.parts")
    parts: list[Part] = []
    total = 0
    for i, given in enumerate(body.parts):
        part = _part(given, f"{label}.parts[{i}]")
        total += len(part.data)
        if total > MAX_MESSAGE_BYTES:
            raise InvalidArgument(
                f"{label} parts exceed {MAX_MESSAGE_BYTES} bytes in total",
                field=f"{label}.parts",
                limit=MAX_MESSAGE_BYTES,
            )
        parts.append(part)
    return MessageInput(message_id, tuple(parts), metadata(body.metadata, f"{label}.metadata"))


def _part(part: PartFields, where: str) -> Part:
    forms = {"text": part.text, "data_b64": part.data_b64, "data": part.data, "url": part.url}
    given = [form for form, value in forms.items() if value is not None]
    if len(given) != 1:
        raise InvalidArgument(f"{where} needs exactly one of text, data_b64, data or url", field=where)
    form = given[0]
    media_type = part.media_type
    if media_type is None:
        if form != "data":
            raise InvalidArgument(f"{where}.media_type is required", field=f"{where}.media_type")
        media_type = DATA_MEDIA_TYPE
    validate_media_type(media_type, field=f"{where}.media_type")
    name = filename(part.filename, f"{where}.filename")
    if part.url is not None:
        return Part(media_type, b"", filename=name, url=url(part.url, f"{where}.url"))
    if part.text is not None:
        data = _utf8(part.text, f"{where}.text")
    elif part.data_b64 is not None:
        data = _base64(part.data_b64, f"{where}.data_b64")
    else:
        unheld = jsonvalues.problem(part.data, f"{where}.data")
        if unheld:
            raise InvalidArgument(unheld, field=f"{where}.data")
        try:
            text = json.dumps(part.data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError):
            raise InvalidArgument(f"{where}.data is not a JSON value", field=f"{where}.data") from None
        data = _utf8(text, f"{where}.data")
    if not data:
        raise InvalidArgument(f"{where} has empty data", field=where)
    return Part(media_type, data, filename=name)


def metadata(value: dict[str, Any] | None, label: str = "message.metadata") -> dict[str, Any]:
    """A message's metadata: absent, or a JSON object of at most MAX_METADATA_BYTES as canonical
    JSON, whose numbers every binding can carry (platform/jsonvalues.py). Stored and returned as
    given; the service never reads it."""
    if value is None:
        return {}
    unheld = jsonvalues.problem(value, label)
    if unheld:
        raise InvalidArgument(unheld, field=label)
    size = len(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise InvalidArgument(
            f"{label} is longer than {MAX_METADATA_BYTES} bytes as JSON", field=label, limit=MAX_METADATA_BYTES
        )
    return value


# ---- artifact payloads ------------------------------------------------------------------------------------


def payload(given: PayloadFields, max_bytes: int) -> PayloadInput:
    """An artifact payload: a media type and exactly one of `text`, `data_b64` or `upload_sha256`,
    inline at most `max_bytes` (the deployment's maximum, which only the service knows: the gate
    applies this rule). A base64 text too long to decode within the maximum is refused unread."""
    validate_media_type(given.media_type, field="payload.media_type")
    forms = [value for value in (given.text, given.data_b64, given.upload_sha256) if value is not None]
    if len(forms) != 1:
        raise InvalidArgument("payload needs exactly one of text, data_b64 or upload_sha256", field="payload")
    if given.upload_sha256 is not None:
        if not re.fullmatch(SHA256_HEX, given.upload_sha256):
            raise InvalidArgument(
                "payload.upload_sha256 must be 64 lowercase hex digits", field="payload.upload_sha256"
            )
        return PayloadInput(given.media_type, upload_sha256=given.upload_sha256.removeprefix("sha256:"))
    if given.text is not None:
        data = given.text.encode("utf-8")
    else:
        assert given.data_b64 is not None
        if len(given.data_b64) > (max_bytes * 4) // 3 + 4:
            raise PayloadTooLarge(f"artifact payloads are limited to {max_bytes} bytes", limit=max_bytes)
        data = _base64(given.data_b64, "payload.data_b64")
    if len(data) > max_bytes:
        raise PayloadTooLarge(f"artifact payloads are limited to {max_bytes} bytes", size=len(data), limit=max_bytes)
    return PayloadInput(given.media_type, data=data)


def upload_size(value: int, max_bytes: int) -> int:
    """A presigned upload's declared size: 1 byte to the deployment's maximum."""
    if not 0 < value <= max_bytes:
        raise InvalidArgument(f"size must be between 1 and {max_bytes}", field="size")
    return value
