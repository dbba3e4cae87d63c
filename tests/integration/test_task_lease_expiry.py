"""Heartbeats, lease timeouts and the dispatcher (issue 5/9), on both TaskStores (the fake and
DynamoDB on moto), with a clock the test moves: a silent lease is fenced after its timeout and
claimed again with fence + 1; a heartbeating one survives; a heartbeat or a worker command racing
the dispatcher wins cleanly; the fenced worker gets stale_lease; long-poll claims wait."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from dovecote.platform.cursors import CursorSigner
from dovecote.platform.errors import InvalidArgument, NotFound, StaleLease
from dovecote.platform.principal import Principal
from dovecote.tasks.limits import EXPIRY_SHARDS
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
    service_fixture,
    uid,
)

KEY = b"lease-expiry-key-0123456789abcdef"


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
    with pytest.raises(StaleLease):
        flow.worker_cmd("complete")
    with pytest.raises(StaleLease) as stale:
        service.heartbeat(WORKER, flow.task_id, {"fence": flow.fence})
    assert stale.value.details["current_fence"] is None
    claimed = service.claim(OTHER_WORKER, {"command_id": uid("c")}).body["assignment"]
    assert claimed["task"]["id"] == flow.task_id and claimed["fence"] == flow.fence + 1
    assert dispatch(service) == {"fenced": 0, "lost": 0}


def test_a_heartbeating_worker_keeps_its_lease_well_past_its_timeout(service: Edge, clock: Clock) -> None:
    flow = Flow(service)
    # Heartbeats alone for ten minutes before it accepts: no accept deadline (test_task_accept_timeout.py).
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
