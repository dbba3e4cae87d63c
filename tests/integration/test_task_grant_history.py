"""A task read shows its lease, and the grant history says how each lease ended (issue 29, item 5), on
both TaskStores (the fake and DynamoDB on moto): who holds the task, its last sign of life and when
the dispatcher will fence it; each generation's grant, acceptance, last heartbeat, and when, why and
by whom it ended. The history lives beside the event log, never in it: the log's events and counts
stay the reference's."""

from __future__ import annotations

from typing import Any

from dovecote.platform.principal import Principal
from tests.support.tasks import CALLER, OTHER_WORKER, WORKER, Clock, Edge, Flow, dispatch, service_fixture, uid

KEY = b"grant-history-key-0123456789abcd"
ADMIN = Principal("acme", "admin")

service = service_fixture(KEY, clocked=True)


def fence(service: Edge, who: Principal, task_id: str, fence: int) -> None:
    service.fence(who, task_id, {"command_id": uid("f"), "fence": fence})


def history(service: Edge, task_id: str, limit: int | None = None) -> list[dict[str, Any]]:
    items, after = [], 0
    while True:
        page = service.grants(CALLER, task_id, after, limit)
        items += page["items"]
        after = page["next"]
        if not page["has_more"]:
            return items


def test_the_task_read_shows_who_holds_it_and_when_it_will_be_fenced(service: Edge, clock: Clock) -> None:
    flow = Flow(service)
    flow.create(lease_timeout_seconds=300, accept_timeout_seconds=30)
    read = service.get(CALLER, flow.task_id)
    assert "lease" not in read and "last_lease" not in read  # absent, as the API omits what has no value
    flow.acquire()
    granted = service.get(CALLER, flow.task_id)["lease"]
    assert granted["worker"] == WORKER.worker and granted["fence"] == 1 and granted["state"] == "granted"
    assert "accepted_at" not in granted and granted["heartbeat_at"] == granted["granted_at"]
    assert granted["fenced_after"] == "2026-03-01T12:00:30.000Z"  # the accept deadline
    clock.advance(10)
    flow.worker_cmd("accept")
    accepted = service.snapshot(CALLER, flow.task_id)["lease"]
    assert accepted["state"] == "accepted" and accepted["accepted_at"] == "2026-03-01T12:00:10.000Z"
    assert accepted["fenced_after"] == "2026-03-01T12:05:10.000Z"  # last sign of life + the lease timeout
    clock.advance(60)
    service.heartbeat(WORKER, flow.task_id, {"fence": 1})
    beat = service.get(CALLER, flow.task_id)["lease"]
    assert beat["heartbeat_at"] == "2026-03-01T12:01:10.000Z" and beat["fenced_after"] == "2026-03-01T12:06:10.000Z"


def test_each_way_a_lease_ends_is_recorded_with_who_ended_it(service: Edge, clock: Clock) -> None:
    # Given one task leased five times, each lease ending another way ...
    flow = Flow(service)
    flow.create(lease_timeout_seconds=60, accept_timeout_seconds=30)
    flow.acquire()  # 1: released by its worker
    fence(service, WORKER, flow.task_id, 1)
    flow.acquire()  # 2: fenced by an admin
    fence(service, ADMIN, flow.task_id, 2)
    flow.acquire()  # 3: never accepted, fenced by the dispatcher at its accept deadline
    clock.advance(31)
    assert dispatch(service)["fenced"] == 1
    flow.worker = OTHER_WORKER
    flow.acquire()  # 4: accepted, then silent past its lease timeout
    flow.worker_cmd("accept")
    clock.advance(61)
    assert dispatch(service)["fenced"] == 1
    flow.acquire()  # 5: held while the caller cancels the task
    service.cancel(CALLER, flow.task_id, {"command_id": uid("c"), "expected_revision": 2})
    # ... the read names the last way, and the history every one, oldest first, one a page too.
    assert "lease" not in service.get(CALLER, flow.task_id)
    assert service.get(CALLER, flow.task_id)["last_lease"]["reason"] == "task_ended"
    whole = history(service, flow.task_id)
    assert whole == history(service, flow.task_id, limit=1)
    assert [(g["fence"], g["worker"], g["reason"], g["by"]) for g in whole] == [
        (1, "w1", "released", "w1"),
        (2, "w1", "fenced", "admin"),
        (3, "w1", "unaccepted", "dispatcher"),
        (4, "w2", "expired", "dispatcher"),
        (5, "w2", "task_ended", "caller"),
    ]
    assert all(g["state"] == "ended" and g["ended_at"] for g in whole)
    assert "accepted_at" not in whole[2] and whole[3]["accepted_at"]  # 3 was never accepted, 4 was
    # The event log holds the reference's events only: create, accept, cancel (leases never add one).
    events = service.events(CALLER, flow.task_id, None, None)["items"]
    assert [e["type"] for e in events] == ["task_submitted", "task_accepted", "task_canceled"]
    task = service.get(CALLER, flow.task_id)["task"]
    assert task["revision"] == task["event_count"] == 3


