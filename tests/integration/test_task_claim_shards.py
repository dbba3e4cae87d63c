"""Claims across the claimable index's shards on DynamoDB (moto), with real threads (issue 21): a
backlog drained by workers claiming at once is leased exactly once and none of it is lost, with the
fleet's shards and with the reference's one shard (the default); long-polling workers take tasks created while they
wait, whatever shard each lands in."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from dovecote.platform.cursors import CursorSigner
from dovecote.platform.errors import NotFound
from dovecote.platform.principal import Principal
from dovecote.tasks.storage import FLEET_CLAIM_SHARDS, claim_shard
from tests.support.tasks import Edge, Flow, dynamo_store, edge, uid
from tests.support.threads import together

KEY = b"claim-shards-key-0123456789abcdef"


def drain(
    service: Edge, workers: int, wait_seconds: int = 1, done: Callable[[], bool] = lambda: True
) -> list[tuple[str, str, int]]:
    """Each worker (an identity of its own) claims, long-polling `wait_seconds`, until nothing is
    claimable once `done()`: the (task, worker, fence) of every claim."""

    def work(n: int) -> list[tuple[str, str, int]]:
        me = Principal("acme", "worker", f"drain-{n}")
        mine = []
        while True:
            try:
                body = service.claim(me, {"command_id": uid("claim"), "wait_seconds": wait_seconds}).body
            except NotFound:
                if done():
                    return mine
                continue
            assignment = body["assignment"]
            mine.append((assignment["task"]["id"], assignment["worker"], assignment["fence"]))

    results = together(workers, work)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return [claim for result in results for claim in result]


def assert_leased_exactly_once(service: Edge, created: set[str], claimed: list[tuple[str, str, int]]) -> None:
    per_task = Counter(task for task, _, _ in claimed)
    assert set(per_task) == created  # none lost, nothing else leased
    assert max(per_task.values()) == 1  # none leased twice
    assert {fence for _, _, fence in claimed} == {1}
    store: Any = service.store
    for task, worker, _ in claimed:
        # The store agrees: the grant history's one record names the claimer, and it owns the task.
        grant = store.grant("acme", task, 1)
        assert grant is not None and grant.worker == worker and store.grant("acme", task, 2) is None
        assert service.get_lease(Principal("acme", "worker", worker), task)["assignment"]["worker"] == worker
    assert all(not store.claimable("acme", shard, 100) for shard in range(store.claim_shards))


@pytest.mark.parametrize("shards", [FLEET_CLAIM_SHARDS, 1])
def test_sixteen_workers_drain_a_backlog_leasing_each_task_exactly_once(moto_env: dict[str, Any], shards: int) -> None:
    service = edge(dynamo_store(moto_env, claim_shards=shards), CursorSigner(KEY))
    created = {Flow(service, task_id=f"drain-{i:03d}").create().body["id"] for i in range(48)}
    Flow(service).to_state("canceled")  # not claimable: never leased
    if shards > 1:
        assert len({claim_shard("acme", task, shards) for task in created}) == shards  # these ids use every shard
    claimed = drain(service, 16)
    assert_leased_exactly_once(service, created, claimed)


def test_long_polling_workers_take_tasks_created_while_they_wait_in_any_shard(moto_env: dict[str, Any]) -> None:
    service = edge(dynamo_store(moto_env, claim_shards=FLEET_CLAIM_SHARDS), CursorSigner(KEY))
    created: set[str] = set()

    def produce() -> None:
        for _ in range(32):
            created.add(Flow(service).create().body["id"])
            time.sleep(0.02)

    producer = threading.Thread(target=produce)
    producer.start()  # the workers start on an empty backlog: their first claims wait
    claimed = drain(service, 8, wait_seconds=2, done=lambda: not producer.is_alive())
    producer.join()
    assert len({claim_shard("acme", task, FLEET_CLAIM_SHARDS) for task in created}) > 8
    assert_leased_exactly_once(service, created, claimed)
