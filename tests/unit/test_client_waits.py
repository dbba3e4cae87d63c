"""The SDK's waits against a scripted server (httpx's MockTransport): a `timeout` holds while the
stream keeps sending keep-alive comments (which reset httpx's read timeout), and a task that ended in
a state not waited for is `TaskEnded` at once, never a `WaitTimeout` that did not happen. The same
against `dovecote dev`: tests/e2e/test_waits.py."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from dovecote.cli.errors import EXIT_ENDED, EXIT_NOTHING, describe
from dovecote.client import DovecoteClient, TaskEnded, WaitTimeout
from dovecote.client import streams as client_streams
from dovecote.client.streams import _Deadline, _Renew, bounded

TASK = {"id": "t1", "state": "working", "revision": 2, "event_count": 2}
LEASE = b'event: lease\ndata: {"lease":null,"last_lease":null}\n\n'


def client(handler: Any) -> DovecoteClient:
    return DovecoteClient("http://dovecote.test", "dvc_t_secret", transport=httpx.MockTransport(handler), backoff=0.0)


def keepalives(every: float, lasting: float) -> Iterator[bytes]:
    """A quiet task's stream: its lease state, then a comment every `every` s for `lasting` s."""
    yield LEASE
    end = time.monotonic() + lasting
    while time.monotonic() < end:
        time.sleep(every)
        yield b": keep-alive\n\n"


def quiet_task(opened: list[str], body: Callable[[int], Iterator[bytes]]) -> DovecoteClient:
    """A client of a server whose task stays working: each stream it opens (its Last-Event-ID noted
    in `opened`) sends `body(n)`, n counting the connections from 1."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/snapshot"):
            return httpx.Response(200, json={"task": TASK, "event_cursor": 2})
        if request.url.path.endswith("/stream"):
            opened.append(request.headers["last-event-id"])
            return httpx.Response(200, content=body(len(opened)), headers={"content-type": "text/event-stream"})
        return httpx.Response(200, json={"task": TASK})

    return client(handler)


def timed_out(waiting: DovecoteClient, timeout: float) -> tuple[WaitTimeout, float]:
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as caught:
        waiting.wait_for("t1", "completed", timeout=timeout)
    return caught.value, time.monotonic() - started


def test_a_wait_times_out_on_time_while_keep_alives_arrive() -> None:
    """Keep-alives every 0.2 s for 20 s (MockTransport has no read timeout: only the deadline check on
    each line can end it); wait_for(timeout=1) raises WaitTimeout within about a second of it."""
    opened: list[str] = []
    error, took = timed_out(quiet_task(opened, lambda n: keepalives(0.2, 20.0)), 1.0)
    assert 1.0 <= took < 2.5, took
    assert error.code == "wait_timeout" and error.details["state"] == "working"
    assert opened == ["2"]


def test_bounded_checks_the_deadline_on_every_line_and_renews_before_a_long_read() -> None:
    def slow(lines: list[str], pause: float) -> Iterator[str]:
        for line in lines:
            time.sleep(pause)
            yield line

    # A comment line, not only a dispatched message, is where the deadline is checked.
    deadline = time.monotonic() + 0.3
    seen: list[str] = []
    with pytest.raises(_Deadline):
        for line in bounded(slow([": keep-alive", "", ": keep-alive", ""], 0.2), deadline, 0.3):
            seen.append(line)
    assert seen == [": keep-alive", ""]

    # A connection opened with 5 s left may read silently for 5 s: once a second has passed, its next
    # silent read could end past the deadline, so it is renewed, at a message boundary only.
    deadline = time.monotonic() + 5.0
    seen = []
    with pytest.raises(_Renew):
        for line in bounded(slow(["", ": keep-alive", "", ""], 0.4), deadline, 5.0):
            seen.append(line)
    assert seen == ["", ": keep-alive", ""]

    # Far from the deadline the server's next keep-alive comes before it: nothing to renew.
    deadline = time.monotonic() + 60.0
    assert list(bounded(slow(["", ": keep-alive", ""], 0.1), deadline, client_streams.READ_TIMEOUT)) == [
        "",
        ": keep-alive",
        "",
    ]
    assert list(bounded(["a", ""], None, client_streams.READ_TIMEOUT)) == ["a", ""]


def test_a_renewed_connection_resumes_after_the_last_event_and_is_no_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the server's keep-alive interval at 0.3 s, a wait of 2 s is renewed near its end (resumed
    with Last-Event-ID, the event not seen twice) and still times out on time."""
    monkeypatch.setattr(client_streams, "KEEPALIVE_SECONDS", 0.3)
    monkeypatch.setattr(client_streams, "SLACK_SECONDS", 0.1)
    opened: list[str] = []
    event = b'id: 3\nevent: message_added\ndata: {"sequence":3,"state":"working","revision":3}\n\n'

    def body(n: int) -> Iterator[bytes]:
        return itertools.chain([event] if n == 1 else [], keepalives(0.3, 5.0))

    error, took = timed_out(quiet_task(opened, body), 2.0)
    assert 2.0 <= took < 3.0, took
    assert error.details["revision"] == 3
    assert opened[0] == "2" and len(opened) > 1 and set(opened[1:]) == {"3"}


@pytest.mark.parametrize("stream_route", [True, False])
def test_a_task_that_ended_otherwise_is_task_ended_at_once(stream_route: bool) -> None:
    failed = {**TASK, "state": "failed", "revision": 3, "event_count": 3}
    now = {"task": TASK}
    event = 'id: 3\nevent: task_failed\ndata: {"sequence":3,"state":"failed","revision":3,"reason":"no"}\n\n'

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/snapshot"):
            return httpx.Response(200, json={"task": now["task"], "event_cursor": now["task"]["event_count"]})
        if request.url.path.endswith("/stream"):
            if not stream_route:
                return httpx.Response(404, json={"message": "Not Found"})  # the gateway's own: polled
            return httpx.Response(200, text=event, headers={"content-type": "text/event-stream"})
        if request.url.path.endswith("/events"):
            items = [{"sequence": 3, "state": "failed", "revision": 3}]
            return httpx.Response(200, json={"items": items, "next": 3, "has_more": False})
        return httpx.Response(200, json={"task": failed})

    # It becomes failed while followed (or polled) ...
    started = time.monotonic()
    with pytest.raises(TaskEnded) as caught:
        client(handler).wait_for("t1", "completed", timeout=60)
    assert time.monotonic() - started < 5
    assert caught.value.code == "task_ended" and not isinstance(caught.value, WaitTimeout)
    assert caught.value.message == "task t1 ended failed (revision 3); it can no longer become completed"
    assert caught.value.details == {"task": "t1", "states": ["completed"], "state": "failed", "revision": 3}
    failure = describe(caught.value)
    assert (failure.exit_code, failure.code) == (EXIT_ENDED, "task_ended") and EXIT_ENDED != EXIT_NOTHING

    # ... or already was: the snapshot says so, nothing is followed.
    now["task"] = failed
    with pytest.raises(TaskEnded) as already:
        client(handler).wait_for("t1", ("completed", "canceled"), timeout=60)
    assert "can no longer become completed or canceled" in already.value.message
    # A wanted terminal state is still an answer, not an error.
    assert client(handler).wait_for("t1", timeout=60)["state"] == "failed"
