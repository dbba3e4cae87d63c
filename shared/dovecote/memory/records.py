"""The memory table's items as PynamoDB models (one table; layout in memory/dynamo.py). Declared
with a placeholder table name and bound at wiring with `dovecote.platform.dynamo.bind`."""

from __future__ import annotations

from pynamodb.attributes import (
    BooleanAttribute,
    JSONAttribute,
    ListAttribute,
    NumberAttribute,
    UnicodeAttribute,
)

from dovecote.platform.dynamo import TableDef
from dovecote.platform.items import KeyedItem

NO_SORT = "-"  # the sort key of items that are alone in their partition


class WriteItem(KeyedItem):
    """W#<authority>#<write id>: the write's state, its content, and its evidence once settled."""

    authority = UnicodeAttribute()
    id = UnicodeAttribute()
    scope = UnicodeAttribute()
    content = UnicodeAttribute()
    tags = ListAttribute(of=UnicodeAttribute, default=list)
    digest = UnicodeAttribute()
    status = UnicodeAttribute()
    submitted_at = UnicodeAttribute()
    updated_at = UnicodeAttribute()
    sent = BooleanAttribute(default=False)
    generation = NumberAttribute(default=0)
    consumed = BooleanAttribute(default=False)
    evidence = JSONAttribute(null=True)
    seq = NumberAttribute(default=0)


class ScopeItem(KeyedItem):
    """S#<authority>#<scope>: how many memories the scope holds (the last seq)."""

    memories = NumberAttribute()


class MemoryItem(KeyedItem):
    """M#<authority>#<scope>, <seq:020d>: one applied memory, immutable."""

    id = UnicodeAttribute()
    content = UnicodeAttribute()
    tags = ListAttribute(of=UnicodeAttribute, default=list)
    applied_at = UnicodeAttribute()


class PostingItem(KeyedItem):
    """P#<authority>#<scope>#<term>: the term's document frequency in the scope and the seqs of
    the most recent memories that contain it."""

    df = NumberAttribute()
    recent = ListAttribute(of=NumberAttribute, default=list)


class RelationItem(KeyedItem):
    """A relation: the item R#<authority>#<relation id> and its two list views, RS#<authority>#<scope>
    and RT#<authority>#<scope>#<status>, both sorted by <from seq:020d>#<relation id>. The views are
    base-table items (not GSIs) so a list is strongly consistent, as in notes."""

    relation_id = UnicodeAttribute()
    scope = UnicodeAttribute()
    from_id = UnicodeAttribute()
    to_id = UnicodeAttribute()
    verb = UnicodeAttribute()
    note = UnicodeAttribute()
    evidence_ids = ListAttribute(of=UnicodeAttribute, default=list)
    status = UnicodeAttribute()
    from_seq = NumberAttribute()
    to_seq = NumberAttribute()
    created_at = UnicodeAttribute()
    judgment = JSONAttribute(null=True)


class ReceiptItem(KeyedItem):
    """C#<authority>#<command id>: the stored result of one judgment command."""

    kind = UnicodeAttribute()
    digest = UnicodeAttribute()
    result = JSONAttribute()


MEMORY_TABLE = TableDef(
    "memory_table",
    (WriteItem, ScopeItem, MemoryItem, PostingItem, RelationItem, ReceiptItem),
    description="memory writes, memories, term postings, relation candidates with their list views, receipts",
)
