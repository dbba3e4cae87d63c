"""The `dovecote dev --data` snapshot against moto: DynamoDB items, S3 object bodies and versions,
SQS messages, the KMS key (a data key sealed before the snapshot opens after it) and the secret
come back after moto's backends were reset; the write is atomic (a crash leaves the old one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra.local.persistence import SNAPSHOT, load_snapshot, save_snapshot


def _reset_moto() -> None:
    from moto.backends import get_backend

    for name in ("dynamodb", "s3", "sqs", "kms", "secretsmanager"):
        get_backend(name).reset()  # type: ignore[call-overload]


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


def test_a_crash_while_writing_keeps_the_old_snapshot(
    moto_env: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_snapshot(tmp_path, generation=1)
    before = (tmp_path / SNAPSHOT).read_bytes()
    import infra.local.persistence as persistence

    def crash(*_args: Any, **_kwargs: Any) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(persistence.os, "fsync", crash)
    with pytest.raises(OSError, match="disk gone"):
        save_snapshot(tmp_path, generation=2)
    assert (tmp_path / SNAPSHOT).read_bytes() == before
    assert load_snapshot(tmp_path) == 1
