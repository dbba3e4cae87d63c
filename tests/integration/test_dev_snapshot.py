"""The `dovecote dev --data` snapshot against moto: DynamoDB items, S3 object bodies and versions,
SQS messages, the KMS key (a data key sealed before the snapshot opens after it) and the secret
come back after moto's backends were reset; the write is atomic (a crash leaves the old one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.local.snapshot import SNAPSHOT, load_snapshot, save_snapshot


def _reset_moto() -> None:
    from moto.backends import get_backend

    for name in ("dynamodb", "s3", "sqs", "kms", "secretsmanager"):
        get_backend(name).reset()  # type: ignore[call-overload]


@pytest.fixture(autouse=True)
def fresh_moto() -> Iterator[None]:
    """A loaded snapshot replaces moto's backends: the next test starts from empty ones."""
    yield
    _reset_moto()


def test_state_survives_a_snapshot_round_trip(moto_env: dict[str, Any], tmp_path: Path) -> None:
    from dovecote.platform import aws

    settings = moto_env["settings"]
    dynamodb, s3, sqs, kms = moto_env["dynamodb"], moto_env["s3"], moto_env["sqs"], aws.client("kms")
    dynamodb.put_item(TableName=settings.tokens_table, Item={"token_id": {"S": "x"}, "v": {"N": "7"}})
    body = b"\x00body" * 200_000  # 1.2 MB: past the SpooledTemporaryFile's memory size
    first = s3.put_object(Bucket=settings.bucket, Key="notes/k", Body=b"old")["VersionId"]
    s3.put_object(Bucket=settings.bucket, Key="notes/k", Body=body)
    sqs.send_message(
        QueueUrl=settings.memory_queue_url, MessageBody="write", MessageGroupId="g", MessageDeduplicationId="d"
    )
    sealed = kms.generate_data_key(KeyId=settings.data_key_id, KeySpec="AES_256")
    save_snapshot(tmp_path, generation=3)
    _reset_moto()
    with pytest.raises(Exception, match="ResourceNotFound|non-existent table|not found"):
        dynamodb.get_item(TableName=settings.tokens_table, Key={"token_id": {"S": "x"}})

    assert load_snapshot(tmp_path) == 3
    item = dynamodb.get_item(TableName=settings.tokens_table, Key={"token_id": {"S": "x"}})
    assert item["Item"]["v"] == {"N": "7"}
    assert s3.get_object(Bucket=settings.bucket, Key="notes/k")["Body"].read() == body
    assert s3.get_object(Bucket=settings.bucket, Key="notes/k", VersionId=first)["Body"].read() == b"old"
    received = sqs.receive_message(QueueUrl=settings.memory_queue_url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in received] == ["write"]
    assert kms.decrypt(CiphertextBlob=sealed["CiphertextBlob"])["Plaintext"] == sealed["Plaintext"]
    secret = aws.client("secretsmanager").get_secret_value(SecretId=settings.cursor_secret_arn)
    assert secret["SecretString"]
    # The restored backends keep working: new writes, new locks.
    dynamodb.put_item(TableName=settings.tokens_table, Item={"token_id": {"S": "y"}})


