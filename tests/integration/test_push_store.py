"""The webhook config store's conformance suite: every scenario on the in-memory store and on the
DynamoDB store over moto (with the deployment's sealing: the token and credentials are ciphertext
in the item, bound to their config). Plus what only DynamoDB shows: the secrets at rest, and a
failing write that leaves nothing behind."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from dovecote.platform.errors import InvalidArgument
from dovecote.push.memory import MemoryConfigStore
from dovecote.push.model import MAX_CONFIGS_PER_TASK, PushConfig

NOW = time.time()


def config(config_id: str = "w1", task: str = "t1", authority: str = "acme", **more: Any) -> PushConfig:
    return PushConfig(authority, task, config_id, "https://hooks.example.com/in", "2026-01-01T00:00:00.000Z", **more)


@pytest.fixture(params=["memory", "dynamo"])
def store(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "memory":
        yield MemoryConfigStore(clock=lambda: NOW)
        return
    env = request.getfixturevalue("moto_env")
    from dovecote.platform.protection import protector
    from dovecote.push.dynamo import DynamoConfigStore

    yield DynamoConfigStore(
        table=env["settings"].push_table,
        dynamodb=env["dynamodb"],
        protector=protector(env["settings"]),
        clock=lambda: NOW,
    )


def test_a_config_reads_back_with_its_secrets(store: Any) -> None:
    store.put(config(token="tok", scheme="Bearer", credentials="s3cret"), limit=10)
    found = store.get("acme", "t1", "w1")
    assert found is not None
    assert (found.url, found.token, found.scheme, found.credentials, found.delivered) == (
        "https://hooks.example.com/in",
        "tok",
        "Bearer",
        "s3cret",
        0,
    )
    assert [c.id for c in store.list("acme", "t1")] == ["w1"]


def test_authorities_and_tasks_are_apart(store: Any) -> None:
    store.put(config(), limit=10)
    assert store.get("other", "t1", "w1") is None
    assert store.get("acme", "t2", "w1") is None
    assert store.list("other", "t1") == [] and store.list("acme", "t2") == []


def test_the_same_id_again_replaces_the_settings_and_keeps_the_cursor(store: Any) -> None:
    store.put(config(token="old"), limit=10)
    store.advance(store.get("acme", "t1", "w1"), 4)
    again = store.put(config(token="new", delivered=0), limit=10)
    found = store.get("acme", "t1", "w1")
    assert found.token == "new" and found.delivered == 4 and again.delivered == 4


def test_a_task_holds_at_most_the_limit(store: Any) -> None:
    for i in range(MAX_CONFIGS_PER_TASK):
        store.put(config(f"w{i}"), limit=MAX_CONFIGS_PER_TASK)
    with pytest.raises(InvalidArgument):
        store.put(config("one-more"), limit=MAX_CONFIGS_PER_TASK)
    store.put(config("w0", token="changed"), limit=MAX_CONFIGS_PER_TASK)  # replacing is not adding
    store.delete("acme", "t1", "w0")
    store.put(config("one-more"), limit=MAX_CONFIGS_PER_TASK)


def test_delete_is_idempotent(store: Any) -> None:
    store.put(config(), limit=10)
    store.delete("acme", "t1", "w1")
    store.delete("acme", "t1", "w1")
    assert store.get("acme", "t1", "w1") is None


def test_the_cursor_only_moves_up_and_the_expiry_only_later(store: Any) -> None:
    store.put(config(), limit=10)
    found = store.get("acme", "t1", "w1")
    store.advance(found, 5, expires_at=int(NOW) + 100)
    store.advance(found, 3, expires_at=int(NOW) + 50)  # a late writer: neither goes back
    after = store.get("acme", "t1", "w1")
    assert after.delivered == 5 and after.expires_at == int(NOW) + 100
    store.advance(after, 6, expires_at=int(NOW) + 1000)
    assert store.get("acme", "t1", "w1").expires_at == int(NOW) + 1000


def test_a_failure_is_recorded_without_moving_the_cursor(store: Any) -> None:
    store.put(config(), limit=10)
    failure = {"at": "2026-01-01T00:00:00.000Z", "webhook_id": "wh_1", "sequence": 1, "status": 503}
    store.record_failure(store.get("acme", "t1", "w1"), failure)
    found = store.get("acme", "t1", "w1")
    assert found.last_failure == failure and found.delivered == 0


def test_an_expired_config_is_gone_at_once_and_its_id_free_again(store: Any) -> None:
    store.put(config(expires_at=int(NOW) - 1), limit=10)
    assert store.get("acme", "t1", "w1") is None
    store.put(config(token="fresh"), limit=10)
    assert store.get("acme", "t1", "w1").token == "fresh"


def test_advancing_a_deleted_config_does_not_bring_it_back(store: Any) -> None:
    store.put(config(), limit=10)
    found = store.get("acme", "t1", "w1")
    store.delete("acme", "t1", "w1")
    store.advance(found, 3, expires_at=int(NOW) + 10)
    store.record_failure(found, {"status": 500})
    assert store.get("acme", "t1", "w1") is None


def test_the_published_keys(store: Any) -> None:
    assert store.published_keys() is None
    jwks = {"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "abc", "kid": "k1", "use": "sig", "alg": "EdDSA"}]}
    store.publish_keys(jwks)
    assert store.published_keys() == jwks


# ---- DynamoDB only -------------------------------------------------------------------------------


def test_secrets_are_sealed_at_rest_and_bound_to_their_config(moto_env: dict[str, Any]) -> None:
    from dovecote.platform.protection import ProtectionError, protector
    from dovecote.push.dynamo import DynamoConfigStore

    settings = moto_env["settings"]
    store = DynamoConfigStore(table=settings.push_table, dynamodb=moto_env["dynamodb"], protector=protector(settings))
    store.put(config(token="tok-secret", scheme="Bearer", credentials="cred-secret"), limit=10)
    raw = moto_env["dynamodb"].scan(TableName=settings.push_table)["Items"]
    assert len(raw) == 1
    text = repr(raw)
    assert "tok-secret" not in text and "cred-secret" not in text
    # Moved to another config, the ciphertext does not open.
    item = dict(raw[0])
    item["sk"] = {"S": "C#w2"}
    item["id"] = {"S": "w2"}
    moto_env["dynamodb"].put_item(TableName=settings.push_table, Item=item)
    with pytest.raises(ProtectionError):
        store.get("acme", "t1", "w2")


def test_a_failed_write_stores_nothing(moto_env: dict[str, Any]) -> None:
    from dovecote.platform.errors import DomainError
    from dovecote.push.dynamo import DynamoConfigStore
    from tests.support.faults import failing, raise_, server_error

    settings = moto_env["settings"]
    store = DynamoConfigStore(table=settings.push_table, dynamodb=moto_env["dynamodb"])
    with failing(moto_env["dynamodb"], "before-call.dynamodb.PutItem", raise_(server_error("PutItem"))):
        with pytest.raises(DomainError):
            store.put(config(), limit=10)
    assert store.get("acme", "t1", "w1") is None
    assert moto_env["dynamodb"].scan(TableName=settings.push_table)["Items"] == []
