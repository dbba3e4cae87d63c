"""The tokens table's item: one per token, keyed by its public id.

The listing index projects only what a listing shows: `token_hash` is not in it, so no query on the
index can return it. `expires_ttl` lets DynamoDB delete a token 30 days after it expired; the
authorizer refuses it from `expires_at` on, the TTL only tidies the table.
"""

from __future__ import annotations

from pynamodb.attributes import TTLAttribute, UnicodeAttribute
from pynamodb.indexes import GlobalSecondaryIndex, IncludeProjection
from pynamodb.models import Model

from dovecote.platform.dynamo import PLACEHOLDER_TABLE, TableDef

LISTED = ["role", "worker", "agent", "created_at", "expires_at", "minted_by", "revoked_at"]


class TokensByAuthority(GlobalSecondaryIndex["TokenItem"]):
    class Meta:
        index_name = "by_authority"
        projection = IncludeProjection(LISTED)

    authority = UnicodeAttribute(hash_key=True)
    list_sk = UnicodeAttribute(range_key=True)  # created_at#token_id: newest first when reversed


class TokenItem(Model):
    class Meta:
        table_name = PLACEHOLDER_TABLE

    token_id = UnicodeAttribute(hash_key=True)
    token_hash = UnicodeAttribute()
    authority = UnicodeAttribute()
    role = UnicodeAttribute()
    worker = UnicodeAttribute(default="")
    agent = UnicodeAttribute(default="")
    created_at = UnicodeAttribute()
    expires_at = UnicodeAttribute()
    minted_by = UnicodeAttribute()
    revoked_at = UnicodeAttribute(null=True)
    list_sk = UnicodeAttribute()
    expires_ttl = TTLAttribute(null=True)

    by_authority = TokensByAuthority()


TOKENS_TABLE = TableDef("tokens_table", (TokenItem,), ttl="expires_ttl", description="bearer tokens, hashed")
