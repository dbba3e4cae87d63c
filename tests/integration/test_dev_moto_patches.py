"""moto's DynamoDB item size check, made once per item (infra/local/moto_patches.py): the same 400 KB
bound as unpatched moto, on a put and on an update that grows an item past it."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

# Unpatched moto's bound (LimitedSizeDict.__setitem__), measured as moto measures an item.
ITEM_SIZE_LIMIT = 405_000


def _item(total: int, attributes: int = 40) -> dict[str, Any]:
    """An item of `total` bytes as moto counts them (names + string values), over many attributes."""
    key = {"pk": {"S": "big"}, "sk": {"S": "-"}}
    used = sum(len(name) + len(value["S"]) for name, value in key.items())
    names = [f"a{i:02d}" for i in range(attributes)]
    left = total - used - sum(len(n) for n in names)
    sizes = [left // attributes + (1 if i < left % attributes else 0) for i in range(attributes)]
    return {**key, **{name: {"S": "x" * size} for name, size in zip(names, sizes, strict=True)}}


def test_an_item_at_the_bound_is_stored_whole_and_one_byte_over_is_refused(moto_env: dict[str, Any]) -> None:
    ddb, table = moto_env["dynamodb"], moto_env["settings"].memory_table
    at_bound = _item(ITEM_SIZE_LIMIT)
    ddb.put_item(TableName=table, Item=at_bound)
    stored = ddb.get_item(TableName=table, Key={"pk": {"S": "big"}, "sk": {"S": "-"}})["Item"]
    assert stored == at_bound
    with pytest.raises(ClientError) as refused:
        ddb.put_item(TableName=table, Item={**_item(ITEM_SIZE_LIMIT + 1), "sk": {"S": "other"}})
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "maximum allowed size" in refused.value.response["Error"]["Message"]
    assert "Item" not in ddb.get_item(TableName=table, Key={"pk": {"S": "big"}, "sk": {"S": "other"}})


def test_an_update_past_the_bound_is_refused(moto_env: dict[str, Any]) -> None:
    ddb, table = moto_env["dynamodb"], moto_env["settings"].memory_table
    key = {"pk": {"S": "big"}, "sk": {"S": "-"}}
    ddb.put_item(TableName=table, Item=_item(ITEM_SIZE_LIMIT - 100))
    with pytest.raises(ClientError) as refused:
        ddb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET more = :v",
            ExpressionAttributeValues={":v": {"S": "y" * 200}},
        )
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "more" not in ddb.get_item(TableName=table, Key=key)["Item"]
