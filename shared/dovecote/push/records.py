"""The push table's items as PynamoDB models (layout and round trips in push/dynamo.py). Declared
with the placeholder table name and bound at wiring (`dovecote.platform.dynamo.bind`)."""

from __future__ import annotations

from pynamodb.attributes import BinaryAttribute, JSONAttribute, NumberAttribute, UnicodeAttribute

from dovecote.platform.dynamo import TableDef
from dovecote.platform.items import KeyedItem


class ConfigItem(KeyedItem):
    """pk "P#<authority>#<task>", sk "C#<config>": one webhook of one task. The token and the
    credentials sealed (platform/protection.py), absent when not set."""

    authority = UnicodeAttribute()
    task = UnicodeAttribute()
    id = UnicodeAttribute()
    url = UnicodeAttribute()
    created_at = UnicodeAttribute()
    token = BinaryAttribute(null=True, legacy_encoding=False)
    scheme = UnicodeAttribute(default="")
    credentials = BinaryAttribute(null=True, legacy_encoding=False)
    delivered = NumberAttribute(default=0)
    # DynamoDB's TTL deletes the item some time after this (epoch seconds); reads treat it as gone
    # at once. Absent while the task runs.
    expires_ttl = NumberAttribute(null=True)
    last_failure = JSONAttribute(null=True)


class KeysItem(KeyedItem):
    """pk "JWKS", sk "-": the public signing keys the sender signs with, as a JWKS."""

    jwks = JSONAttribute()


PUSH_TABLE = TableDef(
    "push_table",
    (ConfigItem, KeysItem),
    ttl="expires_ttl",
    description="webhook configs per task (their secrets sealed) and the published webhook signing keys",
)
