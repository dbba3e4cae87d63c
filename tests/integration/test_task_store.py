"""Beyond the conformance suite (tests/integration/test_task_machine.py, every scenario on both
TaskStores): races with real threads, faults at each AWS call, and round trips."""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from dovecote.platform.cursors import CursorSigner
from dovecote.platform.errors import CommitUnknown, DomainError, Throttled
from dovecote.tasks.storage import FLEET_CLAIM_SHARDS, claim_shard
from infra.local.metering import count_round_trips
from tests.support.faults import failing
from tests.support.tasks import (
    CALLER,
    WORKER,
    Edge,
    Flow,
    ShardOrder,
    code_of,
    dynamo_store,
    edge,
    message,
    service_fixture,
    uid,
)
from tests.support.threads import together

KEY = b"task-integration-key-0123456789ab"


service = service_fixture(KEY)


@pytest.fixture
def dynamo(moto_env: dict[str, Any]) -> tuple[Edge, dict[str, Any]]:
    return edge(dynamo_store(moto_env), CursorSigner(KEY)), moto_env


def test_large_parts_go_to_s3_and_come_back(dynamo: tuple[Edge, dict[str, Any]]) -> None:
    service, env = dynamo
    big = "x" * (64 * 1024)
    flow = Flow(service)
    service.create(
        CALLER,
        {
            "command_id": uid("c"),
            "workspace": "ws",
            "id": flow.task_id,
            "context": "c",
            "message": {
                "id": uid("m"),
                "parts": [
                    {"media_type": "text/plain", "text": big},
                    {"media_type": "application/octet-stream", "data_b64": "AAEC"},
                ],
            },
        },
    )
    parts = service.messages(CALLER, flow.task_id, None, None)["items"][0]["parts"]
    # The large part comes as a presigned URL (a page never carries it), the small one inline.
    import hashlib

    import requests

    assert parts[1] == {"media_type": "application/octet-stream", "data_b64": "AAEC"}
    assert parts[0]["sha256"] == hashlib.sha256(big.encode()).hexdigest() and parts[0]["size"] == len(big)
    assert requests.get(parts[0]["download_url"], timeout=30).content == big.encode()
    objects = env["s3"].list_objects_v2(Bucket=env["settings"].bucket, Prefix="parts/acme/").get("Contents", [])
    assert len(objects) == 1  # content-addressed; the small part stayed inline


# ---- races, real threads against moto ------------------------------------------------------------


def race(count: int, target: Any) -> list[str]:
    """Each thread's outcome: "ok" or its DomainError's code (any other failure fails the test)."""
    outcomes = together(count, target)
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, DomainError):
            raise outcome
    return sorted(o.code if isinstance(o, DomainError) else "ok" for o in outcomes)


def test_two_accepts_at_the_same_revision(dynamo: tuple[Edge, dict[str, Any]]) -> None:
    service, _ = dynamo
    flow = Flow(service).to_state("submitted")
    flow.acquire()
    outcomes = race(
        2,
        lambda i: service.accept(
            WORKER, flow.task_id, {"command_id": uid("c"), "expected_revision": 1, "fence": flow.fence}
        ),
    )
    assert outcomes == ["ok", "revision_conflict"]
    assert service.get(CALLER, flow.task_id)["task"]["revision"] == 2


def test_cancel_races_complete(dynamo: tuple[Edge, dict[str, Any]]) -> None:
    service, _ = dynamo
    for _ in range(3):
        flow = Flow(service).to_state("working")
        revision = flow.revision

        def act(i: int, flow: Flow = flow, revision: int = revision) -> None:
            if i == 0:
                service.cancel(CALLER, flow.task_id, {"command_id": uid("c"), "expected_revision": revision})
            else:
                service.complete(
                    WORKER,
                    flow.task_id,
                    {
                        "command_id": uid("c"),
                        "expected_revision": revision,
                        "fence": flow.fence,
                        "submission_id": uid("s"),
                        "message": message(),
                    },
                )

        outcomes = race(2, act)
        assert outcomes.count("ok") == 1 and len(outcomes) == 2
        task = service.get(CALLER, flow.task_id)["task"]
        assert task["state"] in ("canceled", "completed") and task["revision"] == revision + 1
        assert task["revision"] == task["event_count"]
        with pytest.raises(DomainError):
            service.get_lease(WORKER, flow.task_id)  # the lease is gone


