"""The recall table's items, as PynamoDB models (bound at wiring: dovecote.platform.dynamo.bind).

One item per upload that was handed a URL and is not indexed yet:
  pk `a#<authority>`, sk `upload#<upload_id>`; format, project, project folder, created/expiry
  instants, status (pending | failed) and the error of a failed one. `ttl` (epoch seconds) lets
  DynamoDB's TTL delete entries for URLs that were never used.
One item per transcript file an authority ingested, by the SHA-256 of its bytes (recall/digests.py):
  pk `a#<authority>`, sk `sha#<hex>`; nothing else.
"""

from __future__ import annotations

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from dovecote.platform.dynamo import TableDef
from dovecote.platform.items import KeyedItem

UPLOAD_PREFIX = "upload#"
DIGEST_PREFIX = "sha#"


def ledger_partition(authority: str) -> str:
    return "a#" + authority


class UploadRecord(KeyedItem):
    format = UnicodeAttribute()
    project = UnicodeAttribute(default="")
    project_folder = UnicodeAttribute(default="")
    created_at = UnicodeAttribute()
    expires_at = UnicodeAttribute()
    status = UnicodeAttribute(default="pending")
    error = UnicodeAttribute(default="")
    ttl = NumberAttribute(null=True)


class DigestRecord(KeyedItem):
    """Its key is all it holds: the digest is in sk."""


RECALL_TABLE = TableDef(
    "recall_table", (UploadRecord, DigestRecord), ttl="ttl", description="the transcript ingest ledger"
)
