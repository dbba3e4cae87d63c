"""The `dovecote dev --data` journal in front of a real moto server: boto3 writes are journaled,
moto's state is thrown away, the journal is replayed through moto's own dispatch, and the state is
back; an S3 object version keeps the id its PUT was answered with (DynamoDB items name it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from moto.backends import get_backend
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app

from infra.local.journal import Journal, JournalingApp, read_records, replay
from tests.support.moto_server import moto_client, serving


@pytest.fixture
def journaled(tmp_path: Path) -> Iterator[tuple[JournalingApp, str]]:
    app = JournalingApp(DomainDispatcherApplication(create_backend_app))
    app.journal = Journal(tmp_path / "journal")
    try:
        with serving(app, request_handler=MotoRequestHandler) as endpoint:
            yield app, endpoint
    finally:
        for name in ("s3", "dynamodb"):
            get_backend(name).reset()  # type: ignore[call-overload]


def test_replayed_journal_restores_items_and_object_versions(
    journaled: tuple[JournalingApp, str], tmp_path: Path
) -> None:
    app, endpoint = journaled
    s3, dynamodb = moto_client("s3", endpoint), moto_client("dynamodb", endpoint)
    s3.create_bucket(Bucket="bodies")
    s3.put_bucket_versioning(Bucket="bodies", VersioningConfiguration={"Status": "Enabled"})
    first = s3.put_object(Bucket="bodies", Key="notes/a", Body=b"one")["VersionId"]
    second = s3.put_object(Bucket="bodies", Key="notes/a", Body=b"two")["VersionId"]
    dynamodb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    for n in range(3):  # the last write wins only if the order is kept
        dynamodb.put_item(TableName="t", Item={"pk": {"S": "note"}, "version": {"S": [first, second][n % 2]}})
    dynamodb.get_item(TableName="t", Key={"pk": {"S": "note"}})  # a read: not journaled
    assert app.journal is not None
    app.journal.close()
    records = list(read_records(tmp_path / "journal"))
    assert len(records) == 8

    for name in ("s3", "dynamodb"):
        get_backend(name).reset()  # type: ignore[call-overload]
    assert replay(app.app, records) == (8, 0)

    item = dynamodb.get_item(TableName="t", Key={"pk": {"S": "note"}})["Item"]
    assert item["version"] == {"S": first}
    assert s3.get_object(Bucket="bodies", Key="notes/a", VersionId=first)["Body"].read() == b"one"
    assert s3.get_object(Bucket="bodies", Key="notes/a", VersionId=second)["Body"].read() == b"two"
    assert s3.get_object(Bucket="bodies", Key="notes/a")["Body"].read() == b"two"
