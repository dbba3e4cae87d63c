"""The DynamoDB TaskStore (with S3 for large message parts and artifact payloads). Items are PynamoDB
models (tasks/records.py); their keys and mapping are in tasks/dynamo_items.py, the records a task
item holds inline in tasks/dynamo_inline.py, the S3 side in tasks/dynamo_objects.py, the lists and
streams in tasks/dynamo_queries.py. Here: a command's one read and its one atomic commit, apply
receipts, settlements and heartbeats.

One table (layout v2; the v1 layout is read as it stands, see records.py). Items (pk, sk):
- task        T#<authority>#<task>, "T"      the aggregate, current lease included, and   TaskItem
                                             inline its latest events, grants, message places
- events      T#<authority>#<task>, E#<seq>  events that left the task item together    EventItem
                                             (keyed by the last; v1: one event)
- grants      T#<authority>#<task>, G#<fence>  the immutable lease history, likewise    GrantItem
- messages    T#<authority>#<task>, M#<seq>  message places, likewise (v1: the message) MessageItem
- receipt     C#<authority>#<command>, "-"   the command's stored result                ReceiptItem
- message id  MID#<authority>#<message>, "-" authority-wide uniqueness, and the message  ClaimItem
                                             itself: parts inline, or a digest when in S3
- submission  S#<authority>#<submission>, "-"                                           ClaimItem
- artifact    A#<authority>#<workspace>#<artifact>, "-"                                 ArtifactItem
- head        W#<authority>#<workspace>, "-"                                            HeadItem
- apply       R#<authority>#<workspace>#<artifact>, "-"  the one apply receipt          ApplyReceiptItem
- delivery    D#<authority>#<worker>#<delivery>, "-"  a worker event's settlement       DeliveryItem
- layout      L#claimable, "-"               the claimable index's shard count          LayoutItem
- a2a waits   AW#<authority>, "-"  A2A's blocking waits in progress (dovecote/a2a/waits.py; TTL'd)
IDs match ^[A-Za-z0-9][A-Za-z0-9._:-]*$, so "#" cannot occur inside one: the keys are injective.

What a command's transaction holds: the receipt (keyed by the command id: command ids are one
namespace per authority, so an exact retry finds it before it knows the task, and the same id on
another task is a conflict), the task item (inserted, or replaced under the revision and fence CAS)
with the command's new event, grant and message place inline, one guard per message id (holding the
message) and per submission id, and the items the records that outgrow the task item leave for
(dynamo_inline.py: at most one per kind, only when the task item would pass the kilobytes its own
fields need; the bound keeps the task item under its fields + 1 KB, far from the 400 KB limit). So
create is 3 items (receipt, task, message guard), claim and accept 2, complete 4 (and a submission
guard), each under 1 KB unless its ids are long: 6, 4, 4 and 8 write units. The task item's `ne` is
how many events its write appended (absent on every other write): the table's stream (NEW_IMAGE)
tells the webhook fan-out that way (tasks/dynamo_stream.py).

GSIs on the task item (sparse where it matters):
- claimable   (authority#<shard>; created_at#workspace#task), only while non-terminal and unowned;
              claim_shards partitions per authority (storage.claim_shard), so concurrent claims
              spread instead of racing for the one oldest task
- leases      (authority#worker; granted_at#workspace#task#fence), only while owned
- by_context  (authority#context; created_at#workspace#task)
- by_authority (authority; inverted(updated_at)#workspace#task): newest update first
- expiring    (X#<shard>; deadline#authority#task), only while leased with a deadline: the
              dispatcher's view of silent leases and unaccepted grants, across authorities
              (EXPIRY_SHARDS partitions; model.lease_deadline)

Round trips: a command is one TransactGetItems (receipt + task, strongly consistent) and one
TransactWriteItems; an exact replay is the read alone. Parts over INLINE_PART_BYTES add one
conditional PutObject each, before the transaction (content-addressed, If-None-Match: *). A commit
whose task version this store did not read (none in the service) reads the task item once more.
The stream reads are in dynamo_queries.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Unpack

from dovecote.platform.dynamo import (
    attributes,
    committing,
    connection,
    failed_condition,
    item_bytes,
    one_page,
    pynamodb_errors,
)
from dovecote.platform.errors import CommitUnknown
from dovecote.platform.uploads import PresignedUpload
from dovecote.tasks.dynamo_inline import Inline, InlineMemory, fit, inline_of, message_ref
from dovecote.tasks.dynamo_items import (
    LAYOUT_PK,
    TaskItems,
    TaskTable,
    apply_pk,
    artifact_identity,
    artifact_pk,
    delivery_pk,
    get_item,
    head_pk,
    part_identity,
    receipt_pk,
    submission_pk,
    task_pk,
)
from dovecote.tasks.dynamo_objects import TaskObjects
from dovecote.tasks.dynamo_queries import TaskQueries
from dovecote.tasks.model import (
    ApplyReceipt,
    Artifact,
    Event,
    Grant,
    Message,
    Task,
    WorkspaceHead,
    expiry_shard,
    lease_deadline,
)
from dovecote.tasks.ports import (
    ApplyCommit,
    ApplySnapshot,
    ClaimableLayout,
    Commit,
    Delivery,
    DeliveryKey,
    DeliveryTaken,
    LeasePage,
    Snapshot,
    TaskFilter,
    TaskPage,
)
from dovecote.tasks.storage import INLINE_PART_BYTES, claim_key, claim_shard, commit_failure, heartbeat

__all__ = [
    "INLINE_PART_BYTES",
    "DynamoTaskStore",
    "apply_pk",
    "artifact_identity",
    "artifact_pk",
    "delivery_pk",
    "head_pk",
    "part_identity",
    "task_pk",
]


# A heartbeat re-reads and writes again at most this many times when a command lands in between.
HEARTBEAT_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class _Op:
    """One item of a transaction. `name` is the precondition it carries (storage.commit_failure);
    `old`: DynamoDB returns the stored item when the condition fails."""

    name: str
    item: Any
    condition: Any
    actions: list[Any] | None = None
    old: bool = False


def _equal(attribute: Any, value: str) -> Any:
    """`attribute` holds `value`; an empty value is an absent attribute (v2) or "" (v1)."""
    return attribute == value if value else attribute.does_not_exist() | (attribute == "")


class DynamoTaskStore:
    """The TaskStore port over one tasks table and its bucket: the item mapping (`items`), the reads
    beyond a command's own (`queries`) and the S3 side (`objects`) are parts it holds; here, a
    command's one read and its one atomic commit, apply receipts, settlements, heartbeats and the
    claimable index's layout."""

    def __init__(self, **where: Unpack[TaskTable]) -> None:
        self.items = TaskItems(**where)
        self.queries = TaskQueries(self.items)
        self.objects = TaskObjects(self.items)
        # The inline records of the task items read lately, by version: what a commit rewrites
        # its task item with (tasks/dynamo_inline.py).
        self.inline = InlineMemory()

    @property
    def claim_shards(self) -> int:
        return self.items.claim_shards

    @claim_shards.setter
    def claim_shards(self, shards: int) -> None:
        self.items.claim_shards = shards

    # ---- reads beyond a command's own (TaskQueries) -----------------------------------------------

    def message(self, authority: str, task_id: str, message_id: str) -> Message | None:
        return self.queries.message(authority, task_id, message_id)

    def grant(self, authority: str, task_id: str, fence: int) -> Grant | None:
        return self.queries.grant(authority, task_id, fence)

    def grant_history(
        self, authority: str, task_id: str, after: int, limit: int, *, seen: Task | None = None
    ) -> list[Grant]:
        return self.queries.grant_history(authority, task_id, after, limit, self._seen(authority, task_id, seen))

    def head(self, authority: str, workspace: str) -> WorkspaceHead | None:
        return self.queries.head(authority, workspace)

    def apply_receipt(self, authority: str, workspace: str, artifact: str) -> ApplyReceipt | None:
        return self.queries.apply_receipt(authority, workspace, artifact)

    def messages(
        self, authority: str, task_id: str, after: int, limit: int, *, seen: Task | None = None
    ) -> list[Message]:
        return self.queries.messages(authority, task_id, after, limit, self._seen(authority, task_id, seen))

    def events(self, authority: str, task_id: str, after: int, limit: int, *, seen: Task | None = None) -> list[Event]:
        return self.queries.events(authority, task_id, after, limit, self._seen(authority, task_id, seen))

    def _seen(self, authority: str, task_id: str, seen: Task | None) -> tuple[Task, Inline] | None:
        """The task item as the caller's read saw it, when its inline records are remembered (the
        read was this store's, lately): a stream page then reads no task item again."""
        if seen is None or (seen.authority, seen.id) != (authority, task_id):
            return None
        inline = self.inline.recall((seen.authority, seen.id, seen.revision, seen.fence, seen.owner))
        return (seen, inline) if inline is not None else None

    def expired(self, shard: int, now: str, limit: int) -> list[Task]:
        return self.queries.expired(shard, now, limit)

    def claimable(self, authority: str, shard: int, limit: int) -> list[Task]:
        # A claim commits on one of these: their inline records are remembered as a read's are.
        return [self._remembered(item) for item in self.queries.claimable_items(authority, shard, limit)]

    def context_tasks(self, authority: str, context: str, after: tuple[str, ...] | None, limit: int) -> TaskPage:
        return self.queries.context_tasks(authority, context, after, limit)

    def authority_tasks(
        self, authority: str, task_filter: TaskFilter, after: tuple[str, ...] | None, limit: int
    ) -> TaskPage:
        return self.queries.authority_tasks(authority, task_filter, after, limit)

    def authority_position(self, updated_at: str, workspace: str, task_id: str) -> tuple[str, ...]:
        return self.queries.authority_position(updated_at, workspace, task_id)

    def leases(self, authority: str, worker: str, after: tuple[str, ...] | None, limit: int) -> LeasePage:
        return self.queries.leases(authority, worker, after, limit)

    # ---- the S3 side (TaskObjects) --------------------------------------------------------------

    def stage_artifact_upload(self, authority: str, sha256: str, max_bytes: int) -> int:
        return self.objects.stage_artifact_upload(authority, sha256, max_bytes)

    def presign_artifact_upload(self, authority: str, size: int, sha256: str, expires_in: int) -> PresignedUpload:
        return self.objects.presign_artifact_upload(authority, size, sha256, expires_in)

    def part_url(self, authority: str, sha256: str, expires_in: int) -> str:
        return self.objects.part_url(authority, sha256, expires_in)

    def artifact_url(self, artifact: Artifact, expires_in: int) -> str:
        return self.objects.artifact_url(artifact, expires_in)

    def artifact_content(self, authority: str, workspace: str, artifact: str) -> tuple[Artifact, bytes | None] | None:
        return self.objects.artifact_content(authority, workspace, artifact)

    # ---- a command's read and commit -------------------------------------------------------------

    def read(
        self, authority: str, command_id: str | None, task_id: str | None, *, delivery: DeliveryKey | None = None
    ) -> Snapshot:
        wanted: list[tuple[str, tuple[Any, str, str]]] = []
        if command_id:
            wanted.append(("receipt", (self.items.receipts, receipt_pk(authority, command_id), "-")))
        if task_id:
            wanted.append(("task", (self.items.tasks, task_pk(authority, task_id), "T")))
        if delivery:
            wanted.append(("delivery", (self.items.deliveries, delivery_pk(authority, *delivery), "-")))
        found = dict(zip((w for w, _ in wanted), self.items.get_many([k for _, k in wanted]), strict=True))
        receipt_item, task_item, delivery_item = found.get("receipt"), found.get("task"), found.get("delivery")
        return Snapshot(
            self.items.receipt(authority, command_id or "", receipt_item) if receipt_item is not None else None,
            self._remembered(task_item) if task_item is not None else None,
            self.items.delivery(authority, *delivery, delivery_item)
            if delivery and delivery_item is not None
            else None,
        )

    def _remembered(self, item: Any) -> Task:
        task = self.items.task(item)
        self.inline.remember((task.authority, task.id, task.revision, task.fence, task.owner), inline_of(item))
        return task

    def _stored_inline(self, authority: str, task_id: str, expect: Any) -> Inline:
        """The inline records stored at the version the commit expects: as its read saw them, else
        read once more (if that version is no longer stored, the commit's CAS fails anyway)."""
        found = self.inline.recall((authority, task_id, expect.revision, expect.fence, expect.owner))
        if found is not None:
            return found
        (item,) = self.items.get_many([(self.items.tasks, task_pk(authority, task_id), "T")])
        return inline_of(item) if item is not None else Inline()

    def commit(self, commit: Commit) -> None:
        authority = commit.receipt.authority
        self.objects.store_parts(authority, commit.messages)
        inline = None
        if commit.artifact is not None and commit.payload is not None:
            inline = self.objects.store_payload(commit.artifact, commit.payload)
        tasks, claims = self.items.tasks, self.items.claims
        ops = [_Op("receipt", self.items.receipt_item(commit.receipt), self.items.receipts.pk.does_not_exist())]
        # Each message in its id's guard; its place, the events and the grant in the task item, as
        # far as the rule lets them (dynamo_inline.fit); the rest in items of their own.
        guards = [self.items.message_guard(authority, m) for m in commit.messages]
        refs = tuple(message_ref(m, item_bytes(g.serialize())) for m, g in zip(commit.messages, guards, strict=True))
        stored = Inline() if commit.expect is None else self._stored_inline(authority, commit.task.id, commit.expect)
        records = stored.appended(commit.events, commit.grant, refs)
        appended = len(commit.events)
        task, spilled = fit(lambda kept: self.items.task_item(commit.task, kept, appended=appended), records)
        if commit.expect is None:
            ops.append(_Op("task_insert", task, tasks.pk.does_not_exist()))
        else:
            e = commit.expect
            # The revision is `rv` in a v2 item, `revision` in a v1 one (records.TaskItem).
            revision = (tasks.revision == e.revision) | (
                (tasks.v1_revision == e.revision) & tasks.revision.does_not_exist()
            )
            cas = revision & _equal(tasks.owner, e.owner) & (tasks.fence == e.fence)
            if e.heartbeat_at is not None:
                cas = cas & _equal(tasks.heartbeat_at, e.heartbeat_at)
            if e.unaccepted:
                cas = cas & (tasks.accepted_at.does_not_exist() | (tasks.accepted_at == ""))
            ops.append(_Op("task_cas", task, cas, old=True))
        ops += [_Op("message_id", guard, claims.pk.does_not_exist()) for guard in guards]
        for item in self.items.spilled_items(authority, commit.task.id, spilled):  # insert-only, as every record
            ops.append(_Op("record", item, type(item).pk.does_not_exist()))
        if commit.submission:
            claim = claims(submission_pk(authority, commit.submission), "-", task=commit.task.id)
            ops.append(_Op("submission", claim, claims.pk.does_not_exist()))
        if commit.artifact is not None:
            artifact = self.items.artifact_item(commit.artifact, inline)
            ops.append(_Op("artifact", artifact, self.items.artifacts.pk.does_not_exist()))
        if commit.head_claim is not None:
            h, heads = commit.head_claim, self.items.heads
            # Inserted by the first freeze in the workspace, else it must be at the claim's revision.
            actions = [
                heads.authority.set(h.authority),
                heads.workspace.set(h.workspace),
                heads.confirmed_revision.set(heads.confirmed_revision | h.confirmed_revision),
                heads.updated_at.set(heads.updated_at | h.updated_at),
            ]
            condition = heads.pk.does_not_exist() | (heads.confirmed_revision == h.confirmed_revision)
            ops.append(_Op("head", heads(head_pk(authority, h.workspace), "-"), condition, actions, old=True))
        if commit.artifact_change is not None:
            c, arts = commit.artifact_change, self.items.artifacts
            actions = [arts.state.set(c.to_state), getattr(arts, c.stamp).set(c.at)]
            moved = arts(artifact_pk(authority, c.workspace, c.artifact), "-")
            ops.append(_Op("artifact_change", moved, arts.state == c.from_state, actions))
        if commit.delivery is not None:
            settled = self.items.delivery_item(commit.delivery)
            ops.append(_Op("delivery", settled, self.items.deliveries.pk.does_not_exist()))
        self._transact(ops)

    def read_apply(self, authority: str, command_id: str, workspace: str, artifact: str) -> ApplySnapshot:
        receipt_item, artifact_item, apply_item, head_item = self.items.get_many(
            [
                (self.items.receipts, receipt_pk(authority, command_id), "-"),
                (self.items.artifacts, artifact_pk(authority, workspace, artifact), "-"),
                (self.items.apply_receipts, apply_pk(authority, workspace, artifact), "-"),
                (self.items.heads, head_pk(authority, workspace), "-"),
            ]
        )
        return ApplySnapshot(
            self.items.receipt(authority, command_id, receipt_item) if receipt_item is not None else None,
            self.items.artifact(artifact_item) if artifact_item is not None else None,
            self.items.apply_receipt(authority, workspace, artifact, apply_item) if apply_item is not None else None,
            self.items.head(head_item) if head_item is not None else None,
        )

    def commit_apply(self, commit: ApplyCommit) -> None:
        ap, heads = commit.apply_receipt, self.items.heads
        authority = commit.receipt.authority
        record = self.items.apply_receipt_item(authority, ap)
        ops = [
            _Op("receipt", self.items.receipt_item(commit.receipt), self.items.receipts.pk.does_not_exist()),
            _Op("apply_receipt", record, self.items.apply_receipts.pk.does_not_exist()),
        ]
        if commit.head_to is not None:
            # success: the head moves from the artifact's base to its result by compare-and-swap.
            to = commit.head_to
            actions = [heads.confirmed_revision.set(to.confirmed_revision), heads.updated_at.set(to.updated_at)]
            item = heads(head_pk(authority, ap.workspace), "-")
            ops.append(_Op("head", item, heads.confirmed_revision == commit.head_from, actions, old=True))
        self._transact(ops)

    def _transact(self, ops: list[_Op]) -> None:
        """One TransactWriteItems. A failed condition raises its typed failure, with the stored task
        or head when DynamoDB returned it; any other failure is commit_unknown (the receipt makes
        the exact retry safe)."""
        from pynamodb.transactions import TransactWrite

        try:
            with committing():
                with TransactWrite(connection=connection(self.items.dynamodb)) as tx:
                    for op in ops:
                        old = "ALL_OLD" if op.old else None
                        if op.actions is None:
                            tx.save(op.item, condition=op.condition, return_values=old)
                        else:
                            tx.update(op.item, actions=op.actions, condition=op.condition, return_values=old)
        except CommitUnknown as exc:
            failed = failed_condition(exc.__cause__, [op.name for op in ops])
            if failed is None:
                raise  # TransactionConflict and friends: the outcome is for the retry to settle
            name, raw = failed
            task = self.items.task(self.items.tasks.from_raw_data(raw)) if name == "task_cas" and raw else None
            head = self.items.head(self.items.heads.from_raw_data(raw)) if name == "head" and raw else None
            raise commit_failure(name, task=task, head=head) from None

    def settle(self, delivery: Delivery) -> None:
        from pynamodb.exceptions import PutError

        with pynamodb_errors(write=True):
            try:
                self.items.delivery_item(delivery).save(condition=self.items.deliveries.pk.does_not_exist())
            except PutError as exc:
                if exc.cause_response_code == "ConditionalCheckFailedException":
                    raise DeliveryTaken() from None
                raise

    def heartbeat(self, authority: str, task_id: str, worker: str, fence: int, at: str) -> Task:
        """Two round trips: a strongly consistent GetItem (the lease must be current; the task gives
        the new deadline, which the expiry index is keyed on, and whether the beat accepts the
        grant), then one UpdateItem conditioned on the same owner, fence and revision, so a fence or
        a command in between wins. A command that landed in between (an accept) is re-read and the
        beat written again, so the index never keeps a deadline the task no longer has."""
        from pynamodb.exceptions import UpdateError

        t = self.items.tasks
        for _ in range(HEARTBEAT_ATTEMPTS):
            task = self.read(authority, None, task_id).task
            after = heartbeat(task, worker, fence, at)
            assert task is not None  # heartbeat() refused an absent task
            accepted = t.accepted_at.set(after.accepted_at) if after.accepted_at else t.accepted_at.remove()
            # A beat appends no event: the stream must not read the last command's `ne` again.
            actions: list[Any] = [t.heartbeat_at.set(at), accepted, t.new_events.remove()]
            deadline = lease_deadline(after)
            if deadline is not None:
                actions.append(t.exp_pk.set(f"X#{expiry_shard(authority, task_id)}"))
                actions.append(t.exp_sk.set(f"{deadline}#{authority}#{task_id}"))
            else:
                actions += [t.exp_pk.remove(), t.exp_sk.remove()]  # accepted, no lease timeout: nothing is due
            item = t(task_pk(authority, task_id), "T")
            revision = (t.revision == task.revision) | ((t.v1_revision == task.revision) & t.revision.does_not_exist())
            condition = (t.owner == worker) & (t.fence == fence) & revision
            with pynamodb_errors(write=True):
                try:
                    item.update(actions=actions, condition=condition)
                except UpdateError as exc:
                    if exc.cause_response_code != "ConditionalCheckFailedException":
                        raise
                    continue  # re-read: a lease that is no longer current raises TaskChanged there
            return self.items.task(item)
        # Still current but changing under every beat: nothing was written, the worker beats again.
        raise CommitUnknown("the task kept changing under this heartbeat; send it again", task=task_id)

    # ---- the claimable index's layout ------------------------------------------------------------

    def reshard_claimable(self, resume: str | None, limit: int) -> tuple[int, str | None]:
        """One Scan page of the sparse claimable index (only claimable tasks are in it), then one
        UpdateItem per entry to move, conditioned on the key the scan saw."""
        from pynamodb.exceptions import UpdateError

        t = self.items.tasks
        start = json.loads(resume) if resume else None
        with pynamodb_errors(write=False):
            items, last = one_page(t, t.claimable.scan(page_size=limit, last_evaluated_key=start))
        moved = 0
        for item in items:
            wanted = claim_key(item.authority, claim_shard(item.authority, item.id, self.claim_shards))
            if item.claim_pk == wanted:
                continue
            with pynamodb_errors(write=True):
                try:
                    entry: list[Any] = [t.claim_pk.set(wanted), t.new_events.remove()]  # no event appended
                    t(item.pk, item.sk).update(actions=entry, condition=t.claim_pk == item.claim_pk)
                except UpdateError as exc:
                    if exc.cause_response_code != "ConditionalCheckFailedException":
                        raise
                    continue  # written since (by a writer that keys it itself) or no longer claimable
            moved += 1
        return moved, json.dumps(last, sort_keys=True) if last else None

    def claimable_layout(self) -> ClaimableLayout:
        with pynamodb_errors(write=False):
            item = get_item(self.items.layouts, LAYOUT_PK, "-")
        if item is None:
            return ClaimableLayout()
        return ClaimableLayout(int(item.shards or 0), int(item.target or 0), item.resume, int(item.moved or 0))

    def record_claimable_layout(self, layout: ClaimableLayout) -> None:
        with pynamodb_errors(write=True):
            self.items.layouts(LAYOUT_PK, "-", **attributes(layout)).save()