def test_eight_workers_claim_100_tasks_each_exactly_once(dynamo: tuple[Edge, dict[str, Any]]) -> None:
    from dovecote.platform.principal import Principal

    service, _ = dynamo
    created = {Flow(service).create().body["id"] for _ in range(100)}
    claimed: list[tuple[str, str]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def worker(i: int) -> None:
        me = Principal("acme", "worker", f"worker-{i}")
        barrier.wait()
        while True:
            try:
                assignment = service.claim(me, {"command_id": uid("claim")}).body["assignment"]
            except DomainError as err:
                if err.code == "not_found":
                    return
                raise
            with lock:
                claimed.append((assignment["task"]["id"], assignment["worker"]))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = [task for task, _ in claimed]
    assert sorted(ids) == sorted(created) and len(set(ids)) == 100


def test_after_fence_and_reacquire_every_old_fence_command_is_stale(dynamo: tuple[Edge, dict[str, Any]]) -> None:
    service, _ = dynamo
    flow = Flow(service).to_state("submitted")
    flow.acquire()
    old = flow.fence
    service.fence(WORKER, flow.task_id, {"command_id": uid("c"), "fence": old})
    flow.acquire()
    for kind in ("accept", "reject", "fail"):
        with pytest.raises(DomainError) as caught:
            getattr(service, kind)(WORKER, flow.task_id, {"command_id": uid("c"), "expected_revision": 1, "fence": old})
        assert caught.value.code == "stale_lease" and caught.value.details["current_fence"] == old + 1
    outcomes = race(
        4,
        lambda i: service.accept(
            WORKER, flow.task_id, {"command_id": uid("c"), "expected_revision": 1, "fence": old if i % 2 else old + 1}
        ),
    )
    assert outcomes == ["ok", "revision_conflict", "stale_lease", "stale_lease"]


# ---- faults at each AWS call -----------------------------------------------------------------------


def _error(code: str, op: str, reasons: list[dict[str, str]] | None = None) -> ClientError:
    response: dict[str, Any] = {"Error": {"Code": code, "Message": "injected"}}
    if reasons:
        response["CancellationReasons"] = reasons
    return ClientError(response, op)


def _state(env: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(
        env["dynamodb"].scan(TableName=env["settings"].tasks_table)["Items"], key=lambda i: (i["pk"]["S"], i["sk"]["S"])
    )


def commits_nothing(env: dict[str, Any], event: str, error: Exception, raised: type[Exception], call: Any) -> None:
    """`call` raises `raised` while `event` fails with `error` (an s3 or dynamodb client event), and the
    tasks table is as it was."""
    before = _state(env)
    with failing(env[event.split(".")[1]], event, error), pytest.raises(raised):
        call()
    assert _state(env) == before


FAULTS = {
    "conflict at the commit": (
        "before-call.dynamodb.TransactWriteItems",
        _error("TransactionCanceledException", "TransactWriteItems", [{"Code": "TransactionConflict"}] * 4),
        CommitUnknown,
        False,
    ),
    "throttle at the commit": (
        "before-call.dynamodb.TransactWriteItems",
        _error("ThrottlingException", "TransactWriteItems"),
        CommitUnknown,
        False,
    ),
    "timeout after the commit": (
        "after-call.dynamodb.TransactWriteItems",
        ReadTimeoutError(endpoint_url="https://dynamodb"),
        CommitUnknown,
        True,
    ),
    "throttle at the read": (
        "before-call.dynamodb.TransactGetItems",
        _error("ThrottlingException", "TransactGetItems"),
        Throttled,
        False,
    ),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_faults_leave_nothing_partial_and_the_exact_retry_converges(
    dynamo: tuple[Edge, dict[str, Any]], fault: str
) -> None:
    service, env = dynamo
    event, error, raised, committed = FAULTS[fault]
    flow = Flow(service).to_state("working")
    body = {
        "command_id": "the-command",
        "expected_revision": flow.revision,
        "fence": flow.fence,
        "message": message("input please", message_id="m-fault"),
    }
    before = _state(env)
    with failing(env["dynamodb"], event, error), pytest.raises(raised):
        service.request_input(WORKER, flow.task_id, body)
    after = _state(env)
    if committed:
        # The receipt and the message's id guard (holding the message); the task replaced, its new
        # event and the message's place inline (v1 wrote 4 items: the message and event too).
        assert len(after) == len(before) + 2
    else:
        assert after == before  # nothing partial
    first = service.request_input(WORKER, flow.task_id, body)
    again = service.request_input(WORKER, flow.task_id, body)
    assert first.body == again.body and first.body["revision"] == flow.revision + 1
    task = service.get(CALLER, flow.task_id)["task"]
    assert (task["revision"], task["event_count"], task["message_count"]) == (flow.revision + 1,) * 2 + (2,)


def test_round_trips(dynamo: tuple[Edge, dict[str, Any]]) -> None:
    service, env = dynamo
    clients = (env["dynamodb"], env["s3"])
    flow = Flow(service)
    with count_round_trips(*clients) as meter:
        flow.create()
    assert meter.total == 2, meter.calls
    with count_round_trips(*clients) as meter:
        flow.acquire()
    assert meter.total == 2, meter.calls
    body = {"command_id": "rt-accept", "expected_revision": 1, "fence": flow.fence}
    with count_round_trips(*clients) as meter:
        service.accept(WORKER, flow.task_id, body)
    assert meter.total == 2, meter.calls
    with count_round_trips(*clients) as meter:
        service.accept(WORKER, flow.task_id, body)  # exact replay
    assert meter.total == 1, meter.calls
    # A claim, one shard (the default, the reference rule): the receipt's GetItem, one Query, the
    # TransactWriteItems; nothing claimable: the GetItem and the Query.
    Flow(service).create()
    with count_round_trips(*clients) as meter:
        service.claim(WORKER, {"command_id": uid("claim")})
    assert meter.calls == {"dynamodb.GetItem": 1, "dynamodb.Query": 1, "dynamodb.TransactWriteItems": 1}
    with count_round_trips(*clients) as meter:
        code_of(lambda: service.claim(WORKER, {"command_id": uid("claim")}))
    assert meter.calls == {"dynamodb.GetItem": 1, "dynamodb.Query": 1}, meter.calls
    # A fleet's shards: one Query in each of two shards (their order forced so that the task's shard
    # is one of the two); nothing claimable: every shard read once.
    service.store.claim_shards = FLEET_CLAIM_SHARDS
    task_id = Flow(service).create().body["id"]
    service.leases.rng = ShardOrder(claim_shard("acme", task_id, FLEET_CLAIM_SHARDS))
    with count_round_trips(*clients) as meter:
        service.claim(WORKER, {"command_id": uid("claim")})
    assert meter.calls == {"dynamodb.GetItem": 1, "dynamodb.Query": 2, "dynamodb.TransactWriteItems": 1}
    with count_round_trips(*clients) as meter:
        code_of(lambda: service.claim(WORKER, {"command_id": uid("claim")}))
    assert meter.calls == {"dynamodb.GetItem": 1, "dynamodb.Query": FLEET_CLAIM_SHARDS}, meter.calls


def test_a_failed_part_upload_commits_nothing_and_the_retry_converges(
    dynamo: tuple[Edge, dict[str, Any]],
) -> None:
    service, env = dynamo
    flow = Flow(service).to_state("working")
    big = {"id": "m-big", "parts": [{"media_type": "text/plain", "text": "y" * 20_000}]}
    body = {"command_id": "big-ask", "expected_revision": flow.revision, "fence": flow.fence, "message": big}
    put_fails = _error("InternalError", "PutObject")
    commits_nothing(
        env,
        "before-call.s3.PutObject",
        put_fails,
        CommitUnknown,
        lambda: service.request_input(WORKER, flow.task_id, body),
    )
    assert service.request_input(WORKER, flow.task_id, body).body["state"] == "input_required"
    # The part was written once more on the retry; content addressing makes that a no-op.
    assert service.request_input(WORKER, flow.task_id, body).body["revision"] == flow.revision + 1
    part = service.messages(CALLER, flow.task_id, 1, None)["items"][0]["parts"][0]
    # Over the inline size: the page carries a download URL and the digest, not the bytes.
    assert part["download_url"] and part["size"] == 20_000
    assert part["sha256"] == hashlib.sha256(b"y" * 20_000).hexdigest()
