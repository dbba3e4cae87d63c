"""A DynamoDB Streams event-source emulator for the local runtime: it polls moto's stream of a
table and invokes the consumer handler with Lambda's DynamoDB stream event shape, batch by batch,
honouring `batchItemFailures` by retrying from the first failed record."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from infra.local.sources import EventSource, Handler, lambda_context
from infra.routes import Function


def streams_client() -> Any:
    """The emulator's own Streams client. Account-based endpoints are off because moto does not
    route `<account>.streams-ddb.<region>.amazonaws.com`; in the cloud, Lambda's event source
    mapping reads the stream and no Dovecote code calls this API."""
    import boto3
    from botocore.config import Config

    config = Config(region_name=os.environ.get("AWS_REGION", "us-east-1"), account_id_endpoint_mode="disabled")
    return boto3.session.Session().client("dynamodbstreams", config=config)


def matches(pattern: Any, value: Any) -> bool:
    """The subset of Lambda event filtering the event sources use: nested objects, lists of allowed
    values, {"prefix": ...}, and {"exists": true} (the field is there, whatever its value)."""
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(k in value and matches(p, value[k]) for k, p in pattern.items())
    if isinstance(pattern, list):
        return any(_rule(rule, value) for rule in pattern)
    return bool(pattern == value)


def _rule(rule: Any, value: Any) -> bool:
    if not isinstance(rule, dict):
        return bool(value == rule)
    if "exists" in rule:
        return rule["exists"] is True  # reached: the field exists ({"exists": false} is not supported)
    return isinstance(value, str) and value.startswith(rule["prefix"])


class StreamPoller(EventSource):
    def __init__(
        self,
        *,
        dynamodb: Any,
        streams: Any,
        table: str,
        function: Function,
        batch_size: int = 5,
        interval_s: float = 0.2,
        max_attempts: int = 3,
        event_filter: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(function=function, name=f"stream-{table}", interval_s=interval_s)
        self._ddb = dynamodb
        self._streams = streams
        self._table = table
        self._batch_size = batch_size
        self._max_attempts = max_attempts
        self._filter = event_filter
        self._iterators: dict[str, str | None] = {}
        self.delivered = 0
        self.failures: list[dict[str, Any]] = []
        # Per shard, the last sequence number handled (delivered, or given up on): what the local
        # runtime may drop from moto's stream before a snapshot (`trim_consumed`).
        self.checkpoint: dict[str, int] = {}

    def bind(self) -> StreamPoller:
        """Find the table's stream; `poll_once` can then be driven by hand (tests)."""
        self._arn = self._ddb.describe_table(TableName=self._table)["Table"]["LatestStreamArn"]
        return self

    def poll_once(self, handler: Handler) -> int:
        shards = self._streams.describe_stream(StreamArn=self._arn)["StreamDescription"]["Shards"]
        delivered = 0
        for shard in shards:
            shard_id = shard["ShardId"]
            if shard_id not in self._iterators:
                self._iterators[shard_id] = self._streams.get_shard_iterator(
                    StreamArn=self._arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
            iterator = self._iterators[shard_id]
            if iterator is None:
                continue
            response = self._streams.get_records(ShardIterator=iterator, Limit=self._batch_size)
            records = [{**r, "eventSourceARN": self._arn, "awsRegion": "us-east-1"} for r in response["Records"]]
            if self._filter is not None:
                records = [r for r in records if matches(self._filter, r)]
            if records:
                self._deliver(handler, records)
                delivered += len(records)
            if response["Records"]:
                self.checkpoint[shard_id] = int(response["Records"][-1]["dynamodb"]["SequenceNumber"])
            self._iterators[shard_id] = response.get("NextShardIterator")
        self.delivered += delivered
        return delivered

    def _deliver(self, handler: Handler, records: list[dict[str, Any]]) -> None:
        pending = records
        for _attempt in range(self._max_attempts):
            try:
                result = handler({"Records": pending}, lambda_context(self.function)) or {}
                failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
            except Exception:  # noqa: BLE001 - like Lambda: an error fails the whole batch
                # (Powertools raises BatchProcessingError when every record of a batch failed.)
                failed = {r["dynamodb"]["SequenceNumber"] for r in pending}
            if not failed:
                return
            # Like Lambda: resume from the first failed sequence number.
            first = next(i for i, r in enumerate(pending) if r["dynamodb"]["SequenceNumber"] in failed)
            pending = pending[first:]
            time.sleep(self._interval)
        # Like the cloud's on-failure destination: keep what could not be processed, and say so.
        self.failures.extend(pending)
        logging.getLogger("dovecote-dev").error(
            "%s gave up on %d stream record(s) after %d attempts", self.function.name, len(pending), self._max_attempts
        )


def trim_consumed(table: str, checkpoint: dict[str, int]) -> int:
    """Drop from moto's stream of `table` the records up to each shard's checkpoint (what the local
    poller has handled); returns how many went. Call under moto's DynamoDB lock.

    moto keeps every stream record forever (DynamoDB keeps them 24 hours), each with the item's old
    and new image: half of a snapshot after 10,000 note writes, and all of it re-delivered to the
    janitor after every restart (the poller starts at TRIM_HORIZON). moto numbers a shard's records
    from `starting_sequence_number` by position, so that number moves up by as many as are dropped:
    every record keeps its sequence number and the iterators past the checkpoint stay valid."""
    from moto.backends import get_backend

    dropped = 0
    for account in get_backend("dynamodb").values():  # type: ignore[call-overload]
        for backend in account.values():
            found = backend.tables.get(table)
            shard = getattr(found, "stream_shard", None) if found is not None else None
            if shard is None or shard.id not in checkpoint:
                continue
            count = min(len(shard.items), checkpoint[shard.id] - shard.starting_sequence_number + 1)
            if count > 0:
                del shard.items[:count]
                shard.starting_sequence_number += count
                dropped += count
    return dropped
