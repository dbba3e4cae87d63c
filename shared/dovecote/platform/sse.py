"""Server-sent events (the WHATWG HTML "server-sent events" section): framing for the servers, parsing
for the SDK and the tests. One home for the wire, both ends.

Hand-written on purpose: the server side runs as a WSGI app (the stream function, in Lambda behind
the Web Adapter and in `dovecote dev`), where sse-starlette (an ASGI/Starlette response class) does
not apply, and the framing is a few lines; the client side reads lines from httpx's own
`iter_lines`, so it needs no second HTTP library (httpx-sse adds nothing the parser below lacks).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

MEDIA_TYPE = "text/event-stream"
# What a stream answers with: no proxy or CDN may buffer or cache it (X-Accel-Buffering: nginx's).
HEADERS = (
    ("Content-Type", f"{MEDIA_TYPE}; charset=utf-8"),
    ("Cache-Control", "no-cache, no-store"),
    ("X-Accel-Buffering", "no"),
)


def frame(data: Any, *, event: str | None = None, id: int | str | None = None) -> bytes:
    """One message: `id:` (when given), `event:` (when given), then `data:` as compact JSON on one
    line (JSON has no raw newline, so one `data:` line always carries it whole)."""
    lines = []
    if id is not None:
        lines.append(f"id: {id}")
    if event is not None:
        lines.append(f"event: {event}")
    lines.append("data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def comment(text: str = "") -> bytes:
    """A comment line: ignored by every reader, it keeps an idle connection (and its proxies) alive."""
    return f": {text}\n\n".encode()


@dataclass(frozen=True, slots=True)
class Message:
    """One dispatched message as a reader sees it: `id` is None when the message carried no `id:`
    field (the reader's last event id is then unchanged)."""

    event: str
    data: str
    id: str | None = None

    def json(self) -> Any:
        return json.loads(self.data)


def parse(lines: Iterable[str]) -> Iterator[Message]:
    """Messages from a stream's lines (without their line ends), as the standard's parser
    dispatches them: a blank line ends a message; `:` starts a comment; a field without `:` has an
    empty value; one leading space of a value is dropped; `data:` lines join with newlines; a
    message without data is not dispatched."""
    event, ident = "", None
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield Message(event or "message", "\n".join(data), ident)
            event, data, ident = "", [], None
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\x00" not in value:
            ident = value
