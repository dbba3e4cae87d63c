"""The moto_env fixture keeps botocore clients for a worker's life: nothing one test leaves on them (an
event hook, a table) reaches the next, and other tests still start from an empty client cache."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from dovecote.platform import aws
from tests.support.faults import inject, server_error
from tests.support.moto_env import kept_clients, shared_symmetric_rsa


def test_a_hook_left_on_a_kept_client_does_not_reach_the_next_test() -> None:
    with mock_aws(), kept_clients():
        first = aws.client("dynamodb")
        first.create_table(
            TableName="left-over",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        inject(first, "before-call.dynamodb.ListTables", server_error("ListTables"))
        first.meta.events.register("before-call.dynamodb.DescribeTable", lambda **_: None, unique_id="a-test's own")
        with pytest.raises(ClientError):
            first.list_tables()
    assert aws.client("dynamodb") is not first  # outside the fixture, the module's cache starts empty
    aws.reset_clients()
    with mock_aws(), kept_clients():
        again = aws.client("dynamodb")
        assert again is first
        assert again.list_tables()["TableNames"] == []
        assert "a-test's own" not in again.meta.events._emitter._unique_id_handlers


def test_reset_clients_inside_the_fixture_forgets_the_kept_ones() -> None:
    with mock_aws(), kept_clients():
        first = aws.client("s3")
        aws.reset_clients()
        assert aws.client("s3") is not first


def test_symmetric_keys_share_the_unused_rsa_key_but_not_their_material() -> None:
    with mock_aws(), shared_symmetric_rsa(), kept_clients():
        kms = aws.client("kms")
        one, two = (kms.create_key()["KeyMetadata"]["KeyId"] for _ in range(2))
        sealed = kms.encrypt(KeyId=one, Plaintext=b"secret")["CiphertextBlob"]
        assert kms.decrypt(CiphertextBlob=sealed, KeyId=one)["Plaintext"] == b"secret"
        with pytest.raises(ClientError):
            kms.decrypt(CiphertextBlob=sealed, KeyId=two)
        signing = kms.create_key(KeyUsage="SIGN_VERIFY", KeySpec="RSA_2048")["KeyMetadata"]["KeyId"]
        other = kms.create_key(KeyUsage="SIGN_VERIFY", KeySpec="RSA_2048")["KeyMetadata"]["KeyId"]
        assert kms.get_public_key(KeyId=signing)["PublicKey"] != kms.get_public_key(KeyId=other)["PublicKey"]
