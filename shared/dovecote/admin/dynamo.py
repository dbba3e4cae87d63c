"""DynamoDB TokenStore: one item per token, keyed by the token's SHA-256."""

from __future__ import annotations

from typing import Any

from dovecote.admin.tokens import TokenRecord
from dovecote.platform.principal import Principal


class DynamoTokenStore:
    def __init__(self, *, table: str, dynamodb: Any) -> None:
        self._table = table
        self._ddb = dynamodb

    def put(self, record: TokenRecord) -> None:
        p = record.principal
        self._ddb.put_item(
            TableName=self._table,
            Item={
                "token_hash": {"S": record.token_hash},
                "authority": {"S": p.authority},
                "role": {"S": p.role},
                "worker": {"S": p.worker},
                "created_at": {"S": record.created_at},
            },
            ConditionExpression="attribute_not_exists(token_hash)",
        )

    def lookup(self, token_hash: str) -> Principal | None:
        item = self._ddb.get_item(
            TableName=self._table, Key={"token_hash": {"S": token_hash}}, ConsistentRead=True
        ).get("Item")
        if item is None:
            return None
        return Principal(authority=item["authority"]["S"], role=item["role"]["S"], worker=item["worker"]["S"])
