"""The tasks table's items (see tasks/dynamo.py for the layout, the keys and the round trips).

Every kind shares the key schema (pk, sk); only the task item carries the four list indexes, and
the sparse ones (`claimable`, `leases`) only while the task is claimable or leased.
"""

from __future__ import annotations

from pynamodb.attributes import BinaryAttribute, ListAttribute, MapAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

from dovecote.platform.dynamo import TableDef
from dovecote.platform.items import KeyedItem


class _Index(GlobalSecondaryIndex["TaskItem"]):
    """Base of the task list indexes: every one projects the whole task (a list renders tasks)."""


class Claimable(_Index):
    class Meta:
        index_name = "claimable"
        projection = AllProjection()

    claim_pk = UnicodeAttribute(hash_key=True)  # authority#shard (storage.claim_key)
    claim_sk = UnicodeAttribute(range_key=True)  # created_at#workspace#task: oldest first


class Leases(_Index):
    class Meta:
        index_name = "leases"
        projection = AllProjection()

    lease_pk = UnicodeAttribute(hash_key=True)  # authority#worker
    lease_sk = UnicodeAttribute(range_key=True)  # granted_at#workspace#task#fence


class ByContext(_Index):
    class Meta:
        index_name = "by_context"
        projection = AllProjection()

    ctx_pk = UnicodeAttribute(hash_key=True)  # authority#context
    ctx_sk = UnicodeAttribute(range_key=True)  # created_at#workspace#task


class ByAuthority(_Index):
    class Meta:
        index_name = "by_authority"
        projection = AllProjection()

    auth_pk = UnicodeAttribute(hash_key=True)  # authority
    auth_sk = UnicodeAttribute(range_key=True)  # inverted(updated_at)#workspace#task: newest first


class Expiring(_Index):
    class Meta:
        index_name = "expiring"
        projection = AllProjection()

    exp_pk = UnicodeAttribute(hash_key=True)  # X#<shard>: leases spread over EXPIRY_SHARDS partitions
    exp_sk = UnicodeAttribute(range_key=True)  # deadline#authority#task: the most overdue first


class TaskItem(KeyedItem):
    """sk "T": the aggregate, its current lease included."""

    authority = UnicodeAttribute()
    id = UnicodeAttribute()
    workspace = UnicodeAttribute()
    context = UnicodeAttribute()
    state = UnicodeAttribute()
    revision = NumberAttribute()
    message_count = NumberAttribute()
    event_count = NumberAttribute()
    created_at = UnicodeAttribute()
    updated_at = UnicodeAttribute()
    owner = UnicodeAttribute(default="")
    fence = NumberAttribute(default=0)
    granted_at = UnicodeAttribute(default="")
    heartbeat_at = UnicodeAttribute(default="")
    accepted_at = UnicodeAttribute(default="")  # absent on items written before accept timeouts
    lease_timeout = NumberAttribute(default=0)
    accept_timeout = NumberAttribute(default=0)  # absent (never) on items written before them
    submission = UnicodeAttribute(null=True)  # JSON {id, final_message, published_at}
    last_end = UnicodeAttribute(null=True)  # JSON model.LeaseEnd: how the last lease that ended did
    artifact = UnicodeAttribute(null=True)
    ctx_pk = UnicodeAttribute()
    ctx_sk = UnicodeAttribute()
    auth_pk = UnicodeAttribute()
    auth_sk = UnicodeAttribute()
    claim_pk = UnicodeAttribute(null=True)
    claim_sk = UnicodeAttribute(null=True)
    lease_pk = UnicodeAttribute(null=True)
    lease_sk = UnicodeAttribute(null=True)
    exp_pk = UnicodeAttribute(null=True)  # only while leased with a deadline (model.lease_deadline)
    exp_sk = UnicodeAttribute(null=True)

    claimable = Claimable()
    leases = Leases()
    by_context = ByContext()
    by_authority = ByAuthority()
    expiring = Expiring()


class LayoutItem(KeyedItem):
    """pk "L#claimable", sk "-": the claimable index's layout as the last reshard pass left it
    (ports.ClaimableLayout); absent on a table no pass has run on."""

    shards = NumberAttribute(default=0)
    target = NumberAttribute(default=0)
    resume = UnicodeAttribute(null=True)  # the Scan's LastEvaluatedKey (JSON) of a pass under way
    moved = NumberAttribute(default=0)


class PartAttribute(MapAttribute[str, object]):
    """A message part: its bytes inline, or (over INLINE_PART_BYTES) its S3 digest and size, or (a
    URL part) its URL, sealed as inline bytes are (a URL may carry a token). Its filename if any."""

    media_type = UnicodeAttribute()
    data = BinaryAttribute(null=True, legacy_encoding=False)
    sha256 = UnicodeAttribute(null=True)
    size = NumberAttribute(null=True)
    url = BinaryAttribute(null=True, legacy_encoding=False)
    filename = UnicodeAttribute(null=True)


