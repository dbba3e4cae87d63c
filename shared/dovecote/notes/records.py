"""The notes table's items (see notes/dynamo.py for the layout and the round trips).

Both kinds share the key schema (pk, ref). The note item carries the body when it is small and the
S3 version it pins; a view item carries only the listing fields.
"""

from __future__ import annotations

from pynamodb.attributes import BinaryAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from dovecote.platform.dynamo import PLACEHOLDER_TABLE, TableDef


class _Listing(Model):
    """The fields a listing returns; every notes item has them."""

    class Meta:
        table_name = PLACEHOLDER_TABLE

    pk = UnicodeAttribute(hash_key=True)
    ref = UnicodeAttribute(range_key=True)
    key = UnicodeAttribute()
    run = NumberAttribute()
    name = UnicodeAttribute()
    author = UnicodeAttribute()
    size = NumberAttribute()
    sha256 = UnicodeAttribute()
    content_type = UnicodeAttribute()
    updated_at = UnicodeAttribute()


class NoteItem(_Listing):
    """pk `a#<authority>`: the note, its inline body (≤ INLINE_LIMIT) and the S3 version it pins."""

    body = BinaryAttribute(null=True, legacy_encoding=False)
    blob_version = UnicodeAttribute(null=True)


class NoteViewItem(_Listing):
    """pk `k#…`, `r#…` or `n#…`: one listing view of a note (notes/dynamo.py `view_partitions`)."""


LIST_ATTRIBUTES = ["ref", "key", "run", "name", "author", "size", "updated_at", "sha256", "content_type"]

NOTES_TABLE = TableDef(
    "notes_table",
    (NoteItem, NoteViewItem),
    stream="NEW_AND_OLD_IMAGES",
    description="note items and their listing views; the stream feeds the body janitor",
)
