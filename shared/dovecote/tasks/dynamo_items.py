"""The tasks table's keys, and the mapping between its items (tasks/records.py) and the task records,
for the DynamoDB TaskStore (tasks/dynamo.py says the layout). Inline message parts and artifact
payloads are sealed here, bound to their record's identity."""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields
from functools import partial
from typing import Any, TypeVar

from dovecote.platform.dynamo import bind, connection, pynamodb_errors
from dovecote.platform.errors import CorruptStore
from dovecote.platform.protection import Protector, Unprotected
from dovecote.tasks.model import (
    ApplyReceipt,
    Artifact,
    Event,
    Grant,
    LeaseEnd,
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


class TaskItems:
    """One tasks table: its item models bound to it, the S3 bucket beside it, and the mapping
    between items and records."""

    def __init__(
        self,
        *,
        table: str,
        bucket: str,
        dynamodb: Any,
        s3: Any,
        protector: Protector | Unprotected | None = None,
        claim_shards: int = CLAIM_SHARDS,
    ) -> None:
        # The claimable index's partitions per authority: part of the layout (a task's key names its
        # shard), so every writer and every claim of a deployment must agree on it.
        self.claim_shards = claim_shards
        self.bucket = bucket
        self.dynamodb = dynamodb
        self.s3 = s3
        # Seals inline message parts and artifact payloads (platform/protection.py); the fakes and
        # the tests that do not test protection store bytes as they are.
        self.protector = protector or Unprotected()
        self.table = table

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

    def task_item(self, t: Task) -> TaskItem:
        values = attributes(t, absent_when_empty=("artifact",))
        values["submission"] = json.dumps(t.submission, sort_keys=True) if t.submission else None
        values["last_end"] = _lease_end_text(t.last_end)
        item = self.tasks(
            task_pk(t.authority, t.id),
            "T",
            **values,
            ctx_pk=f"{t.authority}#{t.context}",
            ctx_sk="#".join(created_order(t)),
            auth_pk=t.authority,
            auth_sk="#".join(updated_order(t)),
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
        return item

    @staticmethod
    def task(item: TaskItem) -> Task:
        submission = json.loads(item.submission) if item.submission else None
        last_end = _lease_end(item.last_end)
        return record(Task, item, numbers=TASK_NUMBERS, submission=submission, last_end=last_end)

    def grant_item(self, authority: str, g: Grant) -> GrantItem:
        return self.grants(
            task_pk(authority, g.task),
            f"G#{g.fence:020d}",
            worker=g.worker,
            granted_at=g.granted_at,
            previous=_lease_end_text(g.previous),
        )

    @staticmethod
    def grant(task_id: str, fence: int, item: GrantItem) -> Grant:
        return Grant(task_id, item.worker, fence, item.granted_at, previous=_lease_end(item.previous))

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

    def message_item(self, authority: str, m: Message) -> MessageItem:
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
        return self.messages(
            task_pk(authority, m.task),
            f"M#{m.sequence:020d}",
            id=m.id,
            author=m.author,
            parts=parts,
            created_at=m.created_at,
            metadata=json.dumps(m.metadata, sort_keys=True) if m.metadata else None,
        )

    def message(self, authority: str, task_id: str, item: MessageItem) -> Message:
        """Parts stored in S3 come back remote (digest and size): a page carries a URL, never the
        bytes, so reading a page costs no S3 request."""
        parts = []
        for index, part in enumerate(item.parts):
            filename = part.filename or ""
            if part.url is not None:
                url = self.protector.open(bytes(part.url), part_identity(authority, task_id, item.id, index, "url"))
                parts.append(Part(part.media_type, b"", filename=filename, url=url.decode()))
                continue
            if part.data is None:
                parts.append(Part(part.media_type, b"", part.sha256, int(part.size or 0), filename=filename))
                continue
            stored = bytes(part.data)
            if part.sha256:  # sealed inline part: bound to its message, position and digest
                data = self.protector.open(stored, part_identity(authority, task_id, item.id, index, part.sha256))
                if hashlib.sha256(data).hexdigest() != part.sha256:
                    raise CorruptStore("a message part does not match its digest", record="message")
            else:
                data = self.protector.open(stored, "")  # written before protection: plaintext
            parts.append(Part(part.media_type, data, filename=filename))
        metadata = json.loads(item.metadata) if item.metadata else {}
        return Message(task_id, item.id, int(item.sk[2:]), item.author, tuple(parts), item.created_at, metadata)

    def event_item(self, authority: str, ev: Event) -> EventItem:
        return self.events(
            task_pk(authority, ev.task),
            f"E#{ev.sequence:020d}",
            type=ev.type,
            state=ev.state,
            revision=ev.revision,
            occurred_at=ev.occurred_at,
            message=ev.message,
            submission=ev.submission,
            artifact=ev.artifact,
            reason=ev.reason or None,
        )

    @staticmethod
    def event(task_id: str, item: EventItem) -> Event:
        return Event(
            task_id,
            int(item.sk[2:]),
            item.type,
            item.state,
            int(item.revision),
            item.occurred_at,
            message=item.message or "",
            submission=item.submission or "",
            artifact=item.artifact or "",
            reason=item.reason or "",
        )

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


def _lease_end_text(end: LeaseEnd | None) -> str | None:
    return json.dumps(end.to_json(), sort_keys=True, separators=(",", ":")) if end is not None else None


def _lease_end(text: str | None) -> LeaseEnd | None:
    return LeaseEnd.from_json(json.loads(text)) if text else None


def get_item(model: Any, pk: str, sk: str) -> Any:
    try:
        return model.get(pk, sk, consistent_read=True)
    except model.DoesNotExist:
        return None


def _resolved(future: Any) -> Any:
    try:
        return future.get()
    except future._model_cls.DoesNotExist:
        return None
