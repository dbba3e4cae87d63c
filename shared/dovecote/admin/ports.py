"""The TokenStore port (tests/integration/test_token_store.py holds the fake and DynamoDB to it).

- `put` inserts a new token; ids never repeat (a clash is a bug, raised as an error).
- `get` is a strongly consistent read by token id, across authorities (the authorizer does not know
  the authority yet); callers compare the authority themselves.
- `revoke` sets `revoked_at` once (a repeat keeps the first instant) and only inside `authority`:
  another authority's token is `None`, exactly like an absent one.
- `list` pages one authority's tokens, newest first, through an index: never a scan. It may lag a
  mint by the index's propagation delay (eventually consistent).
"""

from __future__ import annotations

from typing import Protocol

from dovecote.admin.model import TokenRecord


class TokenStore(Protocol):
    def put(self, record: TokenRecord) -> None: ...

    def get(self, token_id: str) -> TokenRecord | None: ...

    def revoke(self, authority: str, token_id: str, at: str) -> TokenRecord | None: ...

    def list(self, authority: str, after: str | None, limit: int) -> tuple[list[TokenRecord], str | None]: ...
