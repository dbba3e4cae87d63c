"""The DynamoDB ConfigStore, through the PynamoDB models of push/records.py.

One table, (pk, sk) strings; ids never contain '#', so keys are injective:
- config  P#<authority>#<task>, C#<config>   url, sealed token and credentials, cursor, expiry
- keys    JWKS, "-"                          the public signing keys the sender publishes

Round trips: put = a Query of the task's configs (the per-task bound; the same id again keeps its
cursor) + a PutItem (two racing creates may pass the bound by one);
get = 1 GetItem (strongly consistent); list = 1 Query; delete = 1 DeleteItem; advance = 1
conditional UpdateItem (the cursor up only, and the expiry later only, together), up to 3 when a
failure is recorded or a condition fails (then each apart). A read
treats a config past its expiry as gone (DynamoDB's TTL deletes it within days).

The token and the credentials are sealed with the record's identity as associated data
(`push|<authority>|<task>|<config>|<field>`): a ciphertext moved to another config does not open.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Protocol

from pynamodb.exceptions import DoesNotExist
from pynamodb.expressions.update import Action

from dovecote.platform.dynamo import bind, conditionally, pynamodb_errors
from dovecote.platform.errors import InvalidArgument
from dovecote.platform.protection import Unprotected
from dovecote.push.model import PushConfig
from dovecote.push.records import ConfigItem, KeysItem


class Sealer(Protocol):
    """What seals a webhook's secrets (platform/protection.py's Protector, or Unprotected)."""

    def seal(self, plaintext: bytes, identity: str) -> bytes: ...

    def open(self, stored: bytes, identity: str) -> bytes: ...


KEYS_PK = "JWKS"
NO_SORT = "-"
# The fields an item keeps as the config has them (the secrets are sealed, the numbers defaulted).
_PLAIN = ("authority", "task", "id", "url", "created_at")


def config_pk(authority: str, task: str) -> str:
    return f"P#{authority}#{task}"


def config_sk(config_id: str) -> str:
    return f"C#{config_id}"


def _identity(authority: str, task: str, config_id: str, name: str) -> str:
    return f"push|{authority}|{task}|{config_id}|{name}"


class DynamoConfigStore:
    def __init__(
        self,
        *,
        table: str,
        dynamodb: Any,
        protector: Sealer | None = None,
        clock: Any = time.time,
    ) -> None:
        self._configs = bind(ConfigItem, table=table, client=dynamodb)
        self._keys = bind(KeysItem, table=table, client=dynamodb)
        self._protector = protector or Unprotected()
        self._clock = clock

    def _seal(self, config: PushConfig, name: str, value: str) -> bytes | None:
        if not value:
            return None
        return self._protector.seal(value.encode("utf-8"), _identity(config.authority, config.task, config.id, name))

    def _open(self, item: ConfigItem, name: str, value: bytes | None) -> str:
        if not value:
            return ""
        identity = _identity(item.authority, item.task, item.id, name)
        return self._protector.open(bytes(value), identity).decode("utf-8")

    def _config(self, item: ConfigItem) -> PushConfig:
        return PushConfig(
            **{name: getattr(item, name) for name in _PLAIN},
            token=self._open(item, "token", item.token),
            scheme=item.scheme or "",
            credentials=self._open(item, "credentials", item.credentials),
            delivered=int(item.delivered or 0),
            expires_at=int(item.expires_ttl or 0),
            last_failure=item.last_failure,
        )

    def put(self, config: PushConfig, *, limit: int) -> PushConfig:
        now = self._clock()
        live = [c for c in self.list(config.authority, config.task) if c.live(now)]
        same = next((c for c in live if c.id == config.id), None)
        if same is None and len(live) >= limit:
            raise InvalidArgument(f"a task has at most {limit} webhooks", field="id", limit=limit)
        if same is not None:
            # The same id again replaces the settings; what it was notified of so far stays.
            config = replace(config, delivered=same.delivered, created_at=same.created_at, expires_at=same.expires_at)
        item = self._configs(
            config_pk(config.authority, config.task),
            config_sk(config.id),
            **{name: getattr(config, name) for name in _PLAIN},
            token=self._seal(config, "token", config.token),
            scheme=config.scheme,
            credentials=self._seal(config, "credentials", config.credentials),
            delivered=config.delivered,
            expires_ttl=config.expires_at or None,
        )
        with pynamodb_errors(write=True):
            item.save()
        return config

    def get(self, authority: str, task: str, config_id: str) -> PushConfig | None:
        with pynamodb_errors(write=False):
            try:
                item = self._configs.get(config_pk(authority, task), config_sk(config_id), consistent_read=True)
            except DoesNotExist:
                return None
        config = self._config(item)
        return config if config.live(self._clock()) else None

    def list(self, authority: str, task: str) -> list[PushConfig]:
        with pynamodb_errors(write=False):
            items = list(
                self._configs.query(config_pk(authority, task), self._configs.sk.startswith("C#"), consistent_read=True)
            )
        return [self._config(item) for item in items]

    def delete(self, authority: str, task: str, config_id: str) -> None:
        with pynamodb_errors(write=True):
            self._configs(config_pk(authority, task), config_sk(config_id)).delete()

    def _item(self, config: PushConfig) -> ConfigItem:
        return self._configs(config_pk(config.authority, config.task), config_sk(config.id))

    def record_failure(self, config: PushConfig, failure: dict[str, Any]) -> None:
        cls = self._configs
        item = self._item(config)
        conditionally(lambda: item.update(actions=[cls.last_failure.set(failure)], condition=cls.pk.exists()))

    def advance(self, config: PushConfig, delivered: int, *, expires_at: int | None = None) -> None:
        item = self._item(config)
        cls = self._configs
        # Up only: a delivery that moved it further already wins.
        moved = cls.pk.exists() & (cls.delivered.does_not_exist() | (cls.delivered < delivered))
        # Never shortened: a dead letter keeps its config for the dead-letter queue's retention.
        later = cls.pk.exists() & (cls.expires_ttl.does_not_exist() | (cls.expires_ttl < (expires_at or 0)))
        if delivered > config.delivered and expires_at is not None:
            both: list[Action] = [cls.delivered.set(delivered), cls.expires_ttl.set(expires_at)]
            if conditionally(lambda: item.update(actions=both, condition=moved & later)):
                return  # the usual case: one request
        if delivered > config.delivered:
            conditionally(lambda: item.update(actions=[cls.delivered.set(delivered)], condition=moved))
        if expires_at is not None:
            conditionally(lambda: item.update(actions=[cls.expires_ttl.set(expires_at)], condition=later))

    def published_keys(self) -> dict[str, Any] | None:
        with pynamodb_errors(write=False):
            try:
                return dict(self._keys.get(KEYS_PK, NO_SORT, consistent_read=True).jwks)
            except DoesNotExist:
                return None

    def publish_keys(self, jwks: dict[str, Any]) -> None:
        with pynamodb_errors(write=True):
            self._keys(KEYS_PK, NO_SORT, jwks=jwks).save()
