"""SDK: follow a task's stream (`GET /v1/tasks/{id}/stream`, docs/guides/streams.md) as a mixin over
the client's transport.

`follow` yields the task's events as they commit (each exactly as `events` pages it) and ends after
the one that makes the task terminal. A connection that drops, a server restart, or the server's
own `event: reconnect` (a stream's time bound) is resumed with `Last-Event-ID`: the server reads its
durable log after that sequence, so nothing is missed or seen twice. Reconnects without progress
are bounded (`max_reconnects`, with the client's backoff between them); past them the usual
`DovecoteError` (code `unavailable`) is raised.

A `timeout` holds however the server keeps the connection alive: its `: keep-alive` comments (every
15 s of silence) reset httpx's read timeout, so the deadline is checked on every line received,
comments included, and a connection whose next silent read could outlast the deadline (its read
timeout is fixed when it opens) is renewed at a message boundary with a read timeout of what is left.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import httpx

from dovecote.client.errors import DovecoteError, TaskEnded, WaitTimeout
from dovecote.client.paths import path
from dovecote.platform import sse

# The server sends a comment at least every 15 s: a read silent for this long is a dead connection.
READ_TIMEOUT = 45.0
# The longest silence of a live stream (docs/guides/streams.md: a comment at least every 15 s), and the
# most a wait may overrun its timeout by before a renewed connection's read timeout bounds it.
KEEPALIVE_SECONDS = 15.0
SLACK_SECONDS = 1.0
TERMINAL = frozenset({"completed", "canceled", "rejected", "failed"})
LEASE, RECONNECT = "lease", "reconnect"


def _envelope(response: httpx.Response) -> bool:
    """A function's error envelope ({"error": {...}}), not the gateway's {"message"}."""
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and isinstance(body.get("error"), dict)


class NoStreamRoute(DovecoteError):
    """The endpoint has no stream route (its gateway's own 404, no error envelope): an older
    deployment, or a stream endpoint that is not configured. `wait_for` polls instead."""


class _Deadline(Exception):
    """A wait's deadline passed while its stream was still sending (keep-alives, other events)."""


class _Renew(Exception):
    """End this connection and resume on a new one: its read timeout could outlast the deadline."""


def bounded(lines: Iterable[str], deadline: float | None, read: float) -> Iterator[str]:
    """`lines`, checking `deadline` after each (comments included) before the next read blocks:
    `_Deadline` once it has passed; `_Renew` at a message boundary (a blank line) when the next
    silent read, up to `read` seconds or the server's keep-alive interval, could end more than
    SLACK_SECONDS after it."""
    for line in lines:
        yield line
        if deadline is None:
            continue
        now = time.monotonic()
        if now >= deadline:
            raise _Deadline
        if not line and now + min(read, KEEPALIVE_SECONDS) > deadline + SLACK_SECONDS:
            raise _Renew


class StreamsMixin:
    if TYPE_CHECKING:  # provided by DovecoteClient
        _http: httpx.Client
        stream_endpoint: str

        def unreachable(
            self, exc: httpx.TransportError, *, attempts: int = 1, command_id: str | None = None
        ) -> DovecoteError: ...
        def _pause(self, attempt: int, retry_after: float | None = None) -> None: ...
        def _stream_error(self, response: httpx.Response, attempts: int) -> DovecoteError: ...
        def get_task(self, task_id: str) -> dict[str, Any]: ...

    def follow(
        self,
        task_id: str,
        after: int = 0,
        *,
        leases: bool = False,
        max_reconnects: int = 5,
        timeout: float | None = None,
    ) -> Iterator[dict[str, Any]]:
        """The task's events after sequence `after`, live, until the task is terminal. With `leases`,
        the lease state too, as `{"type": "lease", "lease": …, "last_lease": …}` (first the current
        one, then each change). `timeout`: seconds in all (None: no bound), then `WaitTimeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last = {"state": None, "revision": None}
        failures = 0
        while True:
            progressed = asked = False
            try:
                for message in self._stream(task_id, after, deadline):
                    if message.event == RECONNECT:
                        asked = True
                        break
                    data = message.json()
                    if message.event == LEASE:
                        if leases:
                            yield {"type": LEASE, **data}
                        continue
                    if message.id is None or int(message.id) <= after:
                        continue  # never twice, whatever a server resent
                    after, progressed = int(message.id), True
                    last = {"state": data.get("state"), "revision": data.get("revision")}
                    yield data
                    if data.get("state") in TERMINAL:
                        return
            except _Deadline:
                raise WaitTimeout(task_id, tuple(sorted(TERMINAL)), float(timeout or 0), last) from None
            except _Renew:
                continue  # at once, on a new connection (resumed after `after`): not a failure
            except httpx.TimeoutException as exc:
                if deadline is not None and time.monotonic() >= deadline:
                    raise WaitTimeout(task_id, tuple(sorted(TERMINAL)), float(timeout or 0), last) from None
                failures = 0 if progressed else failures + 1
                if failures > max_reconnects:
                    raise self.unreachable(exc, attempts=failures) from exc
            except httpx.TransportError as exc:
                failures = 0 if progressed else failures + 1
                if failures > max_reconnects:
                    raise self.unreachable(exc, attempts=failures) from exc
            else:
                if not asked and self._ended(task_id, after):
                    return  # followed from the end of a terminal task's log: nothing more comes
                failures = 0 if progressed or asked else failures + 1
                if failures > max_reconnects:
                    raise DovecoteError(
                        0, "unavailable", f"the stream of task {task_id} ended {failures} times without an event"
                    )
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(task_id, tuple(sorted(TERMINAL)), float(timeout or 0), last)
            if failures:
                self._pause(failures)

    def _ended(self, task_id: str, after: int) -> bool:
        """A stream the server ended without a terminal event or `reconnect`: either it was resumed
        after the terminal event (the task is terminal, its log ends at `after`) or it was cut."""
        try:
            task = self.get_task(task_id)
        except DovecoteError as exc:
            if exc.status == 0 or exc.status >= 500:
                return False  # the server is away: reconnect, as for a cut connection
            raise
        return task.get("state") in TERMINAL and int(task.get("event_count") or 0) <= after

    def _stream(self, task_id: str, after: int, deadline: float | None) -> Iterator[sse.Message]:
        """One connection: its messages until the server ends it. A 4xx is raised as the API's
        error; 429 and 5xx are raised as TransportError-like retries by the caller's loop."""
        read = READ_TIMEOUT if deadline is None else max(0.1, min(READ_TIMEOUT, deadline - time.monotonic()))
        timeout = httpx.Timeout(min(10.0, read), read=read)
        headers = {"Accept": sse.MEDIA_TYPE, "Last-Event-ID": str(after)}
        url = self.stream_endpoint + path("tasks", task_id, "stream")
        with self._http.stream("GET", url, headers=headers, timeout=timeout) as response:
            if response.status_code >= 400:
                response.read()
                if response.status_code == 429 or response.status_code >= 502:
                    raise httpx.RemoteProtocolError(f"the stream answered {response.status_code}")
                error = self._stream_error(response, 1)
                if response.status_code == 404 and not _envelope(response):
                    raise NoStreamRoute(error.status, error.code, error.message, error.details)
                raise error
            yield from sse.parse(bounded(response.iter_lines(), deadline, read))

    def watch_until(self, task_id: str, states: tuple[str, ...], *, timeout: float | None) -> dict[str, Any]:
        """The task once it is in one of `states` (any event of the stream reaching one counts),
        read after that event; `WaitTimeout` when `timeout` passes first; `TaskEnded` when the task
        is (or becomes) terminal in another state."""
        snap: dict[str, Any] = self._snapshot(task_id)
        if snap["task"]["state"] in states:
            return dict(snap["task"])
        if snap["task"]["state"] in TERMINAL:
            raise TaskEnded(task_id, states, dict(snap["task"]))
        after = int(snap.get("event_cursor") or 0)
        try:
            for event in self.follow(task_id, after, timeout=timeout):
                if event.get("state") in states:
                    return self.get_task(task_id)
        except WaitTimeout as exc:
            seen = exc.task if exc.task.get("state") else snap["task"]
            raise WaitTimeout(task_id, states, float(timeout or 0), seen) from None
        # The stream ended at a terminal state that is not wanted: it will never be reached.
        raise TaskEnded(task_id, states, self.get_task(task_id))

    if TYPE_CHECKING:

        def _snapshot(self, task_id: str) -> dict[str, Any]: ...
