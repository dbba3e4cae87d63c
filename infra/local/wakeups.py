"""Wake the local event sources when their source changes, instead of polling moto on a timer.

Every AWS request of the local runtime reaches moto through its WSGI server, so this middleware (in
front of the journal) sees each write as moto answers it: a SendMessage to a queue, a write to a
table with a stream, an S3 PUT (which moto turns, in-process, into the S3 event notification a
queue receives). It sets the `threading.Event` of each event source that asked for it; the source
(infra/local/sources.py) polls when its event is set, and otherwise only on its idle timer.

A wake-up is a hint: a spurious one costs one empty poll, and a source still polls on its idle timer
(and when a message it failed comes back from its visibility timeout), so a write that reached moto
some other way is picked up late, never lost. The event is set after moto applied the request, so a
poll that follows sees it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from infra.local.journal import operation, replace_body

# The requests that add a record to a table's stream.
DYNAMODB_WRITES = frozenset(
    {
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "BatchWriteItem",
        "TransactWriteItems",
        "ExecuteStatement",
        "BatchExecuteStatement",
        "ExecuteTransaction",
    }
)
# The requests that make a message visible in a queue.
SQS_SENDS = frozenset({"SendMessage", "SendMessageBatch", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch"})


@dataclass(frozen=True)
class _Watch:
    event: threading.Event
    operations: Collection[str]
    needle: bytes  # the resource's name in the request body; b"" matches any
    s3_writes: bool  # also S3 PUT/POST (REST: no operation name)


class Wakeups:
    """WSGI middleware: `watch_*` returns the event a source waits on."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self._watches: list[_Watch] = []

    def watch_table(self, table: str, event: threading.Event | None = None) -> threading.Event:
        """Writes to `table` (its name in the request: the stream's records come from it)."""
        return self._add(event, DYNAMODB_WRITES, table.encode(), s3_writes=False)

    def watch_queue(
        self, queue_url: str, event: threading.Event | None = None, *, s3_writes: bool = False
    ) -> threading.Event:
        """Messages sent to the queue; with `s3_writes`, S3 PUT/POST too (S3 event notifications
        are sent inside moto, never as an SQS request)."""
        return self._add(event, SQS_SENDS, queue_url.rsplit("/", 1)[-1].encode(), s3_writes=s3_writes)

    def _add(
        self, event: threading.Event | None, operations: Collection[str], needle: bytes, *, s3_writes: bool
    ) -> threading.Event:
        event = event or threading.Event()
        self._watches = [*self._watches, _Watch(event, operations, needle, s3_writes)]
        return event

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        watches = self._watches
        method = environ.get("REQUEST_METHOD", "GET")
        if not watches or method in ("GET", "HEAD", "OPTIONS"):
            return self.app(environ, start_response)
        from werkzeug.wsgi import get_input_stream

        body = get_input_stream(environ).read()
        replace_body(environ, body)
        name = operation(environ, body)
        woken = [
            w
            for w in watches
            if (name in w.operations and (not w.needle or w.needle in body)) or (not name and w.s3_writes)
        ]
        result = self.app(environ, start_response)  # moto has applied the request when this returns
        for watch in woken:
            watch.event.set()
        return result
