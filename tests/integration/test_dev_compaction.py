"""Background compaction of `dovecote dev --data` (infra/local/persistence.py) against a real moto
server: writes keep coming while a forked child snapshots the state at the journal's cut, and a crash
before, during or after the child's work restores every acknowledged write exactly once (a counter
incremented with a non-idempotent `ADD` counts each acknowledged increment once)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moto.backends import get_backend
from moto.moto_server.werkzeug_app import MotoRequestHandler

import infra.local.snapshot as snapshot
from infra.local.journal import ORDER, JournalingApp, journal_generations
from infra.local.moto_patches import dispatcher_app, serialize_dynamodb, serialize_sqs
from infra.local.persistence import CompactionPolicy, DataDir
from infra.local.snapshot import BLOBS, SERVICES, SNAPSHOT, read_manifest
from tests.support.moto_server import moto_client, serving

serialize_dynamodb()
serialize_sqs()


def reset_moto() -> None:
    for name in SERVICES:
        get_backend(name).reset()  # type: ignore[call-overload]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, Any]]:
    reset_moto()
    app = JournalingApp(dispatcher_app())
    with serving(app, request_handler=MotoRequestHandler) as endpoint:
        dynamodb, s3 = moto_client("dynamodb", endpoint), moto_client("s3", endpoint)
        dynamodb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        s3.create_bucket(Bucket="bodies")
        data = tmp_path / "data"
        data.mkdir()
        store = DataDir(data, app, policy=CompactionPolicy(check_s=3600))
        store.compact()  # the first snapshot, as a first start writes it
        store.open_journal()
        try:
            yield {"app": app, "store": store, "data": data, "dynamodb": dynamodb, "s3": s3}
        finally:
            store._stop.set()
            if app.journal is not None:
                app.journal.close()
                app.journal = None
    reset_moto()


def increment(dynamodb: Any) -> None:
    dynamodb.update_item(
        TableName="t",
        Key={"pk": {"S": "counter"}},
        UpdateExpression="ADD n :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )


def count(dynamodb: Any) -> int:
    item = dynamodb.get_item(TableName="t", Key={"pk": {"S": "counter"}}, ConsistentRead=True).get("Item")
    return int(item["n"]["N"]) if item else 0


class Writers:
    """Threads that increment the counter and put S3 bodies until stopped; counts what was acknowledged."""

    def __init__(self, served: dict[str, Any], threads: int = 3) -> None:
        self.acknowledged = 0
        self.bodies: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(served, n)) for n in range(threads)]

    def _run(self, served: dict[str, Any], n: int) -> None:
        i = 0
        while not self._stop.is_set():
            i += 1
            increment(served["dynamodb"])
            with self._lock:
                self.acknowledged += 1
            if i % 5 == 0:
                key, body = f"k{n}-{i}", os.urandom(64) * (i % 7 + 1)
                served["s3"].put_object(Bucket="bodies", Key=key, Body=body)
                with self._lock:
                    self.bodies[key] = body

    def wait_for(self, count: int) -> None:
        """Until the writers have `count` writes acknowledged."""
        while self.acknowledged < count:
            time.sleep(0.01)

    def __enter__(self) -> Writers:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


def crash_and_recover(served: dict[str, Any]) -> DataDir:
    """What a kill -9 leaves: the files. moto's memory is thrown away and rebuilt from them."""
    app: JournalingApp = served["app"]
    if app.journal is not None:
        app.journal.close()
        app.journal = None
    reset_moto()
    store = DataDir(served["data"], app)
    store.recover()
    return store


def assert_recovered(served: dict[str, Any], writers: Writers, *, journals: int) -> None:
    """A crash now, then a restore that replays `journals` journals and has everything back."""
    recovered = crash_and_recover(served)
    assert recovered.restore["journals"] == journals
    assert_everything_back(served, writers)


def assert_everything_back(served: dict[str, Any], writers: Writers) -> None:
    assert count(served["dynamodb"]) == writers.acknowledged  # none lost, none applied twice
    for key, body in writers.bodies.items():
        assert served["s3"].get_object(Bucket="bodies", Key=key)["Body"].read() == body


def test_writes_during_background_compactions_are_neither_lost_nor_applied_twice(served: dict[str, Any]) -> None:
    store: DataDir = served["store"]
    with Writers(served) as writers:
        writers.wait_for(30)
        first = store.compact_in_background()
        writers.wait_for(80)
        second = store.compact_in_background()
    assert first["folded_records"] > 0 and second["folded_records"] > 0
    manifest = read_manifest(served["data"])
    assert manifest["generation"] == store.generation
    # What the last snapshot made stale is gone; the journal it continues holds the rest.
    assert journal_generations(served["data"]) == [store.generation]
    assert len(list((served["data"] / BLOBS).iterdir())) == manifest["blobs"] > 0  # unreferenced ones went
    assert_recovered(served, writers, journals=1)


