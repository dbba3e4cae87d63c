"""Task streams (dovecote/tasks/streams.py; docs/guides/streams.md) over the in-memory store, on a
fake clock: the sleep between polls runs the next scripted command, so each test says what commits
between two polls and what the stream sends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dovecote.platform import sse
from dovecote.platform.cursors import CursorSigner
from dovecote.platform.principal import Principal
from dovecote.tasks.memory import InMemoryTaskStore
from dovecote.tasks.streams import KeepAlive, LeaseState, Logged, Reconnect, StreamItem, Tail
from functions.streams_api.handler import frames
from tests.support.tasks import CALLER, Edge, Flow, code_of, edge


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.script: list[Callable[[], Any]] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        if self.script:
            self.script.pop(0)()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def service(clock: Clock) -> Edge:
    return edge(
        InMemoryTaskStore(),
        CursorSigner(b"task-unit-key-0123456789abcdef"),
        sleep=clock.sleep,
        monotonic=clock.monotonic,
        stream_seconds=60,
    )


def follow(service: Edge, task_id: str, after: int | None = 0, *, limit: int = 200) -> list[StreamItem]:
    items: list[StreamItem] = []
    stream: Iterator[StreamItem] = service.service.follow(CALLER, task_id, after)
    for item in stream:
        items.append(item)
        assert len(items) < limit, items  # a stream that never ends fails here
    return items


def sequences(items: list[StreamItem]) -> list[int]:
    return [i.sequence for i in items if isinstance(i, Logged)]


def test_events_come_as_they_commit_and_the_stream_ends_with_the_terminal_one(service: Edge, clock: Clock) -> None:
    flow = Flow(service)
    flow.create()
    clock.script = [flow.acquire, lambda: flow.worker_cmd("accept"), lambda: None, lambda: flow.worker_cmd("complete")]
    items = follow(service, flow.task_id)
    events = [i for i in items if isinstance(i, Logged)]
    assert [e.type for e in events] == ["task_submitted", "task_accepted", "task_completed"]
    assert items[-1] == events[-1]  # nothing after the terminal event
    # data is the event exactly as the events route pages it
    page = service.events(CALLER, flow.task_id, 0, None)["items"]
    assert [e.to_json() for e in events] == page
    assert all(e.sequence == d["sequence"] and e.type == d["type"] for e, d in zip(events, page, strict=True))


def test_the_lease_state_comes_first_and_at_each_change_without_a_sequence(service: Edge, clock: Clock) -> None:
    flow = Flow(service)
    flow.create()
    clock.script = [flow.acquire, lambda: flow.worker_cmd("accept"), lambda: flow.worker_cmd("complete")]
    items = follow(service, flow.task_id)
    leases = [i.to_json() for i in items if isinstance(i, LeaseState)]
    assert leases[0] == {"lease": None, "last_lease": None}
    assert leases[1]["lease"]["state"] == "granted" and leases[1]["lease"]["worker"] == "w1"
    assert leases[2]["lease"]["state"] == "accepted"
    assert isinstance(items[0], LeaseState)


def test_a_resumed_stream_sends_every_later_event_once_and_starts_with_the_current_lease(
    service: Edge, clock: Clock
) -> None:
    flow = Flow(service).to_state("completed")
    count = service.get(CALLER, flow.task_id)["task"]["event_count"]
    for after in range(count + 1):
        items = follow(service, flow.task_id, after)
        assert sequences(items) == list(range(after + 1, count + 1))
        assert isinstance(items[0], LeaseState) and items[0].to_json()["last_lease"]["reason"] == "task_ended"


def test_after_past_the_end_another_authority_and_a_missing_task_are_refused_before_any_item(service: Edge) -> None:
    flow = Flow(service)
    flow.create()
    streams = service.service.streams
    assert code_of(lambda: streams.open(CALLER, flow.task_id, 2)) == "invalid_argument"
    assert code_of(lambda: streams.open(CALLER, flow.task_id, -1)) == "invalid_argument"
    assert code_of(lambda: streams.open(Principal("globex", "caller"), flow.task_id, 0)) == "not_found"
    assert code_of(lambda: streams.open(CALLER, "no-such-task", 0)) == "not_found"
    assert code_of(lambda: streams.open(Principal("acme", "nobody"), flow.task_id, 0)) == "forbidden"  # type: ignore[arg-type]


def test_an_idle_stream_keeps_alive_and_ends_with_reconnect_at_its_bound(service: Edge, clock: Clock) -> None:
    flow = Flow(service)
    flow.create()
    items = follow(service, flow.task_id, 0, limit=1000)
    alive = [i for i in items if isinstance(i, KeepAlive)]
    assert len(alive) == 3  # at 15, 30, 45 s of a 60 s stream (none waits longer than 15 s)
    assert items[-1] == Reconnect(1)
    # Resuming after it misses nothing: the next event comes first.
    clock.script = [lambda: flow.caller_cmd("cancel")]
    assert sequences(follow(service, flow.task_id, 1)) == [2]


def test_one_read_per_poll_serves_every_stream_of_a_task() -> None:
    now = [0.0]
    reads: list[str] = []
    tail = Tail(lambda a, t: reads.append(t), max_age=0.25, monotonic=lambda: now[0])  # type: ignore[arg-type,func-returns-value]
    for _ in range(200):
        tail.latest("acme", "t1")
    assert len(reads) == 1
    now[0] = 0.3
    for _ in range(200):
        tail.latest("acme", "t1")
    tail.latest("acme", "t2")
    assert reads == ["t1", "t1", "t2"]


def test_the_wire_ids_are_sequences_and_the_lease_has_none(service: Edge, clock: Clock) -> None:
    flow = Flow(service).to_state("completed")
    wire = b"".join(frames(service.service.follow(CALLER, flow.task_id, 0))).decode()
    messages = list(sse.parse(wire.split("\n")))
    assert [m.event for m in messages][0] == "lease" and messages[0].id is None
    logged = [m for m in messages if m.event != "lease"]
    assert [m.id for m in logged] == [str(m.json()["sequence"]) for m in logged]
    assert all(m.event == m.json()["type"] for m in logged)
    reconnect = b"".join(frames([Reconnect(4)])).decode()
    assert [(m.event, m.id, m.json()["after"]) for m in sse.parse(reconnect.split("\n"))] == [("reconnect", None, 4)]


@pytest.mark.parametrize(
    ("header", "query", "expected"),
    [
        (None, "", None),
        ("3", "", 3),
        ("3", "after=1", 3),  # the header wins: an EventSource resends it on its own reconnect
        ("", "after=2", 2),  # an empty header is no id
        (None, "after=0", 0),
        ("", "after=-1", "invalid_argument"),
        ("-1", "", "invalid_argument"),
        ("x", "", "invalid_argument"),
        (None, "after=1&after=2", "invalid_argument"),
        (None, "limit=3", "invalid_argument"),
        # `after` is the canonical decimal text, as every route's integer query (request_text.QUERY_INT).
        (None, "after=12", 12),
        (None, "after=01", "invalid_argument"),
        (None, "after=%201", "invalid_argument"),
        (None, "after=1%0A", "invalid_argument"),
        (None, "after=%2B1", "invalid_argument"),
        (None, "after=1_0", "invalid_argument"),
        (None, "after=%EF%BC%91", "invalid_argument"),
    ],
)
def test_where_a_stream_resumes(header: str | None, query: str, expected: object) -> None:
    from functions.streams_api.handler import resume_after

    environ = {"QUERY_STRING": query, **({"HTTP_LAST_EVENT_ID": header} if header is not None else {})}
    assert (code_of(lambda: resume_after(environ)) if expected == "invalid_argument" else resume_after(environ)) == (
        expected
    )
