"""A change of the claim shard count keeps every claimable task claimable, on the fake and on
DynamoDB (moto): the reshard pass (TaskService.reshard_claimable, the dispatcher's first step and
`dovecote dev`'s at start) moves the entries written under the old count, and afterwards claims
take every task, strictly oldest first under one shard. Until it has run, a claim under the new
count does not see them: that is what the pass is for."""

from __future__ import annotations

from typing import Any

import pytest

from dovecote.platform.cursors import CursorSigner
from dovecote.platform.principal import Principal
from dovecote.tasks import leases
from dovecote.tasks.ports import ClaimableLayout, TaskStore
from dovecote.tasks.storage import FLEET_CLAIM_SHARDS, claim_shard
from infra.local.metering import count_round_trips
from tests.support.faults import failing
from tests.support.tasks import Edge, Flow, dynamo_store, edge, ids_in_distinct_shards, store_of, uid

KEY = b"reshard-key-0123456789abcdef0123"
WORKER = Principal("acme", "worker", "w-1")


@pytest.fixture(params=["memory", "dynamo"])
def store(request: pytest.FixtureRequest) -> TaskStore:
    return store_of(request)


def claim_all(service: Edge) -> list[str]:
    """Claim until nothing is claimable: the task ids in the order they were leased."""
    claimed: list[str] = []
    while True:
        try:
            claimed.append(service.claim(WORKER, {"command_id": uid("claim")}).body["assignment"]["task"]["id"])
        except Exception as exc:  # noqa: BLE001 - the stable code says which
            assert getattr(exc, "code", None) == "not_found", exc
            return claimed


def written_under_the_fleet_count(store: TaskStore, count: int = 6) -> tuple[Edge, list[str]]:
    """`count` tasks created in order by a deployment on FLEET_CLAIM_SHARDS shards, each in a shard of
    its own (so all but at most one lie outside shard 0, the one shard of the default layout)."""
    store.claim_shards = FLEET_CLAIM_SHARDS
    service = edge(store, CursorSigner(KEY))
    created = [Flow(service, task_id=t).create().body["id"] for t in ids_in_distinct_shards(count)]
    return service, created


def test_lowering_the_count_strands_tasks_until_the_pass_moves_them(store: TaskStore) -> None:
    # Given six tasks written under 16 shards, when the deployment drops to one shard ...
    service, created = written_under_the_fleet_count(store)
    store.claim_shards = 1
    outside = [t for t in created if claim_shard("acme", t, FLEET_CLAIM_SHARDS) != 0]
    assert len(outside) >= 5
    # ... a claim sees only what already sits in shard 0 (the hazard this pass exists for).
    visible = {t.id for t in store.claimable("acme", 0, 100)}
    assert visible.isdisjoint(outside)
    # When the pass runs: it moves exactly those, and the next pass finds nothing: the layout is current.
    assert service.reshard_claimable() == {"moved": len(outside), "done": False}
    assert service.reshard_claimable() == {"moved": 0, "done": True}
    assert store.claimable_layout() == ClaimableLayout(shards=1)
    # Then claims take every task, strictly oldest first (the reference rule), and nothing twice.
    assert claim_all(service) == created


def test_raising_the_count_moves_entries_out_of_the_one_shard(store: TaskStore) -> None:
    service = edge(store, CursorSigner(KEY))
    created = [Flow(service, task_id=t).create().body["id"] for t in ids_in_distinct_shards(6)]
    store.claim_shards = FLEET_CLAIM_SHARDS
    moved = service.reshard_claimable()["moved"]
    assert moved == sum(claim_shard("acme", t, FLEET_CLAIM_SHARDS) != 0 for t in created)
    assert service.reshard_claimable()["done"]
    for task_id in created:
        shard = claim_shard("acme", task_id, FLEET_CLAIM_SHARDS)
        assert task_id in {t.id for t in store.claimable("acme", shard, 100)}
    assert sorted(claim_all(service)) == sorted(created)


