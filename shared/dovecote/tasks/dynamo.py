"""The DynamoDB TaskStore (with S3 for large message parts). Items are PynamoDB models
(tasks/records.py).

One table. Items (pk, sk):
- task        T#<authority>#<task>, "T"      the aggregate, current lease included   TaskItem
- message     T#<authority>#<task>, M#<seq>  parts inline, or a digest when in S3    MessageItem
- event       T#<authority>#<task>, E#<seq>                                          EventItem
- grant       T#<authority>#<task>, G#<fence>  immutable lease history               GrantItem
- receipt     C#<authority>#<command>, "-"   the command's stored result             ReceiptItem
- message id  MID#<authority>#<message>, "-" authority-wide uniqueness               ClaimItem
- submission  S#<authority>#<submission>, "-"                                        ClaimItem
IDs match ^[A-Za-z0-9][A-Za-z0-9._:-]*$, so "#" cannot occur inside one: the keys are injective.

GSIs on the task item (sparse where it matters):
- claimable   (authority; created_at#workspace#task), only while non-terminal and unowned
- leases      (authority#worker; granted_at#workspace#task#fence), only while owned
- by_context  (authority#context; created_at#workspace#task)
- by_authority (authority; inverted(updated_at)#workspace#task): newest update first
- expiring    (X#<shard>; deadline#authority#task), only while leased with a timeout: the
              dispatcher's view of silent leases, across authorities (EXPIRY_SHARDS partitions)

Round trips: a command is one TransactGetItems (receipt + task, strongly consistent) and one
TransactWriteItems; an exact replay is the read alone. Parts over INLINE_PART_BYTES add one
conditional PutObject each, before the transaction (content-addressed, If-None-Match: *).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dovecote.platform.aws import THROTTLE_CODES, aws_error_code
from dovecote.platform.dynamo import bind, connection, one_page, pynamodb_errors, unwrap
from dovecote.platform.errors import CommitUnknown
from dovecote.tasks import machine
from dovecote.tasks.model import (
    TOTAL_SIZE_CAP,
    Event,
    Grant,
    Message,
    Part,
    Receipt,
    Task,
    expiry_shard,
    lease_deadline,
)
from dovecote.tasks.ports import (
    Commit,
    LeasePage,
    MessageIdTaken,
    ReceiptTaken,
    Snapshot,
    SubmissionIdTaken,
    TaskChanged,
    TaskExists,
    TaskFilter,
    TaskPage,
)
from dovecote.tasks.records import (
    ClaimItem,
    EventItem,
    GrantItem,
    MessageItem,
    PartAttribute,
    ReceiptItem,
    TaskItem,
)

# Parts up to this size live in the message item; larger ones in S3 by digest. Items are capped at
# 400 KB and a message may carry 2 MiB.
INLINE_PART_BYTES = 8 * 1024


def invert(timestamp: str) -> str:
    """Sorts newest first: each character's order is reversed (RFC 3339 UTC strings of one length
    sort like their instants). Every result character sorts above '#', the key separator."""
    return "".join(chr(0x7F - ord(c)) for c in timestamp)


def task_pk(authority: str, task_id: str) -> str:
    return f"T#{authority}#{task_id}"


class DynamoTaskStore:
    def __init__(self, *, table: str, bucket: str, dynamodb: Any, s3: Any) -> None:
        self._bucket = bucket
        self._ddb = dynamodb
        self._s3 = s3
        self._tasks = bind(TaskItem, table=table, client=dynamodb)
        self._messages = bind(MessageItem, table=table, client=dynamodb)
        self._events = bind(EventItem, table=table, client=dynamodb)
        self._grants = bind(GrantItem, table=table, client=dynamodb)
        self._receipts = bind(ReceiptItem, table=table, client=dynamodb)
        self._claims = bind(ClaimItem, table=table, client=dynamodb)

    # ---- mapping ----------------------------------------------------------------------------

    def _task_item(self, t: Task) -> TaskItem:
        item = self._tasks(
            task_pk(t.authority, t.id),
            "T",
            authority=t.authority,
            id=t.id,
            workspace=t.workspace,
            context=t.context,
            state=t.state,
            revision=t.revision,
            message_count=t.message_count,
            event_count=t.event_count,
            created_at=t.created_at,
            updated_at=t.updated_at,
            owner=t.owner,
            fence=t.fence,
            granted_at=t.granted_at,
            heartbeat_at=t.heartbeat_at,
            lease_timeout=t.lease_timeout,
            submission=json.dumps(t.submission, sort_keys=True) if t.submission else None,
            ctx_pk=f"{t.authority}#{t.context}",
            ctx_sk=f"{t.created_at}#{t.workspace}#{t.id}",
            auth_pk=t.authority,
            auth_sk=f"{invert(t.updated_at)}#{t.workspace}#{t.id}",
        )
        if not t.owner and not machine.is_terminal(t.state):
            item.claim_pk = t.authority
            item.claim_sk = f"{t.created_at}#{t.workspace}#{t.id}"
        if t.owner:
            item.lease_pk = f"{t.authority}#{t.owner}"
            item.lease_sk = f"{t.granted_at}#{t.workspace}#{t.id}#{t.fence:020d}"
        deadline = lease_deadline(t)
        if deadline is not None:
            item.exp_pk = f"X#{expiry_shard(t.authority, t.id)}"
            item.exp_sk = f"{deadline}#{t.authority}#{t.id}"
        return item

    @staticmethod
    def _task(item: TaskItem) -> Task:
        return Task(
            authority=item.authority,
            id=item.id,
            workspace=item.workspace,
            context=item.context,
            state=item.state,
            revision=int(item.revision),
            message_count=int(item.message_count),
            event_count=int(item.event_count),
            created_at=item.created_at,
            updated_at=item.updated_at,
            owner=item.owner or "",
            fence=int(item.fence or 0),
            granted_at=item.granted_at or "",
            heartbeat_at=item.heartbeat_at or "",
            lease_timeout=int(item.lease_timeout or 0),
            submission=json.loads(item.submission) if item.submission else None,
        )

    def _part_key(self, authority: str, digest: str) -> str:
        return f"parts/{authority}/{digest}"

    def _store_parts(self, authority: str, messages: tuple[Message, ...]) -> None:
        from botocore.exceptions import ClientError

        for message in messages:
            for part in message.parts:
                if len(part.data) <= INLINE_PART_BYTES:
                    continue
                digest = hashlib.sha256(part.data).hexdigest()
                try:
                    with committing():
                        self._s3.put_object(
                            Bucket=self._bucket, Key=self._part_key(authority, digest), Body=part.data, IfNoneMatch="*"
                        )
                except CommitUnknown as exc:
                    cause = exc.__cause__
                    # Content-addressed: an existing object already holds exactly these bytes.
                    if isinstance(cause, ClientError) and aws_error_code(cause) in ("PreconditionFailed", "412"):
                        continue
                    raise

    def _message_item(self, authority: str, m: Message) -> MessageItem:
        parts = []
        for part in m.parts:
            if len(part.data) <= INLINE_PART_BYTES:
                parts.append(PartAttribute(media_type=part.media_type, data=part.data))
            else:
                digest = hashlib.sha256(part.data).hexdigest()
                parts.append(PartAttribute(media_type=part.media_type, sha256=digest, size=len(part.data)))
        return self._messages(
            task_pk(authority, m.task),
            f"M#{m.sequence:020d}",
            id=m.id,
            author=m.author,
            parts=parts,
            created_at=m.created_at,
        )

    def _message(self, authority: str, task_id: str, item: MessageItem) -> Message:
        """Parts stored in S3 come back remote (digest and size): a page carries a URL, never the
        bytes, so reading a page costs no S3 request."""
        parts = []
        for part in item.parts:
            if part.data is not None:
                parts.append(Part(part.media_type, bytes(part.data)))
            else:
                parts.append(Part(part.media_type, b"", part.sha256, int(part.size or 0)))
        return Message(task_id, item.id, int(item.sk[2:]), item.author, tuple(parts), item.created_at)

    def message(self, authority: str, task_id: str, message_id: str) -> Message | None:
        """Two round trips: the authority-wide id claim names the task and the sequence, then the
        message item itself."""
        with pynamodb_errors(write=False):
            claim = _get(self._claims, f"MID#{authority}#{message_id}", "-")
            if claim is None or claim.task != task_id or claim.sequence is None:
                return None
            item = _get(self._messages, task_pk(authority, task_id), f"M#{int(claim.sequence):020d}")
        return self._message(authority, task_id, item) if item is not None else None

    def grant(self, authority: str, task_id: str, fence: int) -> Grant | None:
        with pynamodb_errors(write=False):
            item = _get(self._grants, task_pk(authority, task_id), f"G#{fence:020d}")
        return Grant(task_id, item.worker, fence, item.granted_at) if item is not None else None

    def part_url(self, authority: str, sha256: str, expires_in: int) -> str:
        return str(
            self._s3.generate_presigned_url(
                "get_object",
                Params={"Bucket": self._bucket, "Key": self._part_key(authority, sha256)},
                ExpiresIn=expires_in,
            )
        )

    # ---- the port ---------------------------------------------------------------------------

    def read(self, authority: str, command_id: str | None, task_id: str | None) -> Snapshot:
        from pynamodb.transactions import TransactGet

        receipt_item: ReceiptItem | None = None
        task_item: TaskItem | None = None
        receipt_key = (f"C#{authority}#{command_id}", "-")
        task_key = (task_pk(authority, task_id or ""), "T")
        with pynamodb_errors(write=False):
            if command_id and task_id:
                with TransactGet(connection=connection(self._ddb)) as tx:
                    receipt_future = tx.get(self._receipts, *receipt_key)
                    task_future = tx.get(self._tasks, *task_key)
                receipt_item = _resolved(receipt_future)
                task_item = _resolved(task_future)
            elif command_id:
                receipt_item = _get(self._receipts, *receipt_key)
            elif task_id:
                task_item = _get(self._tasks, *task_key)
        receipt = None
        if receipt_item is not None:
            receipt = Receipt(
                authority,
                command_id or "",
                receipt_item.kind,
                receipt_item.digest,
                int(receipt_item.status),
                json.loads(receipt_item.result),
            )
        return Snapshot(receipt, self._task(task_item) if task_item is not None else None)

    def commit(self, commit: Commit) -> None:
        from pynamodb.transactions import TransactWrite

        authority = commit.receipt.authority
        self._store_parts(authority, commit.messages)
        # (what, item, condition, return old): `what` names the cause of a failed condition.
        ops: list[tuple[str, Any, Any, bool]] = []
        r = commit.receipt
        receipts, tasks, claims = self._receipts, self._tasks, self._claims
        receipt = receipts(
            f"C#{authority}#{r.id}",
            "-",
            kind=r.kind,
            digest=r.digest,
            status=r.status,
            result=json.dumps(r.result, sort_keys=True),
        )
        ops.append(("receipt", receipt, receipts.pk.does_not_exist(), False))
        task = self._task_item(commit.task)
        if commit.expect is None:
            ops.append(("task_insert", task, tasks.pk.does_not_exist(), False))
        else:
            e = commit.expect
            cas = (tasks.revision == e.revision) & (tasks.owner == e.owner) & (tasks.fence == e.fence)
            if e.heartbeat_at is not None:
                cas = cas & (tasks.heartbeat_at == e.heartbeat_at)
            ops.append(("task_cas", task, cas, True))
        for m in commit.messages:
            claim = claims(f"MID#{authority}#{m.id}", "-", task=m.task, sequence=m.sequence)
            ops.append(("message_id", claim, claims.pk.does_not_exist(), False))
            ops.append(("record", self._message_item(authority, m), self._messages.pk.does_not_exist(), False))
        for ev in commit.events:
            event = self._events(
                task_pk(authority, ev.task),
                f"E#{ev.sequence:020d}",
                type=ev.type,
                state=ev.state,
                revision=ev.revision,
                occurred_at=ev.occurred_at,
                message=ev.message,
                submission=ev.submission,
            )
            ops.append(("record", event, self._events.pk.does_not_exist(), False))
        if commit.grant:
            g = commit.grant
            grant = self._grants(
                task_pk(authority, g.task), f"G#{g.fence:020d}", worker=g.worker, granted_at=g.granted_at
            )
            ops.append(("record", grant, self._grants.pk.does_not_exist(), False))
        if commit.submission:
            claim = claims(f"S#{authority}#{commit.submission}", "-", task=commit.task.id)
            ops.append(("submission", claim, claims.pk.does_not_exist(), False))
        try:
            with committing():
                with TransactWrite(connection=connection(self._ddb)) as tx:
                    for _, item, condition, old in ops:
                        tx.save(item, condition=condition, return_values="ALL_OLD" if old else None)
        except CommitUnknown as exc:
            failed = _failed_conditions(exc.__cause__, ops)
            if failed is None:
                raise  # TransactionConflict and friends: the outcome is for the retry to settle
            what, raw = failed
            if what == "receipt":
                raise ReceiptTaken() from None
            if what == "task_insert":
                raise TaskExists() from None
            if what == "message_id":
                raise MessageIdTaken() from None
            if what == "submission":
                raise SubmissionIdTaken() from None
            stored: TaskItem | None = tasks.from_raw_data(raw) if what == "task_cas" and raw else None
            raise TaskChanged(self._task(stored) if stored is not None else None) from None

    def heartbeat(self, authority: str, task_id: str, worker: str, fence: int, at: str) -> Task:
        """Two round trips: a strongly consistent GetItem (the lease must be current; its timeout
        gives the new deadline, which the expiry index is keyed on), then one UpdateItem conditioned
        on the same owner and fence, so a fence or a terminal command in between wins."""
        from pynamodb.exceptions import UpdateError

        task = self.read(authority, None, task_id).task
        if task is None or task.owner != worker or task.fence != fence:
            raise TaskChanged(task)
        after = task.evolve(heartbeat_at=at)
        t = self._tasks
        actions: list[Any] = [t.heartbeat_at.set(at)]
        deadline = lease_deadline(after)
        if deadline is not None:
            actions.append(t.exp_sk.set(f"{deadline}#{authority}#{task_id}"))
        item = t(task_pk(authority, task_id), "T")
        with pynamodb_errors(write=True):
            try:
                item.update(
                    actions=actions,
                    condition=(t.owner == worker) & (t.fence == fence) & (t.lease_timeout == task.lease_timeout),
                )
            except UpdateError as exc:
                if exc.cause_response_code != "ConditionalCheckFailedException":
                    raise
                raise TaskChanged(self.read(authority, None, task_id).task) from None
        return self._task(item)

    def expired(self, shard: int, now: str, limit: int) -> list[Task]:
        t = self._tasks
        with pynamodb_errors(write=False):
            items, _ = one_page(t, t.expiring.query(f"X#{shard}", t.exp_sk < now, page_size=limit))
        return [self._task(i) for i in items]

    def claimable(self, authority: str, limit: int) -> list[Task]:
        with pynamodb_errors(write=False):
            items, _ = one_page(self._tasks, self._tasks.claimable.query(authority, page_size=limit))
        return [self._task(i) for i in items]

    def _stream(self, model: Any, authority: str, task_id: str, prefix: str, after: int, limit: int) -> list[Any]:
        results = model.query(
            task_pk(authority, task_id),
            model.sk.between(f"{prefix}#{after + 1:020d}", f"{prefix}#{'9' * 20}"),
            consistent_read=True,
            page_size=limit,
        )
        with pynamodb_errors(write=False):
            items, _ = one_page(model, results)
        return items

    def messages(self, authority: str, task_id: str, after: int, limit: int) -> list[Message]:
        return [
            self._message(authority, task_id, i)
            for i in self._stream(self._messages, authority, task_id, "M", after, limit)
        ]

    def events(self, authority: str, task_id: str, after: int, limit: int) -> list[Event]:
        return [
            Event(
                task_id,
                int(i.sk[2:]),
                i.type,
                i.state,
                int(i.revision),
                i.occurred_at,
                message=i.message or "",
                submission=i.submission or "",
            )
            for i in self._stream(self._events, authority, task_id, "E", after, limit)
        ]

    def _page(
        self,
        index: Any,
        pk: str,
        sk: Any,
        after: tuple[str, ...] | None,
        limit: int,
        *,
        upper: str = "~",
        filters: dict[str, str] | None = None,
    ) -> tuple[list[Task], tuple[str, ...] | None]:
        """One Query per page over `sk BETWEEN lower AND upper`. The lower bound is exclusive of the
        cursor: `after + " "` is the least key above it, as every key character sorts above a space.
        One extra item tells whether more remain; with a filter, a page may come back short."""
        results = index.query(
            pk,
            sk.between((after[0] + " ") if after else " ", upper),
            filter_condition=self._filter(filters),
            page_size=limit + 1,
        )
        with pynamodb_errors(write=False):
            items, last_key = one_page(self._tasks, results)
        page = [self._task(i) for i in items[:limit]]
        if len(items) > limit:
            return page, (getattr(items[limit - 1], sk.attr_name),)
        if last_key is not None:  # the evaluated range ended before the matches did
            return page, (last_key[sk.attr_name]["S"],)
        return page, None

    def _filter(self, filters: dict[str, str] | None) -> Any:
        condition = None
        for attribute, value in sorted((filters or {}).items()):
            clause = getattr(self._tasks, attribute) == value
            condition = clause if condition is None else condition & clause
        return condition

    def context_tasks(self, authority: str, context: str, after: tuple[str, ...] | None, limit: int) -> TaskPage:
        t = self._tasks
        items, cursor = self._page(t.by_context, f"{authority}#{context}", t.ctx_sk, after, limit)
        return TaskPage(items, cursor)

    def authority_tasks(
        self, authority: str, task_filter: TaskFilter, after: tuple[str, ...] | None, limit: int
    ) -> TaskPage:
        t = self._tasks
        filters = {k: v for k, v in (("context", task_filter.context), ("state", task_filter.state)) if v}
        # updated_at >= since  ⟺  inverted(updated_at) <= inverted(since); "$" sorts just above "#".
        upper = invert(task_filter.updated_since) + "$" if task_filter.updated_since else "~"
        items, cursor = self._page(t.by_authority, authority, t.auth_sk, after, limit, upper=upper, filters=filters)
        total, more = self._count(authority, upper, filters)
        return TaskPage(items, cursor, total_size=total, total_is_lower_bound=more)

    def _count(self, authority: str, upper: str, filters: dict[str, str]) -> tuple[int, bool]:
        """The filtered set's size from one COUNT query over the same index that evaluates at most
        TOTAL_SIZE_CAP items, so a list request's cost stays bounded; past the cap the count is a
        lower bound. Not a snapshot: the GSI is eventually consistent (see the README).
        (The table connection's query, because PynamoDB's `count` pages on to the end.)"""
        t = self._tasks
        with pynamodb_errors(write=False):
            response = t._get_connection().query(
                authority,
                range_key_condition=t.auth_sk.between(" ", upper),
                filter_condition=self._filter(filters),
                index_name="by_authority",
                limit=TOTAL_SIZE_CAP,
                select="COUNT",
            )
        # With a filter, fewer than the cap may match among the evaluated items: still a floor.
        return int(response.get("Count", 0)), "LastEvaluatedKey" in response

    def leases(self, authority: str, worker: str, after: tuple[str, ...] | None, limit: int) -> LeasePage:
        t = self._tasks
        items, cursor = self._page(t.leases, f"{authority}#{worker}", t.lease_sk, after, limit)
        return LeasePage(items, cursor)


def _get(model: Any, pk: str, sk: str) -> Any:
    try:
        return model.get(pk, sk, consistent_read=True)
    except model.DoesNotExist:
        return None


def _resolved(future: Any) -> Any:
    try:
        return future.get()
    except future._model_cls.DoesNotExist:
        return None


def _failed_conditions(cause: Any, ops: list[tuple[str, Any, Any, bool]]) -> tuple[str, Any] | None:
    """The first operation whose condition failed, with the old item DynamoDB returned for it."""
    from botocore.exceptions import ClientError

    if not isinstance(cause, ClientError) or aws_error_code(cause) != "TransactionCanceledException":
        return None
    # PynamoDB's VerboseClientError carries the reasons (with the old item) as objects.
    reasons: list[tuple[str, Any]] = [
        (r.code, r.raw_item) if r is not None else ("", None) for r in getattr(cause, "cancellation_reasons", [])
    ] or [(str(r.get("Code") or ""), r.get("Item")) for r in cause.response.get("CancellationReasons") or []]
    for (what, _, _, _), (code, item) in zip(ops, reasons, strict=False):
        if code == "ConditionalCheckFailed":
            return what, item
    return None


@contextmanager
def committing() -> Iterator[None]:
    """A write that may have been sent is `commit_unknown`: the receipt makes the exact retry safe."""
    from botocore.exceptions import BotoCoreError, ClientError
    from pynamodb.exceptions import PynamoDBException

    try:
        yield
    except PynamoDBException as exc:
        cause = unwrap(exc)
        if cause is exc:
            raise
        with committing():
            raise cause from exc
    except ClientError as exc:
        code = aws_error_code(exc)
        if code in THROTTLE_CODES:
            raise CommitUnknown("AWS throttled the commit; retry the exact command", aws_code=code) from exc
        raise CommitUnknown("the commit outcome is unknown; retry the exact command", aws_code=code) from exc
    except BotoCoreError as exc:
        raise CommitUnknown("the commit outcome is unknown; retry the exact command", cause=type(exc).__name__) from exc