def test_bodies_stay_in_their_blob_files_until_read_and_survive_another_snapshot(
    moto_env: dict[str, Any], tmp_path: Path
) -> None:
    from infra.local.snapshot import BLOBS, LazyBody

    settings, s3 = moto_env["settings"], moto_env["s3"]
    bodies = {f"notes/{i}": bytes([i]) * (1000 + i) for i in range(5)}
    for key, body in bodies.items():
        s3.put_object(Bucket=settings.bucket, Key=key, Body=body)
    s3.put_object(Bucket=settings.bucket, Key="notes/same", Body=bodies["notes/0"])  # one blob, two keys
    save_snapshot(tmp_path, generation=1)
    assert len(list((tmp_path / BLOBS).iterdir())) == 5
    _reset_moto()
    load_snapshot(tmp_path)
    from moto.backends import get_backend

    keys = [
        key
        for account in get_backend("s3").values()  # type: ignore[call-overload]
        for backend in account.values()
        for key in backend.buckets[settings.bucket].keys.values()
    ]
    assert keys and all(isinstance(k._value_buffer, LazyBody) and k._value_buffer._file is None for k in keys)
    assert s3.get_object(Bucket=settings.bucket, Key="notes/1")["Body"].read() == bodies["notes/1"]
    s3.delete_object(Bucket=settings.bucket, Key="notes/4")
    # Untouched bodies are named by their digest again; the deleted key's blob goes (the bucket is
    # versioned: its old version stays, so does the blob).
    save_snapshot(tmp_path, generation=2)
    _reset_moto()
    load_snapshot(tmp_path)
    for key, body in bodies.items():
        if key != "notes/4":
            assert s3.get_object(Bucket=settings.bucket, Key=key)["Body"].read() == body
    assert s3.get_object(Bucket=settings.bucket, Key="notes/same")["Body"].read() == bodies["notes/0"]
    s3.put_object(Bucket=settings.bucket, Key="notes/1", Body=b"new")  # a restored key's body replaced
    assert s3.get_object(Bucket=settings.bucket, Key="notes/1")["Body"].read() == b"new"


def test_a_crash_while_writing_keeps_the_old_snapshot(
    moto_env: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_snapshot(tmp_path, generation=1)
    before = (tmp_path / SNAPSHOT).read_bytes()
    import infra.local.snapshot as snapshot

    def crash(*_args: Any, **_kwargs: Any) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(snapshot.os, "fsync", crash)
    with pytest.raises(OSError, match="disk gone"):
        save_snapshot(tmp_path, generation=2)
    assert (tmp_path / SNAPSHOT).read_bytes() == before
    assert load_snapshot(tmp_path) == 1


def test_a_blob_left_short_is_written_again(tmp_path: Path) -> None:
    """A blob renamed into place but never synced (a power cut before the manifest that would have
    named it) can be short: the next snapshot that needs that body writes it again."""
    from infra.local.snapshot import Blobs

    body = b"a body" * 1000
    first = Blobs(tmp_path)
    digest = first.put(body)
    first.sync()
    (tmp_path / digest).write_bytes(body[:10])
    again = Blobs(tmp_path)
    assert again.put(body) == digest
    assert again.written == 1
    assert again.read(digest) == body
    third = Blobs(tmp_path)
    assert third.put(body) == digest
    assert third.written == 0  # whole now: not written a third time


def test_the_moto_pin_is_the_installed_moto() -> None:
    """The snapshot pickles moto's own classes (a DynamoDB item's LimitedSizeDict, S3's FakeKey and
    _VersionedKeyStore): the project pins the one moto version it was written against."""
    import re
    import tomllib

    from infra.local.snapshot import moto_version

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"].values()
    pins = [d for extra in extras for d in extra if d.startswith("moto")]
    (pin,) = pins
    assert re.fullmatch(r"moto\[server\]==[0-9.]+", pin), pin
    assert pin.split("==")[1] == moto_version()
    from moto.dynamodb.models.dynamo_type import LimitedSizeDict  # noqa: F401 - the classes the pickler names
    from moto.s3.models import FakeKey  # noqa: F401
    from moto.s3.utils import _VersionedKeyStore  # noqa: F401


def test_a_snapshot_written_by_another_moto_is_refused_before_anything_loads(
    moto_env: dict[str, Any], tmp_path: Path
) -> None:
    import json

    from moto.backends import get_backend

    from infra.local.snapshot import SnapshotOfAnotherMoto, moto_version, read_manifest

    save_snapshot(tmp_path, 1)
    manifest = read_manifest(tmp_path)
    assert manifest["moto"] == moto_version()
    assert load_snapshot(tmp_path) == 1  # the same version loads
    manifest["moto"] = "4.0.0"
    (tmp_path / SNAPSHOT).write_text(json.dumps(manifest))
    before = dict(get_backend("dynamodb"))  # type: ignore[call-overload]
    with pytest.raises(SnapshotOfAnotherMoto, match="moto 4.0.0"):
        load_snapshot(tmp_path)
    assert dict(get_backend("dynamodb")) == before  # type: ignore[call-overload]