class MessageItem(KeyedItem):
    """sk "M#<sequence:020>"."""

    id = UnicodeAttribute()
    author = UnicodeAttribute()
    parts = ListAttribute(of=PartAttribute)
    created_at = UnicodeAttribute()
    metadata = UnicodeAttribute(null=True)  # the message's metadata object as JSON; absent when empty


class EventItem(KeyedItem):
    """sk "E#<sequence:020>"."""

    type = UnicodeAttribute()
    state = UnicodeAttribute()
    revision = NumberAttribute()
    occurred_at = UnicodeAttribute()
    message = UnicodeAttribute(default="")
    submission = UnicodeAttribute(default="")
    artifact = UnicodeAttribute(default="")
    reason = UnicodeAttribute(null=True)  # task_failed's reason, when the worker gave one


class GrantItem(KeyedItem):
    """sk "G#<fence:020>": the immutable lease history."""

    worker = UnicodeAttribute()
    granted_at = UnicodeAttribute()
    previous = UnicodeAttribute(null=True)  # JSON model.LeaseEnd: how fence - 1 ended (absent: unknown)


class ReceiptItem(KeyedItem):
    """pk "C#<authority>#<command>", sk "-": a committed command's stored result."""

    kind = UnicodeAttribute()
    digest = UnicodeAttribute()
    status = NumberAttribute()
    result = UnicodeAttribute()  # JSON


class ClaimItem(KeyedItem):
    """pk "MID#<authority>#<message>" or "S#<authority>#<submission>", sk "-": authority-wide
    uniqueness of a message id or a submission id; a message's claim also names its sequence, so a
    message can be read by id."""

    task = UnicodeAttribute()
    sequence = NumberAttribute(null=True)


class ArtifactItem(KeyedItem):
    """pk "A#<authority>#<workspace>#<artifact>", sk "-": an artifact and its publication state;
    its payload inline (sealed) when small, else in S3 by digest."""

    authority = UnicodeAttribute()
    workspace = UnicodeAttribute()
    id = UnicodeAttribute()
    task = UnicodeAttribute()
    state = UnicodeAttribute()
    base_revision = UnicodeAttribute()
    result_revision = UnicodeAttribute()
    payload_digest = UnicodeAttribute()
    payload_size = NumberAttribute()
    media_type = UnicodeAttribute()
    frozen_at = UnicodeAttribute()
    published_at = UnicodeAttribute(null=True)
    discarded_at = UnicodeAttribute(null=True)
    payload = BinaryAttribute(null=True, legacy_encoding=False)


class HeadItem(KeyedItem):
    """pk "W#<authority>#<workspace>", sk "-": the workspace's confirmed revision."""

    authority = UnicodeAttribute()
    workspace = UnicodeAttribute()
    confirmed_revision = UnicodeAttribute()
    updated_at = UnicodeAttribute()


class ApplyReceiptItem(KeyedItem):
    """pk "R#<authority>#<workspace>#<artifact>", sk "-": the artifact's one apply receipt."""

    id = UnicodeAttribute()
    artifact_digest = UnicodeAttribute()
    base_revision = UnicodeAttribute()
    result_revision = UnicodeAttribute()
    decision = UnicodeAttribute()
    observed_revision = UnicodeAttribute(default="")
    code = UnicodeAttribute(default="")
    message = UnicodeAttribute(default="")
    recorded_at = UnicodeAttribute()


class DeliveryItem(KeyedItem):
    """pk "D#<authority>#<worker>#<delivery>", sk "-": a worker event's settlement."""

    digest = UnicodeAttribute()
    receipt = UnicodeAttribute()  # JSON


TASKS_TABLE = TableDef(
    "tasks_table",
    (
        TaskItem,
        MessageItem,
        EventItem,
        GrantItem,
        ReceiptItem,
        ClaimItem,
        ArtifactItem,
        HeadItem,
        ApplyReceiptItem,
        DeliveryItem,
    ),
    # The one item kind that expires: A2A's blocking-waits item per authority (dovecote/a2a/waits.py,
    # pk "AW#<authority>"), deleted a day after its last take; no task item carries the attribute.
    ttl="expires_ttl",
    # Keys only: the webhook fan-out reads which event was inserted (dovecote/tasks/dynamo_stream.py).
    stream="KEYS_ONLY",
    description="tasks, their messages, events, grants, receipts, id claims, artifacts, heads, apply receipts, "
    "worker deliveries, A2A's blocking waits per authority",
)
