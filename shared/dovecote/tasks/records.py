"""The tasks table's items (see tasks/dynamo.py for the layout, the keys and the round trips, and
tasks/dynamo_inline.py for the records a task item holds inline).

Every kind shares the key schema (pk, sk); only the task item carries the list indexes, and the
sparse ones (`claimable`, `leases`, `expiring`) only while the task is claimable or leased.

Two layouts are read. The first (v1) wrote every event, grant and message as an item of its own and
the task's revision as `revision`; the second (v2, written since) keeps the latest events, grants
and message references inline in the task item (`ev`, `gr`, `mi`), writes the others as v1 did
(`E#`, `G#` items; an `M#` item that points at the message), keeps each message in its id's guard
item, and names the revision `rv`. A v1 item is read as a v2 item with nothing inline.
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


class InlineEvent(MapAttribute[str, object]):
    """An event inline in its task item: EventItem's fields under one-letter names."""

    sequence = NumberAttribute(attr_name="q")
    type = UnicodeAttribute(attr_name="y")
    state = UnicodeAttribute(attr_name="s")
    revision = NumberAttribute(attr_name="r")
    occurred_at = UnicodeAttribute(attr_name="t")
    message = UnicodeAttribute(attr_name="m", null=True)
    submission = UnicodeAttribute(attr_name="b", null=True)
    artifact = UnicodeAttribute(attr_name="a", null=True)
    reason = UnicodeAttribute(attr_name="n", null=True)  # task_failed's, when the worker gave one


class InlineGrant(MapAttribute[str, object]):
    """A grant inline in its task item: GrantItem's fields under one-letter names."""

    fence = NumberAttribute(attr_name="f")
    worker = UnicodeAttribute(attr_name="w")
    granted_at = UnicodeAttribute(attr_name="t")
    previous = UnicodeAttribute(attr_name="p", null=True)  # JSON model.LeaseEnd


class InlineMessage(MapAttribute[str, object]):
    """A message's place in its task, inline: its sequence, its id (the message itself is in its
    id's guard item) and that item's size, so a page reads no more than it means to."""

    sequence = NumberAttribute(attr_name="q")
    id = UnicodeAttribute(attr_name="i")
    size = NumberAttribute(attr_name="z")


class TaskItem(KeyedItem):
    """sk "T": the aggregate, its current lease included."""

    authority = UnicodeAttribute()
    id = UnicodeAttribute()
    workspace = UnicodeAttribute()
    context = UnicodeAttribute()
    state = UnicodeAttribute()
    # v2 names the revision `rv`: a writer of the v1 layout conditions its compare-and-swap on
    # `revision`, which a v2 item lacks, so it fails closed instead of overwriting the inline records
    # it does not know (a deployment rolling out). A v1 item has only `revision`.
    revision = NumberAttribute(attr_name="rv", null=True)
    v1_revision = NumberAttribute(attr_name="revision", null=True)
    message_count = NumberAttribute()
    event_count = NumberAttribute()
    created_at = UnicodeAttribute()
    updated_at = UnicodeAttribute()
    # Empty lease fields are absent (v2; v1 stored them as ""): a condition on an empty one says both.
    owner = UnicodeAttribute(default="", null=True)
    fence = NumberAttribute(default=0)
    granted_at = UnicodeAttribute(default="", null=True)
    heartbeat_at = UnicodeAttribute(default="", null=True)
    accepted_at = UnicodeAttribute(default="", null=True)  # absent on items written before accept timeouts
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
    # How many events the write that left the item appended (absent: none): what the table's stream
    # tells the webhook fan-out (tasks/dynamo_stream.py). Every other write of the item drops it.
    new_events = NumberAttribute(attr_name="ne", null=True)
    # The latest records, inline (tasks/dynamo_inline.py): absent when there are none.
    events = ListAttribute(of=InlineEvent, null=True, attr_name="ev")
    grants = ListAttribute(of=InlineGrant, null=True, attr_name="gr")
    message_refs = ListAttribute(of=InlineMessage, null=True, attr_name="mi")

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
    """sk "M#<sequence:020>": the message (v1), or (v2) the places of the messages up to that
    sequence that left their task item together (each message is in its id's guard item)."""

    id = UnicodeAttribute(null=True)
    author = UnicodeAttribute(null=True)
    parts = ListAttribute(of=PartAttribute, null=True)
    created_at = UnicodeAttribute(null=True)
    metadata = UnicodeAttribute(null=True)  # the message's metadata object as JSON; absent when empty
    refs = ListAttribute(of=InlineMessage, null=True, attr_name="mi")


class EventItem(KeyedItem):
    """sk "E#<sequence:020>": the event (v1), or (v2) the events up to that sequence that left their
    task item together."""

    type = UnicodeAttribute(null=True)
    state = UnicodeAttribute(null=True)
    revision = NumberAttribute(null=True)
    occurred_at = UnicodeAttribute(null=True)
    message = UnicodeAttribute(null=True)
    submission = UnicodeAttribute(null=True)
    artifact = UnicodeAttribute(null=True)
    reason = UnicodeAttribute(null=True)  # task_failed's reason, when the worker gave one
    records = ListAttribute(of=InlineEvent, null=True, attr_name="ev")


class GrantItem(KeyedItem):
    """sk "G#<fence:020>": the immutable lease history: the grant (v1), or (v2) the grants up to that
    fence that left their task item together."""

    worker = UnicodeAttribute(null=True)
    granted_at = UnicodeAttribute(null=True)
    previous = UnicodeAttribute(null=True)  # JSON model.LeaseEnd: how fence - 1 ended (absent: unknown)
    records = ListAttribute(of=InlineGrant, null=True, attr_name="gr")


class ReceiptItem(KeyedItem):
    """pk "C#<authority>#<command>", sk "-": a committed command's stored result."""

    kind = UnicodeAttribute()
    digest = UnicodeAttribute()
    status = NumberAttribute()
    result = UnicodeAttribute()  # JSON


class ClaimItem(KeyedItem):
    """pk "MID#<authority>#<message>" or "S#<authority>#<submission>", sk "-": authority-wide
    uniqueness of a message id or a submission id. A message's guard names its task and sequence
    and (v2) holds the message itself: the one item a message costs beyond its task's, read by id
    in one GetItem. A v1 guard has no author or parts: its message is the task's "M#" item."""

    task = UnicodeAttribute()
    sequence = NumberAttribute(null=True)
    author = UnicodeAttribute(null=True)
    parts = ListAttribute(of=PartAttribute, null=True)
    created_at = UnicodeAttribute(null=True)
    metadata = UnicodeAttribute(null=True)


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
    # The task item as written: the webhook fan-out reads which events a write appended (its `ne`,
    # dovecote/tasks/dynamo_stream.py); the events themselves are inline, not items of their own.
    stream="NEW_IMAGE",
    description="tasks, their messages, events, grants, receipts, id claims, artifacts, heads, apply receipts, "
    "worker deliveries, A2A's blocking waits per authority",
)