def test_a_pass_resumes_run_after_run_where_the_last_one_stopped(
    store: TaskStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given pages of 2 entries and a dispatcher run with no time left after each page ...
    service, created = written_under_the_fleet_count(store, 7)
    store.claim_shards = 1
    monkeypatch.setattr(leases, "RESHARD_PAGE", 2)
    runs, moved = 0, 0
    while True:
        runs += 1
        result = service.reshard_claimable(time_left_ms=lambda: 0)
        moved += result["moved"]
        if result["done"]:
            break
        assert runs < 20
    # ... each run did one page and left its place in the layout: 4 pages for the moving pass, 4 for
    # the pass that found nothing to move.
    assert runs == 8
    assert moved == sum(claim_shard("acme", t, FLEET_CLAIM_SHARDS) != 0 for t in created)
    assert claim_all(service) == created


def test_an_entry_an_old_writer_adds_during_the_pass_is_caught_by_the_next(store: TaskStore) -> None:
    # Given a pass that moved what it found ...
    service, created = written_under_the_fleet_count(store)
    store.claim_shards = 1
    assert service.reshard_claimable()["moved"] >= 5
    # ... when a writer still on the old count (a deployment rolling out) creates a task in shard 5 ...
    store.claim_shards = FLEET_CLAIM_SHARDS
    (late,) = [t for t in ids_in_distinct_shards(16, authority="acme") if claim_shard("acme", t, 16) == 5]
    Flow(service, task_id=late).create()
    store.claim_shards = 1
    # ... then the confirming pass moves it, and only the pass after that records the layout current.
    assert service.reshard_claimable() == {"moved": 1, "done": False}
    assert service.reshard_claimable() == {"moved": 0, "done": True}
    assert claim_all(service) == [*created, late]


def test_a_current_layout_costs_one_read(moto_env: dict[str, Any]) -> None:

    service = edge(dynamo_store(moto_env), CursorSigner(KEY))
    Flow(service).create()
    with count_round_trips(moto_env["dynamodb"]) as meter:
        assert service.reshard_claimable() == {"moved": 0, "done": True}  # a table no pass had seen
    assert meter.calls == {"dynamodb.GetItem": 1, "dynamodb.Scan": 1, "dynamodb.PutItem": 1}, meter.calls
    with count_round_trips(moto_env["dynamodb"]) as meter:
        assert service.reshard_claimable() == {"moved": 0, "done": True}
    assert meter.calls == {"dynamodb.GetItem": 1}, meter.calls


def test_a_task_leased_between_the_scan_and_the_move_is_not_made_claimable_again(moto_env: dict[str, Any]) -> None:
    """The move is conditioned on the entry the scan saw. Without that condition it would write a
    claimable key onto a task a worker has leased since, and a second worker could claim it too."""

    store = dynamo_store(moto_env)
    service, created = written_under_the_fleet_count(store, 3)
    store.claim_shards = 1
    outside = [t for t in created if claim_shard("acme", t, FLEET_CLAIM_SHARDS) != 0]
    victim = outside[-1]

    def lease_first(**_: Any) -> None:
        # Just before the pass's first move reaches DynamoDB, a worker acquires the victim.
        if not store.read("acme", None, victim).task.owner:  # type: ignore[union-attr]
            Flow(service, task_id=victim).acquire()

    with failing(moto_env["dynamodb"], "before-call.dynamodb.UpdateItem", lease_first):
        result = service.reshard_claimable()
    assert store.read("acme", None, victim).task.owner  # type: ignore[union-attr]
    assert result["moved"] == len(outside) - 1  # the victim's move lost to the lease, and wrote nothing
    everywhere = {t.id for shard in range(FLEET_CLAIM_SHARDS) for t in store.claimable("acme", shard, 100)}
    assert victim not in everywhere
    assert claim_all(service) == [t for t in created if t != victim]


def test_the_dispatcher_reshards_before_it_fences(moto_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheduled function itself (its real entry point): a deployment that lowered claim_shards
    has its stranded tasks moved by the next run, and claims take them oldest first."""
    from dovecote.platform.settings import get_settings
    from functions.lease_dispatcher import handler as dispatcher
    from tests.support.lambda_events import Context

    _, created = written_under_the_fleet_count(dynamo_store(moto_env))
    # A new container of the redeployed function reads the new count (1, the default).
    monkeypatch.delenv("DOVECOTE_CLAIM_SHARDS", raising=False)
    get_settings.cache_clear()
    dispatcher.service.cache_clear()

    class Remaining(Context):
        def get_remaining_time_in_millis(self) -> int:
            return 50_000

    try:
        first = dispatcher.handler({"source": "aws.events"}, Remaining(function_name="lease_dispatcher"))
        assert first["resharded"] == sum(claim_shard("acme", t, FLEET_CLAIM_SHARDS) != 0 for t in created)
        assert dispatcher.handler({}, Remaining(function_name="lease_dispatcher"))["resharded"] == 0
        assert dispatcher.service().store.claimable_layout() == ClaimableLayout(shards=1)
    finally:
        dispatcher.service.cache_clear()
    assert claim_all(edge(dynamo_store(moto_env), CursorSigner(KEY))) == created
