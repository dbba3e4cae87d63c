"""The cost levers of bench/cost.py: what folding a command's items into its task item would cost,
from the items the commands really write (issue [16/16], "levers to measure, not assume")."""

from __future__ import annotations

from bench.cost import EVERYTHING, LEVERS, folded_wru, item_role, wru

# A task complete as it is written today: (role, bytes, bytes of attribute names past 2 characters).
COMPLETE = [
    [("receipt", 484, 20), ("task", 433, 200), ("guard", 33, 9), ("message", 402, 20), ("event", 142, 40)],
]


def test_a_transaction_costs_two_units_per_item_per_started_kilobyte() -> None:
    assert folded_wru(COMPLETE, frozenset(), False) == 10  # five items under 1 KB
    assert folded_wru([[("task", 1025, 0)]], frozenset(), False) == 4
    assert wru(1024) == 1 and wru(1025) == 2


def test_folding_merges_items_into_the_task_item_and_can_cross_a_kilobyte() -> None:
    assert folded_wru(COMPLETE, frozenset({"receipt"}), False) == 8  # task + receipt = 917 bytes
    # Everything in the task item is 1,494 bytes: one item of two started KB.
    assert folded_wru(COMPLETE, EVERYTHING, False) == 4
    # With 2-character attribute names it is 1,205 bytes: still two KB.
    assert folded_wru(COMPLETE, EVERYTHING, True) == 4
    assert folded_wru([[("receipt", 600, 100), ("task", 600, 200)]], frozenset({"receipt"}), True) == 2


def test_keeping_the_id_guards_keeps_an_item_per_guard() -> None:
    folded, short_names = LEVERS["all but the id guards in the task item"]
    assert "guard" not in folded and folded < EVERYTHING
    # task + receipt + message + event = 1,461 bytes (two started KB), beside the guard's own item.
    assert folded_wru(COMPLETE, folded, short_names) == 6


def test_item_roles_come_from_the_keys() -> None:
    def key(pk: str, sk: str) -> dict[str, dict[str, str]]:
        return {"pk": {"S": pk}, "sk": {"S": sk}}

    assert item_role(key("C#acme#cmd", "-")) == "receipt"
    assert item_role(key("T#acme#t1", "T")) == "task"
    assert item_role(key("T#acme#t1", "E#00000000000000000002")) == "event"
    assert item_role(key("T#acme#t1", "G#00000000000000000001")) == "event"  # a grant: the claim's event
    assert item_role(key("T#acme#t1", "M#00000000000000000002")) == "message"
    assert item_role(key("MID#acme#t1#m1", "-")) == "guard"
    assert item_role(key("S#acme#t1#s1", "-")) == "guard"
