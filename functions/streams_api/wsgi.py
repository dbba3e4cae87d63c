"""What the streams app's answers share (functions/streams_api/handler.py and a2a_front.py): a JSON
answer, and a stream whose failure after the first byte ends it with a log line."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from dovecote.platform.observability import logger

StartResponse = Callable[..., Any]


def json_answer(start_response: StartResponse, status: int, body: dict[str, Any]) -> list[bytes]:
    data = json.dumps(body).encode()
    start_response(f"{status} {_REASONS.get(status, 'Error')}", [("Content-Type", "application/json")])
    return [data]


_REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed"}


def guarded(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """A failure after the first byte cannot change the status: the stream ends, the log says why
    (the client resumes with Last-Event-ID)."""
    try:
        yield from chunks
    except Exception:
        logger.exception("stream failed")
