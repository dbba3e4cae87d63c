"""The DynamoDB TokenStore: one `TokenItem` per token (admin/records.py).

Round trips: mint 1 (conditional PutItem), authenticate 1 (strongly consistent GetItem by id),
revoke 1 (conditional UpdateItem), list 1 Query per page on `by_authority` (eventually consistent:
a token minted a moment ago may be missing from a listing, never from authentication).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from dovecote.admin.model import TokenRecord
from dovecote.admin.records import TokenItem
from dovecote.platform.dynamo import bind, pynamodb_errors
from dovecote.platform.principal import Principal

TTL_GRACE = timedelta(days=30)


class DynamoTokenStore:
    def __init__(self, *, table: str, dynamodb: Any) -> None:
        self._items = bind(TokenItem, table=table, client=dynamodb)

    def put(self, record: TokenRecord) -> None:
        p = record.principal
        item = self._items(
            token_id=record.token_id,
            token_hash=record.token_hash,
            authority=p.authority,
            role=p.role,
            worker=p.worker,
            agent=p.agent,
            created_at=record.created_at,
            expires_at=record.expires_at,
            minted_by=record.minted_by,
            list_sk=f"{record.created_at}#{record.token_id}",
            expires_ttl=datetime.fromisoformat(record.expires_at.replace("Z", "+00:00")) + TTL_GRACE,
        )
        with pynamodb_errors(write=True):
            item.save(condition=self._items.token_id.does_not_exist())

    def get(self, token_id: str) -> TokenRecord | None:
        with pynamodb_errors(write=False):
            try:
                return _record(self._items.get(token_id, consistent_read=True))
            except self._items.DoesNotExist:
                return None

    def revoke(self, authority: str, token_id: str, at: str) -> TokenRecord | None:
        from pynamodb.exceptions import UpdateError

        items = self._items
        item = items(token_id=token_id)
        with pynamodb_errors(write=True):
            try:
                # if_not_exists keeps the first revocation instant on a repeat.
                item.update(
                    actions=[items.revoked_at.set(items.revoked_at | at)],
                    condition=(items.authority == authority),
                )
            except UpdateError as exc:
                if exc.cause_response_code == "ConditionalCheckFailedException":
                    return None  # absent, or another authority's: the same answer
                raise
        return _record(item)

    def list(self, authority: str, after: str | None, limit: int) -> tuple[list[TokenRecord], str | None]:
        index = self._items.by_authority
        condition = self._items.list_sk < after if after else None
        with pynamodb_errors(write=False):
            results = index.query(authority, condition, scan_index_forward=False, limit=limit + 1)
            items = list(results)
        page = [_record(i) for i in items[:limit]]
        return page, (items[limit - 1].list_sk if len(items) > limit else None)


def _record(item: TokenItem) -> TokenRecord:
    return TokenRecord(
        token_id=item.token_id,
        token_hash=getattr(item, "token_hash", None) or "",
        principal=Principal(item.authority, item.role, item.worker or "", item.agent or ""),  # type: ignore[arg-type]
        created_at=item.created_at,
        expires_at=item.expires_at,
        minted_by=item.minted_by,
        revoked_at=item.revoked_at or "",
    )
