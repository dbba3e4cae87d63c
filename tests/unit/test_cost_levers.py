"""The cost levers of bench/cost.py: what folding more of a command's items into its task item would
cost, from the items the commands really write, and the prices on-demand and provisioned."""

from __future__ import annotations

import pytest

from bench.cost import EVERYTHING, LEVERS, PRICES, UTILISATION, folded_wru, item_role, price_per_million, wru

# A task complete as the layout built writes it: (role, bytes, bytes of attribute names past 2 characters).
COMPLETE = [[("receipt", 484, 14), ("task", 906, 116), ("guard", 395, 23), ("guard", 21, 2)]]


def test_a_transaction_costs_two_units_per_item_per_started_kilobyte() -> None:
    assert folded_wru(COMPLETE, frozenset(), False) == 8  # four items under 1 KB
    assert folded_wru([[("task", 1025, 0)]], frozenset(), False) == 4
    assert wru(1024) == 1 and wru(1025) == 2


def test_folding_merges_items_into_the_task_item_and_can_cross_a_kilobyte() -> None:
    # The receipt folded: 906 + 484 bytes is one item of two started KB, as dear as the two items.
    assert folded_wru(COMPLETE, frozenset({"receipt"}), False) == 8
    # The guards folded: 906 + 395 + 21 bytes, two KB: 4 + the receipt's 2.
    folded, short_names = LEVERS["id guards in the task item (message, submission ids per task)"]
    assert folded_wru(COMPLETE, folded, short_names) == 6
    # Everything, with 2-character names: 1,806 - 155 = 1,651 bytes, still two KB.
    assert folded_wru(COMPLETE, EVERYTHING, True) == 4
    assert LEVERS["as built"] == (frozenset(), False)


def test_item_roles_come_from_the_keys() -> None:
    def key(pk: str, sk: str) -> dict[str, dict[str, str]]:
        return {"pk": {"S": pk}, "sk": {"S": sk}}

    assert item_role(key("C#acme#cmd", "-")) == "receipt"
    assert item_role(key("T#acme#t1", "T")) == "task"
    assert item_role(key("T#acme#t1", "E#00000000000000000002")) == "event"
    assert item_role(key("T#acme#t1", "G#00000000000000000001")) == "event"  # a grant: the claim's event
    assert item_role(key("T#acme#t1", "M#00000000000000000002")) == "message"
    assert item_role(key("MID#acme#m1", "-")) == "guard"
    assert item_role(key("S#acme#s1", "-")) == "guard"


def test_provisioned_capacity_is_priced_per_unit_at_its_utilisation() -> None:
    capacity = {"wru": 4.0, "rru": 4.0, "index_wru": 3.0, "s3_put": 0, "s3_get": 0}
    on_demand = price_per_million(capacity, memory_mb=1024, duration_ms=10)
    provisioned = price_per_million(capacity, memory_mb=1024, duration_ms=10, provisioned=True)
    per_wru = PRICES["dynamodb_wcu_hour"] / (3600 * UTILISATION) * 1e6
    per_rru = PRICES["dynamodb_rcu_hour"] / (3600 * UTILISATION) * 1e6
    assert provisioned["dynamodb"] == pytest.approx(4 * per_wru + 4 * per_rru)
    assert on_demand["dynamodb"] == pytest.approx(4 * 0.625 + 4 * 0.125)
    assert provisioned["dynamodb"] < on_demand["dynamodb"]  # at 70 %: $0.26 a million WRU against $0.625
    # Index writes are apart from the goal's total, and in the total with them.
    assert on_demand["dynamodb_indexes"] == pytest.approx(3 * 0.625)
    assert on_demand["total_with_indexes"] == pytest.approx(on_demand["total"] + 3 * 0.625)
    # Lambda bills its duration per started millisecond: 10.2 ms is 11.
    assert price_per_million(capacity, memory_mb=1024, duration_ms=10.2)["lambda"] == pytest.approx(
        0.20 + 0.011 * 0.0000133334 * 1e6
    )
