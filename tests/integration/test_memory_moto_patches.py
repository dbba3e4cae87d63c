"""The moto patches the memory queue relies on (infra/local/moto_patches.py), at moto's level:
SQS FIFO redelivers a message group in order, and DynamoDB survives racing updates of one item."""

from __future__ import annotations

import threading
import time
from typing import Any


def test_a_fifo_group_that_became_visible_again_is_delivered_from_its_head(moto_env: dict[str, Any]) -> None:
    sqs = moto_env["sqs"]
    url = sqs.create_queue(QueueName="order.fifo", Attributes={"FifoQueue": "true", "VisibilityTimeout": "1"})[
        "QueueUrl"
    ]
    for body in ("x", "y", "z"):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g", MessageDeduplicationId=body)
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in first] == ["x", "y", "z"]  # none deleted: all fail
    time.sleep(1.2)
    again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in again] == ["x", "y", "z"]  # unpatched moto answers ["z"]


def test_racing_updates_of_one_item_all_succeed(moto_env: dict[str, Any]) -> None:
    ddb, table = moto_env["dynamodb"], moto_env["settings"].memory_table
    ddb.put_item(TableName=table, Item={"pk": {"S": "x"}, "sk": {"S": "-"}})
    errors: list[str] = []

    def hammer(k: int) -> None:
        for i in range(100):
            try:
                ddb.update_item(
                    TableName=table,
                    Key={"pk": {"S": "x"}, "sk": {"S": "-"}},
                    UpdateExpression=f"SET a{k}_{i % 7} = :v REMOVE a{k}_{(i + 3) % 7}",
                    ExpressionAttributeValues={":v": {"S": "y"}},
                )
            except Exception as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(repr(exc))

    threads = [threading.Thread(target=hammer, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    item = ddb.get_item(TableName=table, Key={"pk": {"S": "x"}, "sk": {"S": "-"}})["Item"]
    assert {f"a{k}_{(99) % 7}" for k in range(6)} <= set(item)
