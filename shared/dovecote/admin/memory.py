"""In-memory TokenStore: the fake held to the same suite as the DynamoDB adapter."""

from __future__ import annotations

import threading

from dovecote.admin.model import TokenRecord


def list_key(record: TokenRecord) -> str:
    return f"{record.created_at}#{record.token_id}"


class InMemoryTokenStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.records: dict[str, TokenRecord] = {}

    def put(self, record: TokenRecord) -> None:
        with self._lock:
            if record.token_id in self.records:
                raise ValueError("token id clash")
            self.records[record.token_id] = record

    def get(self, token_id: str) -> TokenRecord | None:
        return self.records.get(token_id)

    def revoke(self, authority: str, token_id: str, at: str) -> TokenRecord | None:
        with self._lock:
            record = self.records.get(token_id)
            if record is None or record.principal.authority != authority:
                return None
            self.records[token_id] = record = record.revoked(at)
            return record

    def list(self, authority: str, after: str | None, limit: int) -> tuple[list[TokenRecord], str | None]:
        mine = sorted(
            (r for r in self.records.values() if r.principal.authority == authority), key=list_key, reverse=True
        )
        if after is not None:
            mine = [r for r in mine if list_key(r) < after]
        page = mine[:limit]
        return page, (list_key(page[-1]) if len(mine) > limit else None)
