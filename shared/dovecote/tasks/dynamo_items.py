"""The tasks table's keys, and the mapping between its items (tasks/records.py) and the task records,
for the DynamoDB TaskStore (tasks/dynamo.py says the layout; tasks/dynamo_inline.py the records a
task item holds inline). Inline message parts and artifact payloads are sealed here, bound to their
record's identity."""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields
from functools import partial
from typing import Any, NotRequired, TypedDict, TypeVar, Unpack

from dovecote.platform.dynamo import bind, connection, pynamodb_errors
from dovecote.platform.errors import CorruptStore
from dovecote.platform.protection import Protector, Unprotected
from dovecote.tasks.dynamo_inline import (
    Inline,
    MessageRef,
    event_attribute,
    events_of,
    grant_attribute,
    grants_of,
    lease_end,
    lease_end_text,
    message_attribute,
    refs_of,
    set_inline,
)
from dovecote.tasks.model import (
    ApplyReceipt,
    Artifact,
    Event,
    Grant,
    Message,
    Part,
    Receipt,
    Task,
    WorkspaceHead,
    expiry_shard,
    lease_deadline,
)
from dovecote.tasks.ports import Delivery
from dovecote.tasks.records import (
    ApplyReceiptItem,
    ArtifactItem,
    ClaimItem,
    DeliveryItem,
    EventItem,
    GrantItem,
    HeadItem,
    LayoutItem,
    MessageItem,
    PartAttribute,
    ReceiptItem,
    TaskItem,
)
from dovecote.tasks.storage import (
    CLAIM_SHARDS,
    INLINE_PART_BYTES,
    claim_key,
    claim_shard,
    created_order,
    is_claimable,
    lease_order,
    updated_order,
)


def key(kind: str, *ids: str) -> str:
    """A partition key: the item kind, then its ids. IDs never hold "#" (their pattern excludes it),
    so the keys are injective."""
    return "#".join((kind, *ids))


task_pk = partial(key, "T")  # (authority, task): the task, its messages, events and grants
receipt_pk = partial(key, "C")  # (authority, command id)
message_id_pk = partial(key, "MID")  # (authority, message id): authority-wide uniqueness
submission_pk = partial(key, "S")  # (authority, submission id)
artifact_pk = partial(key, "A")  # (authority, workspace, artifact)
head_pk = partial(key, "W")  # (authority, workspace)
apply_pk = partial(key, "R")  # (authority, workspace, artifact): the artifact's apply receipt
delivery_pk = partial(key, "D")  # (authority, worker, delivery id)
LAYOUT_PK = "L#claimable"  # the claimable index's layout: one item per table (ports.ClaimableLayout)


def artifact_identity(artifact: Artifact) -> str:
    """What an artifact's sealed inline payload is bound to (its associated data)."""
    return f"artifact|{artifact.authority}|{artifact.workspace}|{artifact.id}|{artifact.payload_digest}"


def part_identity(authority: str, task_id: str, message_id: str, index: int, digest: str) -> str:
    """What a sealed inline message part is bound to (its associated data)."""
    return f"part|{authority}|{task_id}|{message_id}|{index}|{digest}"


_KINDS: dict[str, type[Any]] = {
    "artifacts": ArtifactItem,
    "heads": HeadItem,
    "apply_receipts": ApplyReceiptItem,
    "deliveries": DeliveryItem,
    "tasks": TaskItem,
    "messages": MessageItem,
    "events": EventItem,
    "grants": GrantItem,
    "receipts": ReceiptItem,
    "claims": ClaimItem,
    "layouts": LayoutItem,
}


class TaskTable(TypedDict):
    """Where a tasks table is and how it is written: what both the store and its item mapping are
    made from."""

    table: str
    bucket: str
    dynamodb: Any
    s3: Any
    # Seals inline message parts and artifact payloads (platform/protection.py); the fakes and the
    # tests that do not test protection store bytes as they are.
    protector: NotRequired[Protector | Unprotected | None]
    # The claimable index's partitions per authority: part of the layout (a task's key names its
    # shard), so every writer and every claim of a deployment must agree on it.
    claim_shards: NotRequired[int]


