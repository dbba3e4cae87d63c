"""A `dovecote dev --data` directory written when a table's stream had another view type (the tasks
table's carried keys only before the task item's new image; an older one had none) gets its model's
stream at restore (infra/local/resources.align_streams): the webhook fan-out's filter reads the new
image, so a keys-only stream would notify nothing."""

from __future__ import annotations

from typing import Any

from dovecote.tasks.records import TASKS_TABLE
from infra.local.resources import align_streams
from infra.local.streams import streams_client


def test_a_stream_of_another_view_type_gets_the_models(moto_env: dict[str, Any]) -> None:
    ddb, table = moto_env["dynamodb"], moto_env["settings"].tasks_table
    ddb.update_table(TableName=table, StreamSpecification={"StreamEnabled": False})  # as an older DIR had it
    assert align_streams() == [table]
    described = ddb.describe_table(TableName=table)["Table"]
    assert described["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": TASKS_TABLE.stream}
    assert align_streams() == []  # already as declared: nothing changes
    ddb.put_item(TableName=table, Item={"pk": {"S": "T#acme#t1"}, "sk": {"S": "T"}, "ne": {"N": "1"}})
    streams = streams_client()
    arn = described["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    it = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    (record,) = streams.get_records(ShardIterator=it)["Records"]
    assert record["dynamodb"]["NewImage"]["ne"] == {"N": "1"}