def test_a_crash_before_the_child_commits_replays_both_journals(
    served: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    store: DataDir = served["store"]
    real = snapshot.write_atomically

    def die_at_the_manifest(path: Path, write: Any, **options: Any) -> None:
        if path.name == SNAPSHOT:
            os._exit(9)  # the child dies with its parts written and the manifest not
        real(path, write, **options)

    with Writers(served) as writers:
        writers.wait_for(30)
        before = read_manifest(served["data"])["generation"]
        monkeypatch.setattr(snapshot, "write_atomically", die_at_the_manifest)
        assert store.compact_in_background() == {}  # failed: reported, the journals stay
        monkeypatch.setattr(snapshot, "write_atomically", real)
        writers.wait_for(60)
    assert read_manifest(served["data"])["generation"] == before
    assert len(journal_generations(served["data"])) == 2
    assert_recovered(served, writers, journals=2)


def test_a_crash_after_the_commit_ignores_the_stale_journal(
    served: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    store: DataDir = served["store"]

    def die_before_cleaning(*_args: Any, **_kwargs: Any) -> int:
        os._exit(0)  # the manifest is in place; the old journal and parts are still there

    with Writers(served) as writers:
        writers.wait_for(30)
        monkeypatch.setattr(snapshot, "remove_stale", die_before_cleaning)
        store.compact_in_background()  # the child exits 0 without an answer: reported as failed
        monkeypatch.undo()
        writers.wait_for(60)
    manifest = read_manifest(served["data"])
    assert manifest["generation"] == store.generation
    assert journal_generations(served["data"]) == [manifest["generation"] - 1, manifest["generation"]]
    assert_recovered(served, writers, journals=1)  # the stale journal is never applied on top of the snapshot


def test_a_damaged_earlier_journal_stops_the_replay_there(served: dict[str, Any]) -> None:
    store: DataDir = served["store"]
    increment(served["dynamodb"])
    increment(served["dynamodb"])
    generation = store.generation
    # A cut without a snapshot (as when the child failed): journal g is closed, g+1 continues.
    with ORDER:
        assert served["app"].journal is not None
        served["app"].journal.close()
        store.generation += 1
    store.open_journal()
    increment(served["dynamodb"])
    path = store.journal_path(generation)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # the second record of journal g fails its CRC
    path.write_bytes(bytes(data))
    crash_and_recover(served)
    assert count(served["dynamodb"]) == 1  # the first record; nothing after the damage


def test_the_policy_triggers_on_replay_cost_records_size_and_age(served: dict[str, Any]) -> None:
    store: DataDir = served["store"]
    never = float("inf")
    store.policy = CompactionPolicy(replay_s=never, records=3, size_bytes=1 << 30, age_s=never)
    assert not store.due()  # an empty journal is never due
    increment(served["dynamodb"])
    assert not store.due()
    increment(served["dynamodb"])
    increment(served["dynamodb"])
    assert store.due()
    journal = served["app"].journal
    assert journal.cost_s > 0  # moto's CPU time serving them, counted as they were journaled
    store.policy = CompactionPolicy(replay_s=journal.cost_s, records=1000, size_bytes=1 << 30, age_s=never)
    assert store.due()
    store.policy = CompactionPolicy(replay_s=never, records=1000, size_bytes=journal.bytes, age_s=never)
    assert store.due()
    store.policy = CompactionPolicy(replay_s=never, records=1000, size_bytes=journal.bytes + 1, age_s=never)
    assert not store.due()
    store.policy = CompactionPolicy(replay_s=never, records=1000, size_bytes=1 << 30, age_s=0.0)
    assert store.due()  # any record, once the journal is old enough


def test_the_compactor_snapshots_once_the_journal_passes_its_size(served: dict[str, Any]) -> None:
    """The compactor thread alone (no call by hand): a 4 KB journal is folded into a new snapshot
    while writes go on, and a crash after it restores every acknowledged write from a short journal."""
    store: DataDir = served["store"]
    never = float("inf")
    store.policy = CompactionPolicy(replay_s=never, records=10**9, size_bytes=4096, age_s=never, check_s=0.05)
    first = store.generation
    store.start_background()
    with Writers(served, threads=2) as writers:
        deadline = time.monotonic() + 60
        while len(store.background) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    store._stop.set()
    assert store._thread is not None
    store._thread.join(timeout=60)  # a compaction in flight finishes (or fails) before the "crash"
    assert len(store.background) >= 2, "the compactor did not snapshot"
    assert all(figures["folded_records"] > 0 for figures in store.background)
    assert read_manifest(served["data"])["generation"] > first
    recovered = crash_and_recover(served)
    assert recovered.replayed < writers.acknowledged  # the snapshot holds the rest
    assert_everything_back(served, writers)


SEEN: list[dict[str, Any]] = []


def handler(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    SEEN.extend(event["Records"])
    return {"batchItemFailures": []}


def test_a_snapshot_keeps_only_the_stream_records_not_yet_consumed(served: dict[str, Any]) -> None:
    from infra.local.streams import StreamPoller, trim_consumed
    from infra.routes import Function

    dynamodb, store = served["dynamodb"], served["store"]
    dynamodb.create_table(
        TableName="streamed",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    streams = moto_client("dynamodbstreams", dynamodb.meta.endpoint_url)
    function = Function("test_stream", f"{__name__}.handler")
    SEEN.clear()
    poller = StreamPoller(dynamodb=dynamodb, streams=streams, table="streamed", function=function, batch_size=10)
    poller.bind()
    for i in range(25):
        dynamodb.put_item(TableName="streamed", Item={"pk": {"S": f"a{i:02d}"}})
    while poller.poll_once(handler):
        pass
    consumed = [r["dynamodb"]["SequenceNumber"] for r in SEEN]
    assert len(consumed) == 25
    for i in range(3):  # written after the poller's last read: not consumed
        dynamodb.put_item(TableName="streamed", Item={"pk": {"S": f"b{i}"}})
    store.before_cut = lambda: trim_consumed("streamed", dict(poller.checkpoint))
    store.compact_in_background()
    # The running poller's iterator is still valid after the trim of the live stream.
    SEEN.clear()
    while poller.poll_once(handler):
        pass
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in SEEN] == ["b0", "b1", "b2"]

    recovered_store = crash_and_recover(served)
    assert recovered_store.restore["journals"] == 1
    SEEN.clear()
    fresh = StreamPoller(dynamodb=dynamodb, streams=streams, table="streamed", function=function, batch_size=10)
    fresh.bind()
    while fresh.poll_once(handler):
        pass
    # From TRIM_HORIZON, a restarted poller gets only what the first had not handled, numbered as before.
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in SEEN] == ["b0", "b1", "b2"]
    assert int(SEEN[0]["dynamodb"]["SequenceNumber"]) == int(consumed[-1]) + 1


def test_a_clean_stop_with_nothing_journaled_writes_no_snapshot(served: dict[str, Any]) -> None:
    store: DataDir = served["store"]
    increment(served["dynamodb"])
    store.compact_in_background()
    parts = sorted(p.name for p in served["data"].glob("moto.state.*"))
    manifest = read_manifest(served["data"])
    store.close()
    assert read_manifest(served["data"]) == manifest  # the background snapshot already holds it all
    assert sorted(p.name for p in served["data"].glob("moto.state.*")) == parts
    recovered = crash_and_recover(served)
    assert recovered.replayed == 0 and count(served["dynamodb"]) == 1
    # Nothing to fold: the empty journal went, and the next one continues the snapshot's generation.
    assert recovered.generation == manifest["generation"] and not recovered._pending_fold
    assert journal_generations(served["data"]) == []


def test_a_clean_stop_lets_a_compaction_in_flight_finish_and_leaves_a_small_journal_to_replay(
    served: dict[str, Any],
) -> None:
    store: DataDir = served["store"]
    store.policy = CompactionPolicy(records=1, check_s=0.05)
    store.start_background()
    increment(served["dynamodb"])
    deadline = time.monotonic() + 30
    while not store._child and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store._child, "no compaction started"
    never = float("inf")
    store.policy = CompactionPolicy(replay_s=never, records=10**9, size_bytes=1 << 40, age_s=never, check_s=0.05)
    increment(served["dynamodb"])  # after the cut: in the new journal
    store.close()
    assert len(store.background) == 1  # the compaction in flight finished, it was not killed
    assert read_manifest(served["data"])["generation"] == store.generation == store.background[0]["generation"]
    recovered = crash_and_recover(served)
    assert recovered.replayed == 1 and count(served["dynamodb"]) == 2  # one cheap record: replayed, not snapshotted


def test_a_clean_stop_snapshots_a_journal_past_the_policy(served: dict[str, Any]) -> None:
    store: DataDir = served["store"]
    never = float("inf")
    store.policy = CompactionPolicy(replay_s=never, records=3, size_bytes=1 << 40, age_s=never)
    for _ in range(3):
        increment(served["dynamodb"])
    before = read_manifest(served["data"])["generation"]
    store.close()
    assert read_manifest(served["data"])["generation"] == store.generation > before
    recovered = crash_and_recover(served)
    assert recovered.replayed == 0 and count(served["dynamodb"]) == 3