class TaskItems:
    """One tasks table: its item models bound to it, the S3 bucket beside it, and the mapping
    between items and records."""

    def __init__(self, **where: Unpack[TaskTable]) -> None:
        self.claim_shards = where.get("claim_shards", CLAIM_SHARDS)
        self.bucket = where["bucket"]
        self.dynamodb = where["dynamodb"]
        self.s3 = where["s3"]
        self.protector = where.get("protector") or Unprotected()
        self.table = where["table"]

    # Each item kind bound to the table on first use (`__getattr__`): a read binds the one or two
    # kinds it touches, not all ten (each bind is a PynamoDB model class and connection).
    artifacts: type[ArtifactItem]
    heads: type[HeadItem]
    apply_receipts: type[ApplyReceiptItem]
    deliveries: type[DeliveryItem]
    tasks: type[TaskItem]
    messages: type[MessageItem]
    events: type[EventItem]
    grants: type[GrantItem]
    receipts: type[ReceiptItem]
    claims: type[ClaimItem]
    layouts: type[LayoutItem]

    def __getattr__(self, name: str) -> Any:
        kind = _KINDS.get(name)
        if kind is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        bound = bind(kind, table=self.table, client=self.dynamodb)
        setattr(self, name, bound)  # two threads may both bind: either class serves
        return bound

    def get_many(self, keys: list[tuple[Any, str, str]]) -> list[Any]:
        """The items at `keys` (model, pk, sk) from one strongly consistent read: a GetItem for one
        key, a TransactGetItems for several. Absent items are None."""
        from pynamodb.transactions import TransactGet

        with pynamodb_errors(write=False):
            if len(keys) == 1:
                model, pk, sk = keys[0]
                return [get_item(model, pk, sk)]
            with TransactGet(connection=connection(self.dynamodb)) as tx:
                futures = [tx.get(model, pk, sk) for model, pk, sk in keys]
            return [_resolved(f) for f in futures]

    # ---- the task ----------------------------------------------------------------------------

    def task_item(self, t: Task, inline: Inline = Inline(), *, appended: int = 0) -> TaskItem:
        """The task's item (v2), holding `inline` (tasks/dynamo_inline.py decides which records);
        `appended`: how many events the write appends (the stream's `ne`)."""
        values = attributes(t, absent_when_empty=("artifact", "owner", "granted_at", "heartbeat_at", "accepted_at"))
        values["submission"] = json.dumps(t.submission, sort_keys=True) if t.submission else None
        values["last_end"] = lease_end_text(t.last_end)
        item = self.tasks(
            task_pk(t.authority, t.id),
            "T",
            **values,
            ctx_pk=f"{t.authority}#{t.context}",
            ctx_sk="#".join(created_order(t)),
            auth_pk=t.authority,
            auth_sk="#".join(updated_order(t)),
            new_events=appended or None,
        )
        # The sparse indexes hold a task only while it is claimable, leased, or leased with a deadline.
        if is_claimable(t):
            item.claim_pk = claim_key(t.authority, claim_shard(t.authority, t.id, self.claim_shards))
            item.claim_sk = "#".join(created_order(t))
        if t.owner:
            item.lease_pk = f"{t.authority}#{t.owner}"
            item.lease_sk = "#".join(lease_order(t))
        deadline = lease_deadline(t)
        if deadline is not None:
            item.exp_pk = f"X#{expiry_shard(t.authority, t.id)}"
            item.exp_sk = f"{deadline}#{t.authority}#{t.id}"
        return set_inline(item, inline)

    @staticmethod
    def task(item: TaskItem) -> Task:
        submission = json.loads(item.submission) if item.submission else None
        last_end = lease_end(item.last_end)
        revision = item.revision if item.revision is not None else item.v1_revision  # v2, else v1
        return record(
            Task, item, numbers=TASK_NUMBERS, submission=submission, last_end=last_end, revision=int(revision or 0)
        )

    @staticmethod
    def grants_in(task_id: str, item: GrantItem) -> tuple[Grant, ...]:
        """The grants an item of its own holds: the list of a v2 item, or the one v1 wrote."""
        if item.records is not None:
            return grants_of(task_id, item.records)
        return (Grant(task_id, item.worker or "", int(item.sk[2:]), item.granted_at or "", lease_end(item.previous)),)

    # ---- receipts and deliveries -------------------------------------------------------------------

    def receipt_item(self, r: Receipt) -> ReceiptItem:
        return self.receipts(
            receipt_pk(r.authority, r.id),
            "-",
            kind=r.kind,
            digest=r.digest,
            status=r.status,
            result=json.dumps(r.result, sort_keys=True),
        )

    @staticmethod
    def receipt(authority: str, command_id: str, item: ReceiptItem) -> Receipt:
        return Receipt(authority, command_id, item.kind, item.digest, int(item.status), json.loads(item.result))

    def delivery_item(self, d: Delivery) -> DeliveryItem:
        return self.deliveries(
            delivery_pk(d.authority, d.worker, d.id),
            "-",
            digest=d.digest,
            receipt=json.dumps(d.receipt, sort_keys=True),
        )

    @staticmethod
    def delivery(authority: str, worker: str, delivery_id: str, item: DeliveryItem) -> Delivery:
        return Delivery(authority, worker, delivery_id, item.digest, json.loads(item.receipt))

    # ---- messages and events ------------------------------------------------------------------------

    def _parts(self, authority: str, m: Message) -> list[PartAttribute]:
        parts = []
        for index, part in enumerate(m.parts):
            named = {"filename": part.filename} if part.filename else {}
            if part.url:  # a reference, no bytes: its URL sealed, bound to its place
                sealed = self.protector.seal(part.url.encode(), part_identity(authority, m.task, m.id, index, "url"))
                parts.append(PartAttribute(media_type=part.media_type, url=sealed, **named))
                continue
            digest = hashlib.sha256(part.data).hexdigest()
            if len(part.data) <= INLINE_PART_BYTES:
                sealed = self.protector.seal(part.data, part_identity(authority, m.task, m.id, index, digest))
                parts.append(
                    PartAttribute(media_type=part.media_type, data=sealed, sha256=digest, size=len(part.data), **named)
                )
            else:
                parts.append(PartAttribute(media_type=part.media_type, sha256=digest, size=len(part.data), **named))
        return parts

    def message_guard(self, authority: str, m: Message) -> ClaimItem:
        """A message's id guard, holding the message (v2): authority-wide uniqueness of its id, and
        the message read by id in one GetItem."""
        return self.claims(
            message_id_pk(authority, m.id),
            "-",
            task=m.task,
            sequence=m.sequence,
            author=m.author,
            parts=self._parts(authority, m),
            created_at=m.created_at,
            metadata=json.dumps(m.metadata, sort_keys=True) if m.metadata else None,
        )

    def spilled_items(self, authority: str, task_id: str, spilled: Inline) -> list[Any]:
        """One item per kind of records leaving their task item together, keyed as v1 keyed the
        last of them (tasks/dynamo_inline.py)."""
        pk, out = task_pk(authority, task_id), list[Any]()
        if spilled.events:
            events = [event_attribute(e) for e in spilled.events]
            out.append(self.events(pk, f"E#{spilled.events[-1].sequence:020d}", records=events))
        if spilled.grants:
            grants = [grant_attribute(g) for g in spilled.grants]
            out.append(self.grants(pk, f"G#{spilled.grants[-1].fence:020d}", records=grants))
        if spilled.messages:
            refs = [message_attribute(m) for m in spilled.messages]
            out.append(self.messages(pk, f"M#{spilled.messages[-1].sequence:020d}", refs=refs))
        return out

    @staticmethod
    def places_in(item: MessageItem) -> tuple[MessageRef | MessageItem, ...]:
        """The messages an item of its own accounts for: a v2 item's places (each message in its
        guard), or the v1 item, which holds its message."""
        return refs_of(item.refs) if item.refs is not None else (item,)

    def message(self, authority: str, task_id: str, message_id: str, sequence: int, item: Any) -> Message:
        """The message an item holds: a v2 guard (ClaimItem) or a v1 message item. Parts stored in
        S3 come back remote (digest and size): a page carries a URL, never the bytes, so reading a
        page costs no S3 request."""
        parts = []
        for index, part in enumerate(item.parts or ()):
            filename = part.filename or ""
            if part.url is not None:
                url = self.protector.open(bytes(part.url), part_identity(authority, task_id, message_id, index, "url"))
                parts.append(Part(part.media_type, b"", filename=filename, url=url.decode()))
                continue
            if part.data is None:
                parts.append(Part(part.media_type, b"", part.sha256, int(part.size or 0), filename=filename))
                continue
            stored = bytes(part.data)
            if part.sha256:  # sealed inline part: bound to its message, position and digest
                data = self.protector.open(stored, part_identity(authority, task_id, message_id, index, part.sha256))
                if hashlib.sha256(data).hexdigest() != part.sha256:
                    raise CorruptStore("a message part does not match its digest", record="message")
            else:
                data = self.protector.open(stored, "")  # written before protection: plaintext
            parts.append(Part(part.media_type, data, filename=filename))
        metadata = json.loads(item.metadata) if item.metadata else {}
        return Message(task_id, message_id, sequence, item.author or "", tuple(parts), item.created_at or "", metadata)

    @staticmethod
    def events_in(task_id: str, item: EventItem) -> tuple[Event, ...]:
        """The events an item of its own holds: the list of a v2 item, or the one v1 wrote."""
        if item.records is not None:
            return events_of(task_id, item.records)
        event = Event(
            task_id,
            int(item.sk[2:]),
            item.type or "",
            item.state or "",
            int(item.revision or 0),
            item.occurred_at or "",
            message=item.message or "",
            submission=item.submission or "",
            artifact=item.artifact or "",
            reason=item.reason or "",
        )
        return (event,)

    # ---- artifacts, heads, apply receipts ------------------------------------------------------------

    def artifact_item(self, a: Artifact, inline: bytes | None) -> ArtifactItem:
        key = artifact_pk(a.authority, a.workspace, a.id)
        return self.artifacts(
            key, "-", payload=inline, **attributes(a, absent_when_empty=("published_at", "discarded_at"))
        )

    @staticmethod
    def artifact(item: ArtifactItem) -> Artifact:
        return record(Artifact, item, numbers=("payload_size",))

    @staticmethod
    def head(item: HeadItem) -> WorkspaceHead:
        return record(WorkspaceHead, item)

    def apply_receipt_item(self, authority: str, ap: ApplyReceipt) -> ApplyReceiptItem:
        # The authority, workspace and artifact are the item's key.
        values = attributes(ap, keyed=("authority", "workspace", "artifact"))
        return self.apply_receipts(apply_pk(authority, ap.workspace, ap.artifact), "-", **values)

    @staticmethod
    def apply_receipt(authority: str, workspace: str, artifact: str, item: ApplyReceiptItem) -> ApplyReceipt:
        return record(ApplyReceipt, item, authority=authority, workspace=workspace, artifact=artifact)