def test_the_current_generation_is_shown_as_the_task_holds_it(service: Edge, clock: Clock) -> None:
    flow = Flow(service)
    flow.create()
    flow.acquire()
    fence(service, WORKER, flow.task_id, 1)
    flow.acquire()
    clock.advance(5)
    service.heartbeat(WORKER, flow.task_id, {"fence": 2})
    first, current = history(service, flow.task_id)
    assert first["reason"] == "released" and first["ended_at"]
    assert current["fence"] == 2 and current["state"] == "granted" and "reason" not in current
    assert current["heartbeat_at"] == "2026-03-01T12:00:05.000Z" and "ended_at" not in current
    # A completed task's last lease ended with the task, by its worker.
    flow.worker_cmd("accept")
    flow.worker_cmd("complete", message={"id": uid("m"), "parts": [{"media_type": "text/plain", "text": "done"}]})
    last = history(service, flow.task_id)[-1]
    assert (last["reason"], last["by"], last["state"]) == ("task_ended", "w1", "ended")


def test_an_exact_retry_of_a_fence_changes_no_history(service: Edge, clock: Clock) -> None:
    flow = Flow(service)
    flow.create()
    flow.acquire()
    body = {"command_id": uid("f"), "fence": 1}
    service.fence(WORKER, flow.task_id, body)
    before = history(service, flow.task_id)
    clock.advance(30)
    service.fence(WORKER, flow.task_id, body)  # replays its receipt
    assert history(service, flow.task_id) == before and before[0]["reason"] == "released"


def test_the_history_pages_like_a_stream(service: Edge) -> None:
    flow = Flow(service)
    flow.create()
    assert service.grants(CALLER, flow.task_id, None, None) == {"items": [], "next": 0, "has_more": False}
    flow.acquire()
    page = service.grants(CALLER, flow.task_id, 0, 10)
    assert page["next"] == 1 and not page["has_more"]
    from dovecote.platform.errors import InvalidArgument

    try:
        service.grants(CALLER, flow.task_id, 2, None)  # past the task's fence
    except InvalidArgument as exc:
        assert exc.code == "invalid_argument"
    else:
        raise AssertionError("an `after` past the fence is refused")


def test_a_generation_that_ended_before_the_history_was_kept_shows_only_its_grant() -> None:
    """Data written before lease ends were recorded: the grant is known, how it ended is not, and
    the history says nothing it does not know (no reason, no end time)."""
    from dovecote.tasks.model import Grant, Task
    from dovecote.tasks.reads import Generation
    from functions.tasks_api.models import GrantOut

    task = Task("acme", "t", "ws", "c", "working", 2, 1, 2, "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z")
    old = Generation.of(Grant("t", "w1", 1, "2026-01-01T00:00:01.000Z"), task.evolve(fence=1), None)
    assert GrantOut.model_validate(old).model_dump(mode="json") == {
        "sequence": 1,
        "fence": 1,
        "worker": "w1",
        "state": "ended",
        "granted_at": "2026-01-01T00:00:01.000Z",
    }
