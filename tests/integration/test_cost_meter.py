"""bench/cost.py's Meter prices reads as DynamoDB does: a strongly consistent read 1 RRU per 4 KB
(a GetItem and each item of a BatchGetItem rounded on their own, a Query on its total), an
eventually consistent one half of that (the cost page's read figures rest on it)."""

from __future__ import annotations

from typing import Any

from bench.cost import Meter


def _table(ddb: Any) -> str:
    ddb.create_table(
        TableName="meter",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    for key in ("a", "b"):  # about 5 KB each: 2 RRU read strongly, 1 eventually
        ddb.put_item(TableName="meter", Item={"pk": {"S": key}, "v": {"S": "x" * 5000}})
    return "meter"


def test_reads_are_priced_by_their_consistency(moto_env: dict[str, Any]) -> None:
    ddb, s3 = moto_env["dynamodb"], moto_env["s3"]
    table = _table(ddb)
    keys = [{"pk": {"S": "a"}}, {"pk": {"S": "b"}}]
    figures = {}
    for consistent in (True, False):
        with Meter(ddb, s3) as meter:
            ddb.get_item(TableName=table, Key=keys[0], ConsistentRead=consistent)
        got = meter.rru
        with Meter(ddb, s3) as meter:
            ddb.batch_get_item(RequestItems={table: {"Keys": keys, "ConsistentRead": consistent}})
        figures[consistent] = (got, meter.rru)
    assert figures == {True: (2.0, 4.0), False: (1.0, 2.0)}


def test_a_read_after_an_eventually_consistent_one_is_priced_by_its_own_flag(moto_env: dict[str, Any]) -> None:
    ddb, s3 = moto_env["dynamodb"], moto_env["s3"]
    table = _table(ddb)
    with Meter(ddb, s3) as meter:
        ddb.get_item(TableName=table, Key={"pk": {"S": "a"}})  # eventually consistent by default
        ddb.get_item(TableName=table, Key={"pk": {"S": "b"}}, ConsistentRead=True)
    assert meter.rru == 3.0


def test_the_cost_pages_capacity_figures_from_the_real_items() -> None:
    # What the docs' cost page is built from (bench/cost.py on moto, the real adapters): the
    # capacity is deterministic, so it is held here; the dollars follow from it and the prices.
    from bench.cost import capacity_per_command

    figures = {label: (row["wru"], row["rru"]) for label, row in capacity_per_command().items()}
    assert {label: figures[label][0] for label in ("task create", "task claim", "task accept", "task complete")} == {
        "task create": 6.0,
        "task claim": 4.0,
        "task accept": 4.0,
        "task complete": 8.0,
    }
    # The reads: the task item once (1 RRU), a page of two messages' guards eventually consistent
    # (0.5 each), a message by id eventually consistent, an exact retry its receipt and task.
    reads = ("task get", "task events page", "task messages page", "task message by id", "task accept, exact retry")
    assert [figures[label][1] for label in reads] == [1.0, 1.0, 2.0, 0.5, 4.0]
