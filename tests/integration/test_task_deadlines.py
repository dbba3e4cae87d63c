"""The dispatcher's deadlines, on both TaskStores (the fake and DynamoDB on moto), with a clock the
test moves.

Lease timeouts (issue 5/9): a silent lease is fenced after its timeout and claimed again with
fence + 1; a heartbeating one survives; a heartbeat or a worker command racing the dispatcher wins
cleanly; the fenced worker gets stale_lease; long-poll claims wait.

Accept timeouts (issue 16, item 6): a grant not accepted within `accept_timeout_seconds` is fenced by
the dispatcher and the task is claimable again with fence + 1; the fenced worker's late accept is
`stale_lease` and changes nothing; an accept in time hands the lease to its lease timeout; a grant of
a task a fenced worker left working is accepted by its new owner's first sign of life; the
dispatcher racing an accept or that first heartbeat gives exactly one outcome (real threads)."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial
from typing import Any

import pytest

from dovecote.platform.clock import rfc3339
from dovecote.platform.cursors import CursorSigner
from dovecote.platform.errors import IdempotencyConflict, InvalidArgument, NotFound, StaleLease
from dovecote.platform.principal import Principal
from dovecote.tasks.limits import EXPIRY_SHARDS, MAX_ACCEPT_TIMEOUT
from dovecote.tasks.model import expiry_shard
from infra.local.metering import count_round_trips
from tests.support.tasks import (
    CALLER,
    OTHER_WORKER,
    WORKER,
    Clock,
    Edge,
    Flow,
    against_dispatcher,
    dispatch,
    dynamo_store,
    edge,
    field_of,
    message,
    service_fixture,
    uid,
)

KEY = b"dispatcher-deadlines-key-0123456"


service = service_fixture(KEY, clocked=True)


def test_a_silent_lease_is_fenced_after_its_timeout_and_claimed_again_with_fence_plus_one(
    service: Edge, clock: Clock
) -> None:
    flow = Flow(service)
    flow.create(lease_timeout_seconds=60)
    flow.acquire()
    flow.worker_cmd("accept")
    clock.advance(59)
    assert dispatch(service) == {"fenced": 0, "lost": 0}  # not yet silent long enough
    clock.advance(2)
    assert dispatch(service)["fenced"] == 1
    task = service.get(CALLER, flow.task_id)["task"]
    assert task["state"] == "working" and task["revision"] == 2  # fencing never changes the revision
    with pytest.raises(NotFound):
        service.get_lease(WORKER, flow.task_id)
    # The old worker is stale on its next command and heartbeat.
    with pytest.raises(StaleLease) as unheld:
        flow.worker_cmd("complete")
    # Nobody holds it now: the message says so, and what to do.
    assert unheld.value.message.startswith("no worker holds this task's lease now")
    assert "claim or acquire the task first" in unheld.value.message
    with pytest.raises(StaleLease) as stale:
        service.heartbeat(WORKER, flow.task_id, {"fence": flow.fence})
    assert stale.value.details["current_fence"] is None and "the heartbeat's fence" in stale.value.message
    claimed = service.claim(OTHER_WORKER, {"command_id": uid("c")}).body["assignment"]
    assert claimed["task"]["id"] == flow.task_id and claimed["fence"] == flow.fence + 1
    assert dispatch(service) == {"fenced": 0, "lost": 0}


def test_a_heartbeating_worker_keeps_its_lease_well_past_its_timeout(service: Edge, clock: Clock) -> None:
    flow = Flow(service)
    # Heartbeats alone for ten minutes before it accepts: no accept deadline (the accept timeouts below).
    flow.create(lease_timeout_seconds=60, accept_timeout_seconds=0)
    flow.acquire()
    for _ in range(10):  # ten minutes, a heartbeat every 40 s
        clock.advance(40)
        answer = service.heartbeat(WORKER, flow.task_id, {"fence": flow.fence})["assignment"]
        assert answer["heartbeat_at"] == clock.now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        assert dispatch(service)["fenced"] == 0
    assert service.get(CALLER, flow.task_id)["task"]["revision"] == 1  # heartbeats never change it
    # Worker commands count as heartbeats too.
    clock.advance(50)
    flow.worker_cmd("accept")
    clock.advance(50)
    assert dispatch(service)["fenced"] == 0
    assert service.get_lease(WORKER, flow.task_id)["assignment"]["fence"] == flow.fence


def test_a_timeout_of_zero_never_expires_and_the_default_applies(service: Edge, clock: Clock) -> None:
    never = Flow(service)
    never.create(lease_timeout_seconds=0, accept_timeout_seconds=0)
    never.acquire()
    default = Flow(service)
    default.create()
    default.acquire()
    assert service.get(CALLER, default.task_id)["task"]["lease_timeout_seconds"] == 300
    clock.advance(86_400 * 30)
    assert dispatch(service)["fenced"] == 1  # only the default one
    assert service.get_lease(WORKER, never.task_id)["assignment"]["fence"] == 1


@pytest.mark.parametrize("value", [-1, 86_401, "60", True, 1.5])
def test_lease_timeout_is_gated(service: Edge, value: Any) -> None:
    with pytest.raises(InvalidArgument):
        Flow(service).create(lease_timeout_seconds=value)


def test_a_heartbeat_with_a_stale_or_foreign_fence_is_refused(service: Edge) -> None:
    flow = Flow(service)
    flow.create()
    flow.acquire()
    with pytest.raises(StaleLease):
        service.heartbeat(WORKER, flow.task_id, {"fence": flow.fence + 1})
    with pytest.raises(StaleLease):
        service.heartbeat(OTHER_WORKER, flow.task_id, {"fence": flow.fence})
    with pytest.raises(NotFound):
        service.heartbeat(WORKER, "no-such-task", {"fence": 1})


def test_the_dispatcher_loses_cleanly_to_a_heartbeat_that_arrived_after_it_looked(service: Edge, clock: Clock) -> None:
    flow = Flow(service)
    flow.create(lease_timeout_seconds=60)
    flow.acquire()
    clock.advance(61)
    store = service.store
    seen = [t for shard in range(EXPIRY_SHARDS) for t in store.expired(shard, "9999", 10)]
    assert [t.id for t in seen] == [flow.task_id]
    service.heartbeat(WORKER, flow.task_id, {"fence": flow.fence})  # the late heartbeat lands first
    with pytest.raises(StaleLease):
        service.fence(
            Principal("acme", "admin"),
            flow.task_id,
            {"command_id": uid("x"), "fence": flow.fence},
            if_silent_since=seen[0].heartbeat_at,
        )
    assert service.get_lease(WORKER, flow.task_id)["assignment"]["fence"] == flow.fence


def _race_dispatcher_and_complete(service: Edge, clock: Clock) -> tuple[dict[str, str], dict[str, Any]]:
    flow = Flow(service)
    flow.create(lease_timeout_seconds=60)
    flow.acquire()
    flow.worker_cmd("accept")
    clock.advance(61)
    worker, dispatcher = against_dispatcher(service, partial(flow.worker_cmd, "complete"))
    return {"worker": worker, "dispatcher": dispatcher}, service.get(CALLER, flow.task_id)["task"]


def test_the_dispatcher_racing_a_worker_command_gives_exactly_one_outcome(service: Edge, clock: Clock) -> None:
    for _ in range(5):
        outcomes, task = _race_dispatcher_and_complete(service, clock)
        if outcomes["worker"] == "ok":
            assert outcomes["dispatcher"] == "lost" and task["state"] == "completed"
        else:
            assert outcomes == {"worker": "stale_lease", "dispatcher": "fenced"}
            assert task["state"] == "working" and task["revision"] == 2


def test_long_poll_claim_gets_a_task_created_during_its_wait(service: Edge) -> None:
    waited: list[float] = []
    real = service.leases.sleep

    def sleep(seconds: float) -> None:
        waited.append(seconds)
        if len(waited) == 2:
            Flow(service).create()  # a task appears while the claim waits
        real(0)

    service.leases.sleep = sleep
    assignment = service.claim(WORKER, {"command_id": uid("c"), "wait_seconds": 20}).body["assignment"]
    assert assignment["fence"] == 1 and len(waited) == 2
    assert waited == [0.25, 0.5]  # backoff between re-checks


def test_long_poll_claim_answers_404_at_its_deadline(service: Edge) -> None:
    ticks = iter(range(0, 1000))
    service.leases.monotonic = lambda: float(next(ticks))
    service.leases.sleep = lambda _s: None
    with pytest.raises(NotFound):
        service.claim(WORKER, {"command_id": uid("c"), "wait_seconds": 3})
    for bad in (-1, 21, "5", True):
        with pytest.raises(InvalidArgument):
            service.claim(WORKER, {"command_id": uid("c"), "wait_seconds": bad})


def test_round_trips_of_a_heartbeat_and_of_an_idle_dispatch(moto_env: dict[str, Any], clock: Clock) -> None:
    service = edge(dynamo_store(moto_env), CursorSigner(KEY), clock=clock)
    flow = Flow(service)
    flow.create()
    flow.acquire()
    with count_round_trips(moto_env["dynamodb"]) as meter:
        service.heartbeat(WORKER, flow.task_id, {"fence": flow.fence})
    assert meter.calls == {"dynamodb.GetItem": 1, "dynamodb.UpdateItem": 1}
    with count_round_trips(moto_env["dynamodb"]) as meter:
        dispatch(service)
    assert meter.calls == {"dynamodb.Query": EXPIRY_SHARDS}  # one query per shard, nothing overdue


# ---- accept timeouts ----------------------------------------------------------------------------


def due(service: Edge, task_id: str, at: datetime) -> bool:
    """The expiry index lists the task as due at `at` (what the dispatcher would read)."""
    shard = expiry_shard("acme", task_id)
    return task_id in [t.id for t in service.store.expired(shard, rfc3339(at), 100)]


def test_an_unaccepted_grant_is_fenced_and_the_task_claimed_again_with_fence_plus_one(
    service: Edge, clock: Clock
) -> None:
    flow = Flow(service)
    created = flow.create(accept_timeout_seconds=30).body
    assert created["accept_timeout_seconds"] == 30
    flow.acquire()
    clock.advance(29)
    assert dispatch(service) == {"fenced": 0, "lost": 0}  # not yet
    clock.advance(2)
    assert dispatch(service) == {"fenced": 1, "lost": 0}
    task = service.get(CALLER, flow.task_id)["task"]
    assert (task["state"], task["revision"], task["event_count"]) == ("submitted", 1, 1)  # nothing else moved
    with pytest.raises(NotFound):
        service.get_lease(WORKER, flow.task_id)
    # The fenced worker's late accept is stale and changes nothing.
    with pytest.raises(StaleLease) as stale:
        flow.worker_cmd("accept")
    assert stale.value.details["current_fence"] is None
    assert service.get(CALLER, flow.task_id)["task"] == task
    claimed = service.claim(OTHER_WORKER, {"command_id": uid("c")}).body["assignment"]
    assert (claimed["task"]["id"], claimed["fence"]) == (flow.task_id, flow.fence + 1)
    # Still stale once another worker holds the task, and the new owner accepts as usual.
    with pytest.raises(StaleLease) as stale:
        flow.worker_cmd("accept")
    assert stale.value.details["current_fence"] == flow.fence + 1
    taken = Flow(service, task_id=flow.task_id, revision=1, fence=claimed["fence"], worker=OTHER_WORKER)
    assert taken.worker_cmd("accept").body["state"] == "working"
    assert dispatch(service) == {"fenced": 0, "lost": 0}


def test_an_accept_in_time_hands_the_lease_to_its_lease_timeout(service: Edge, clock: Clock) -> None:
    flow = Flow(service)
    flow.create(lease_timeout_seconds=300, accept_timeout_seconds=30)
    flow.acquire()
    granted = clock.now
    assert due(service, flow.task_id, granted + timedelta(seconds=31))  # the index holds the accept deadline
    clock.advance(10)
    flow.worker_cmd("accept")
    assert not due(service, flow.task_id, granted + timedelta(seconds=31))  # ... restored at accept
    assert due(service, flow.task_id, granted + timedelta(seconds=311))
    clock.advance(100)
    assert dispatch(service) == {"fenced": 0, "lost": 0}
    clock.advance(201)  # 301 s after the accept, its last sign of life
    assert dispatch(service)["fenced"] == 1
    assert service.get(CALLER, flow.task_id)["task"]["state"] == "working"


def test_heartbeats_do_not_accept_a_submitted_task(service: Edge, clock: Clock) -> None:
    flow = Flow(service)
    flow.create(lease_timeout_seconds=60, accept_timeout_seconds=30)
    flow.acquire()
    for _ in range(3):  # alive, but never accepting
        clock.advance(10)
        service.heartbeat(WORKER, flow.task_id, {"fence": flow.fence})
        assert dispatch(service)["fenced"] == 0
    clock.advance(1)
    assert dispatch(service)["fenced"] == 1  # 31 s after the grant, heartbeats or not


def test_a_grant_of_a_task_left_working_is_accepted_by_its_first_sign_of_life(service: Edge, clock: Clock) -> None:
    flow = Flow(service)
    flow.create(lease_timeout_seconds=0, accept_timeout_seconds=30)
    flow.acquire()
    flow.worker_cmd("accept")
    service.fence(WORKER, flow.task_id, {"command_id": uid("c"), "fence": flow.fence})  # it walks away
    # A new owner that never shows a sign of life strands nothing: it is fenced at its accept deadline.
    dead = service.claim(OTHER_WORKER, {"command_id": uid("c")}).body["assignment"]
    assert (dead["fence"], dead["task"]["state"]) == (2, "working")
    clock.advance(31)
    assert dispatch(service)["fenced"] == 1
    # One that beats at once has accepted it: there is nothing left to accept in a working task.
    alive = service.claim(OTHER_WORKER, {"command_id": uid("c")}).body["assignment"]
    assert alive["fence"] == 3
    granted = clock.now
    clock.advance(5)
    service.heartbeat(OTHER_WORKER, flow.task_id, {"fence": 3})
    # No lease timeout: once accepted, nothing is due any more, in the index either.
    assert not due(service, flow.task_id, granted + timedelta(days=365))
    clock.advance(3600)
    assert dispatch(service) == {"fenced": 0, "lost": 0}
    assert service.get_lease(OTHER_WORKER, flow.task_id)["assignment"]["fence"] == 3


def test_a_worker_command_accepts_a_grant_of_a_task_left_working(service: Edge, clock: Clock) -> None:
    flow = Flow(service)
    flow.create(accept_timeout_seconds=30)
    flow.acquire()
    flow.worker_cmd("accept")
    service.fence(WORKER, flow.task_id, {"command_id": uid("c"), "fence": flow.fence})
    flow.acquire()
    clock.advance(10)
    flow.worker_cmd("request_input")  # a sign of life and a step of the work
    clock.advance(25)
    assert dispatch(service)["fenced"] == 0


def test_zero_never_fences_and_the_default_is_thirty_seconds(service: Edge, clock: Clock) -> None:
    never = Flow(service)
    assert never.create(lease_timeout_seconds=0, accept_timeout_seconds=0).body["accept_timeout_seconds"] == 0
    never.acquire()
    default = Flow(service)
    assert default.create(lease_timeout_seconds=0).body["accept_timeout_seconds"] == 30
    default.acquire()
    clock.advance(31)
    assert dispatch(service)["fenced"] == 1  # only the default one
    assert service.get_lease(WORKER, never.task_id)["assignment"]["fence"] == 1
    with pytest.raises(NotFound):
        service.get_lease(WORKER, default.task_id)


@pytest.mark.parametrize("value", [-1, MAX_ACCEPT_TIMEOUT + 1, "30", True, 1.5, None])
def test_accept_timeout_is_gated_and_a_refused_create_stores_nothing(service: Edge, value: Any) -> None:
    flow = Flow(service)
    with pytest.raises(InvalidArgument) as refused:
        flow.create(accept_timeout_seconds=value)
    if value is None:  # null is refused for the body as a whole, naming the field
        assert refused.value.message == "Value error, accept_timeout_seconds must not be null: leave it out instead"
    else:
        assert field_of(refused.value) == "accept_timeout_seconds"
    with pytest.raises(NotFound):
        service.get(CALLER, flow.task_id)


def test_the_accept_timeout_is_part_of_the_create_only_as_given(service: Edge) -> None:
    body = {"command_id": uid("c"), "workspace": "ws", "id": uid("t"), "context": "ctx", "message": message()}
    first = service.create(CALLER, body)
    assert service.create(CALLER, body).body == first.body  # an exact retry replays
    with pytest.raises(IdempotencyConflict):
        service.create(CALLER, {**body, "accept_timeout_seconds": 5})
    named = {**body, "command_id": uid("c"), "id": uid("t"), "message": message(), "accept_timeout_seconds": 5}
    assert service.create(CALLER, named).body["accept_timeout_seconds"] == 5
    assert service.create(CALLER, named).status == 200
    with pytest.raises(IdempotencyConflict):
        service.create(CALLER, {**named, "accept_timeout_seconds": 6})


# ---- races (real threads) ------------------------------------------------------------------------


def test_the_dispatcher_racing_a_late_accept_gives_exactly_one_outcome(service: Edge, clock: Clock) -> None:
    seen = set()
    for _ in range(6):
        flow = Flow(service)
        flow.create(accept_timeout_seconds=30)
        flow.acquire()
        clock.advance(31)

        worker, dispatcher = against_dispatcher(service, partial(flow.worker_cmd, "accept"))
        task = service.get(CALLER, flow.task_id)["task"]
        seen.add((worker, dispatcher))
        if worker == "ok":
            assert dispatcher == "lost" and (task["state"], task["revision"]) == ("working", 2)
            assert service.get_lease(WORKER, flow.task_id)["assignment"]["fence"] == flow.fence
        else:
            assert (worker, dispatcher) == ("stale_lease", "fenced")
            assert (task["state"], task["revision"]) == ("submitted", 1)
            with pytest.raises(NotFound):
                service.get_lease(WORKER, flow.task_id)
    assert seen <= {("ok", "lost"), ("stale_lease", "fenced")}


def test_the_dispatcher_racing_the_first_heartbeat_of_a_taken_over_task_gives_one_outcome(
    service: Edge, clock: Clock
) -> None:
    for _ in range(6):
        flow = Flow(service)
        flow.create(lease_timeout_seconds=0, accept_timeout_seconds=30)
        flow.acquire()
        flow.worker_cmd("accept")
        service.fence(WORKER, flow.task_id, {"command_id": uid("c"), "fence": flow.fence})
        fence = service.acquire(OTHER_WORKER, flow.task_id, {"command_id": uid("c")}).body["assignment"]["fence"]
        clock.advance(31)

        beat = partial(service.heartbeat, OTHER_WORKER, flow.task_id, {"fence": fence})
        worker, dispatcher = against_dispatcher(service, beat)
        assert (worker, dispatcher) in {("ok", "lost"), ("stale_lease", "fenced")}
        held = worker == "ok"
        try:
            service.get_lease(OTHER_WORKER, flow.task_id)
            assert held
        except NotFound:
            assert not held
        assert dispatch(service)["fenced"] == 0  # an accepted grant with no lease timeout is never due


def test_a_heartbeat_that_loses_to_an_accept_writes_the_lease_deadline(moto_env: dict[str, Any]) -> None:
    """DynamoDB: an accept that lands between a heartbeat's read and its write (injected at the
    botocore level) makes the heartbeat read again, so the expiry index never keeps the accept
    deadline of a grant that was accepted."""
    clock = Clock()
    service = edge(dynamo_store(moto_env), CursorSigner(KEY), clock=clock)
    flow = Flow(service)
    flow.create(lease_timeout_seconds=300, accept_timeout_seconds=30)
    flow.acquire()
    granted = clock.now
    client = moto_env["dynamodb"]
    updates: list[str] = []

    def accept_first(**_: Any) -> None:
        updates.append("update")
        if len(updates) == 1:
            flow.worker_cmd("accept")  # a TransactWriteItems: not an UpdateItem, so no recursion

    client.meta.events.register("before-call.dynamodb.UpdateItem", accept_first, unique_id="accept-first")
    try:
        clock.advance(5)
        answer = service.heartbeat(WORKER, flow.task_id, {"fence": flow.fence})["assignment"]
    finally:
        client.meta.events.unregister("before-call.dynamodb.UpdateItem", unique_id="accept-first")
    assert len(updates) == 2  # the first write was refused (the revision moved), the second landed
    assert answer["task"]["state"] == "working"
    assert not due(service, flow.task_id, granted + timedelta(seconds=31))
    assert due(service, flow.task_id, granted + timedelta(seconds=306))