R = TypeVar("R")
TASK_NUMBERS = ("revision", "message_count", "event_count", "fence", "lease_timeout", "accept_timeout")


def attributes(source: Any, *, keyed: tuple[str, ...] = (), absent_when_empty: tuple[str, ...] = ()) -> dict[str, Any]:
    """A record's fields as the attributes of its item, which names them alike: except the ones its
    key holds; an empty optional one is left absent."""
    values = {f.name: getattr(source, f.name) for f in fields(source) if f.name not in keyed}
    for name in absent_when_empty:
        values[name] = values[name] or None
    return values


def record(kind: type[R], item: Any, *, numbers: tuple[str, ...] = (), **known: Any) -> R:
    """The record `kind` from the item's attributes of the same names (an absent one is empty),
    `known` the fields its key holds."""
    values = dict(known)
    for f in fields(kind):  # type: ignore[arg-type]
        if f.name not in known:
            value = getattr(item, f.name)
            values[f.name] = int(value or 0) if f.name in numbers else ("" if value is None else value)
    return kind(**values)


def get_item(model: Any, pk: str, sk: str, *, consistent: bool = True) -> Any:
    try:
        return model.get(pk, sk, consistent_read=consistent)
    except model.DoesNotExist:
        return None


def _resolved(future: Any) -> Any:
    try:
        return future.get()
    except future._model_cls.DoesNotExist:
        return None
