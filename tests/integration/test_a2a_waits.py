"""The bound on blocking A2A waits per authority (dovecote/a2a/waits.py), on both adapters: the
DynamoDB item over moto (serialized as `dovecote dev` serializes it), which bounds an authority across
every Lambda instance, and the same rule in one process. Real threads race for the slots."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from dovecote.a2a.waits import HOLD_SECONDS, MemoryWaits, Waits
from dovecote.a2a.waits_dynamo import DynamoWaits
from infra.local.metering import count_round_trips

LIMIT = 8


class Clock:
    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["dynamo", "memory"])
def make(request: pytest.FixtureRequest) -> Callable[[int, Clock], Waits]:
    if request.param == "memory":
        return lambda limit, clock: MemoryWaits(limit, clock=clock)
    env = request.getfixturevalue("moto_env")
    table = env["settings"].tasks_table
    return lambda limit, clock: DynamoWaits(table=table, dynamodb=env["dynamodb"], limit=limit, clock=clock)


def race(waits: Waits, authority: str, threads: int) -> list[str | None]:
    """`threads` takes at once (a barrier releases them together)."""
    barrier = threading.Barrier(threads)
    taken: list[str | None] = []
    lock = threading.Lock()

    def take() -> None:
        barrier.wait()
        got = waits.take(authority)
        with lock:
            taken.append(got)

    workers = [threading.Thread(target=take) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert len(taken) == threads
    return taken


def test_concurrent_takes_get_exactly_the_bound_and_other_authorities_are_not_touched(
    make: Callable[[int, Clock], Waits],
) -> None:
    clock = Clock()
    waits = make(LIMIT, clock)
    taken = race(waits, "acme", 32)
    held = [t for t in taken if t is not None]
    assert len(held) == LIMIT and len(set(held)) == LIMIT
    assert waits.take("acme") is None
    # Another authority has a bound of its own
    assert len([t for t in race(waits, "globex", 12) if t is not None]) == LIMIT
    # A slot given back is free again, once
    waits.give_back("acme", held[0])
    waits.give_back("acme", held[0])  # twice: harmless
    again = [t for t in race(waits, "acme", 4) if t is not None]
    assert len(again) == 1


def test_a_slot_whose_holder_never_gave_it_back_is_reclaimed_after_its_time(
    make: Callable[[int, Clock], Waits],
) -> None:
    clock = Clock()
    waits = make(2, clock)
    assert waits.take("acme") and waits.take("acme")  # two holders whose Lambda then timed out
    assert waits.take("acme") is None
    clock.now += HOLD_SECONDS - 1
    assert waits.take("acme") is None  # still within their time
    clock.now += 2
    assert waits.take("acme") is not None and waits.take("acme") is not None
    assert waits.take("acme") is None


def test_the_round_trips_are_those_the_design_states(moto_env: dict[str, Any]) -> None:
    waits = DynamoWaits(table=moto_env["settings"].tasks_table, dynamodb=moto_env["dynamodb"], limit=1, clock=Clock())
    with count_round_trips(moto_env["dynamodb"]) as taking:
        entry = waits.take("acme")
    with count_round_trips(moto_env["dynamodb"]) as refused:
        assert waits.take("acme") is None
    with count_round_trips(moto_env["dynamodb"]) as giving:
        assert entry is not None
        waits.give_back("acme", entry)
    assert dict(taking.calls) == {"dynamodb.UpdateItem": 1}
    assert dict(refused.calls) == {"dynamodb.UpdateItem": 1, "dynamodb.GetItem": 1}
    assert dict(giving.calls) == {"dynamodb.UpdateItem": 1}
