"""The DynamoDB TaskStore (with S3 for large message parts).

One table. Items (pk, sk):
- task        T#<authority>#<task>, "T"      the aggregate, current lease included
- message     T#<authority>#<task>, M#<seq>  parts inline, or a digest when the part is in S3
- event       T#<authority>#<task>, E#<seq>
- grant       T#<authority>#<task>, G#<fence>  immutable lease history
- receipt     C#<authority>#<command>, "-"   the command's stored result
- message id  MID#<authority>#<message>, "-" authority-wide uniqueness
- submission  S#<authority>#<submission>, "-"
IDs match ^[A-Za-z0-9][A-Za-z0-9._:-]*$, so "#" cannot occur inside one: the keys are injective.

GSIs on the task item (sparse where it matters):
- claimable   (authority; created_at#workspace#task), only while non-terminal and unowned
- leases      (authority#worker; granted_at#workspace#task#fence), only while owned
- by_context  (authority#context; created_at#workspace#task)
- by_authority (authority; inverted(updated_at)#workspace#task): newest update first

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

from dovecote.platform.aws import THROTTLE_CODES, aws_error_code, aws_errors
from dovecote.platform.errors import CommitUnknown
from dovecote.tasks import machine
from dovecote.tasks.model import TOTAL_SIZE_CAP, Event, Message, Part, Receipt, Task
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
        self._table = table
        self._bucket = bucket
        self._ddb = dynamodb
        self._s3 = s3

    # ---- encoding ---------------------------------------------------------------------------

    def _task_item(self, t: Task) -> dict[str, Any]:
        item: dict[str, Any] = {
            "pk": {"S": task_pk(t.authority, t.id)},
            "sk": {"S": "T"},
            "authority": {"S": t.authority},
            "id": {"S": t.id},
            "workspace": {"S": t.workspace},
            "context": {"S": t.context},
            "state": {"S": t.state},
            "revision": {"N": str(t.revision)},
            "message_count": {"N": str(t.message_count)},
            "event_count": {"N": str(t.event_count)},
            "created_at": {"S": t.created_at},
            "updated_at": {"S": t.updated_at},
            "owner": {"S": t.owner},
            "fence": {"N": str(t.fence)},
            "granted_at": {"S": t.granted_at},
            "ctx_pk": {"S": f"{t.authority}#{t.context}"},
            "ctx_sk": {"S": f"{t.created_at}#{t.workspace}#{t.id}"},
            "auth_pk": {"S": t.authority},
            "auth_sk": {"S": f"{invert(t.updated_at)}#{t.workspace}#{t.id}"},
        }
        if t.submission:
            item["submission"] = {"S": json.dumps(t.submission, sort_keys=True)}
        if not t.owner and not machine.is_terminal(t.state):
            item["claim_pk"] = {"S": t.authority}
            item["claim_sk"] = {"S": f"{t.created_at}#{t.workspace}#{t.id}"}
        if t.owner:
            item["lease_pk"] = {"S": f"{t.authority}#{t.owner}"}
            item["lease_sk"] = {"S": f"{t.granted_at}#{t.workspace}#{t.id}#{t.fence:020d}"}
        return item

    @staticmethod
    def _task(item: dict[str, Any]) -> Task:
        submission = item.get("submission", {}).get("S")
        return Task(
            authority=item["authority"]["S"],
            id=item["id"]["S"],
            workspace=item["workspace"]["S"],
            context=item["context"]["S"],
            state=item["state"]["S"],
            revision=int(item["revision"]["N"]),
            message_count=int(item["message_count"]["N"]),
            event_count=int(item["event_count"]["N"]),
            created_at=item["created_at"]["S"],
            updated_at=item["updated_at"]["S"],
            owner=item["owner"]["S"],
            fence=int(item["fence"]["N"]),
            granted_at=item["granted_at"]["S"],
            submission=json.loads(submission) if submission else None,
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

    def _message_item(self, authority: str, m: Message) -> dict[str, Any]:
        parts = []
        for part in m.parts:
            if len(part.data) <= INLINE_PART_BYTES:
                parts.append({"M": {"media_type": {"S": part.media_type}, "data": {"B": part.data}}})
            else:
                digest = hashlib.sha256(part.data).hexdigest()
                parts.append(
                    {
                        "M": {
                            "media_type": {"S": part.media_type},
                            "sha256": {"S": digest},
                            "size": {"N": str(len(part.data))},
                        }
                    }
                )
        return {
            "pk": {"S": task_pk(authority, m.task)},
            "sk": {"S": f"M#{m.sequence:020d}"},
            "id": {"S": m.id},
            "author": {"S": m.author},
            "parts": {"L": parts},
            "created_at": {"S": m.created_at},
        }

    def _message(self, authority: str, task_id: str, item: dict[str, Any]) -> Message:
        parts = []
        for raw in item["parts"]["L"]:
            part = raw["M"]
            if "data" in part:
                data = bytes(part["data"]["B"])
            else:
                with aws_errors(write=False):
                    obj = self._s3.get_object(Bucket=self._bucket, Key=self._part_key(authority, part["sha256"]["S"]))
                    data = obj["Body"].read()
            parts.append(Part(part["media_type"]["S"], data))
        return Message(
            task_id,
            item["id"]["S"],
            int(item["sk"]["S"][2:]),
            item["author"]["S"],
            tuple(parts),
            item["created_at"]["S"],
        )

    # ---- the port ---------------------------------------------------------------------------

    def read(self, authority: str, command_id: str | None, task_id: str | None) -> Snapshot:
        keys = []
        if command_id:
            keys.append({"pk": {"S": f"C#{authority}#{command_id}"}, "sk": {"S": "-"}})
        if task_id:
            keys.append({"pk": {"S": task_pk(authority, task_id)}, "sk": {"S": "T"}})
        with aws_errors(write=False):
            if len(keys) == 2:
                response = self._ddb.transact_get_items(
                    TransactItems=[{"Get": {"TableName": self._table, "Key": k}} for k in keys]
                )
                items = [r.get("Item") for r in response["Responses"]]
            else:
                items = [self._ddb.get_item(TableName=self._table, Key=keys[0], ConsistentRead=True).get("Item")]
        receipt_item = items.pop(0) if command_id else None
        task_item = items.pop(0) if task_id else None
        receipt = None
        if receipt_item:
            receipt = Receipt(
                authority,
                command_id or "",
                receipt_item["kind"]["S"],
                receipt_item["digest"]["S"],
                int(receipt_item["status"]["N"]),
                json.loads(receipt_item["result"]["S"]),
            )
        return Snapshot(receipt, self._task(task_item) if task_item else None)

    def commit(self, commit: Commit) -> None:
        from botocore.exceptions import ClientError

        authority = commit.receipt.authority
        self._store_parts(authority, commit.messages)
        absent = "attribute_not_exists(pk)"
        ops: list[tuple[str, dict[str, Any]]] = []  # (what, operation): `what` names a failed condition

        def put(what: str, item: dict[str, Any], condition: str = absent, **extra: Any) -> None:
            ops.append(
                (what, {"Put": {"TableName": self._table, "Item": item, "ConditionExpression": condition, **extra}})
            )

        r = commit.receipt
        put(
            "receipt",
            {
                "pk": {"S": f"C#{authority}#{r.id}"},
                "sk": {"S": "-"},
                "kind": {"S": r.kind},
                "digest": {"S": r.digest},
                "status": {"N": str(r.status)},
                "result": {"S": json.dumps(r.result, sort_keys=True)},
            },
        )
        if commit.expect is None:
            put("task_insert", self._task_item(commit.task))
        else:
            put(
                "task_cas",
                self._task_item(commit.task),
                "revision = :rev AND #owner = :owner AND fence = :fence",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={
                    ":rev": {"N": str(commit.expect.revision)},
                    ":owner": {"S": commit.expect.owner},
                    ":fence": {"N": str(commit.expect.fence)},
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        for m in commit.messages:
            put("message_id", {"pk": {"S": f"MID#{authority}#{m.id}"}, "sk": {"S": "-"}, "task": {"S": m.task}})
            put("record", self._message_item(authority, m))
        for e in commit.events:
            event_item = {
                "pk": {"S": task_pk(authority, e.task)},
                "sk": {"S": f"E#{e.sequence:020d}"},
                "type": {"S": e.type},
                "state": {"S": e.state},
                "revision": {"N": str(e.revision)},
                "occurred_at": {"S": e.occurred_at},
                "message": {"S": e.message},
                "submission": {"S": e.submission},
            }
            put("record", event_item)
        if commit.grant:
            g = commit.grant
            put(
                "record",
                {
                    "pk": {"S": task_pk(authority, g.task)},
                    "sk": {"S": f"G#{g.fence:020d}"},
                    "worker": {"S": g.worker},
                    "granted_at": {"S": g.granted_at},
                },
            )
        if commit.submission:
            put(
                "submission",
                {"pk": {"S": f"S#{authority}#{commit.submission}"}, "sk": {"S": "-"}, "task": {"S": commit.task.id}},
            )
        try:
            with committing():
                self._ddb.transact_write_items(TransactItems=[op for _, op in ops])
        except CommitUnknown as exc:
            cause = exc.__cause__
            if not isinstance(cause, ClientError) or aws_error_code(cause) != "TransactionCanceledException":
                raise
            reasons = cause.response.get("CancellationReasons") or []
            failed = [
                (ops[i][0], reason)
                for i, reason in enumerate(reasons)
                if reason.get("Code") == "ConditionalCheckFailed"
            ]
            if not failed:
                raise  # TransactionConflict and friends: the outcome is for the retry to settle
            what, reason = failed[0]
            if what == "receipt":
                raise ReceiptTaken() from None
            if what == "task_insert":
                raise TaskExists() from None
            if what == "message_id":
                raise MessageIdTaken() from None
            if what == "submission":
                raise SubmissionIdTaken() from None
            old = reason.get("Item")
            raise TaskChanged(self._task(old) if what == "task_cas" and old else None) from None

    def _query(self, **params: Any) -> dict[str, Any]:
        with aws_errors(write=False):
            return dict(self._ddb.query(TableName=self._table, **params))

    def claimable(self, authority: str, limit: int) -> list[Task]:
        response = self._query(
            IndexName="claimable",
            KeyConditionExpression="claim_pk = :a",
            ExpressionAttributeValues={":a": {"S": authority}},
            Limit=limit,
        )
        return [self._task(i) for i in response.get("Items", [])]

    def _stream(self, authority: str, task_id: str, prefix: str, after: int, limit: int) -> list[dict[str, Any]]:
        response = self._query(
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":pk": {"S": task_pk(authority, task_id)},
                ":lo": {"S": f"{prefix}#{after + 1:020d}"},
                ":hi": {"S": f"{prefix}#{'9' * 20}"},
            },
            Limit=limit,
            ConsistentRead=True,
        )
        return list(response.get("Items", []))

    def messages(self, authority: str, task_id: str, after: int, limit: int) -> list[Message]:
        return [self._message(authority, task_id, i) for i in self._stream(authority, task_id, "M", after, limit)]

    def events(self, authority: str, task_id: str, after: int, limit: int) -> list[Event]:
        return [
            Event(
                task_id,
                int(i["sk"]["S"][2:]),
                i["type"]["S"],
                i["state"]["S"],
                int(i["revision"]["N"]),
                i["occurred_at"]["S"],
                message=i["message"]["S"],
                submission=i["submission"]["S"],
            )
            for i in self._stream(authority, task_id, "E", after, limit)
        ]

    def _page(
        self,
        index: str,
        pk_attr: str,
        pk: str,
        sk_attr: str,
        after: tuple[str, ...] | None,
        limit: int,
        *,
        upper: str = "~",
        filters: dict[str, str] | None = None,
    ) -> tuple[list[Task], tuple[str, ...] | None]:
        """One Query per page over `sk BETWEEN lower AND upper`. The lower bound is exclusive of the
        cursor: `after + " "` is the least key above it, as every key character sorts above a space.
        One extra item tells whether more remain; with a filter, a page may come back short."""
        names = {"#pk": pk_attr, "#sk": sk_attr}
        values = {":pk": {"S": pk}, ":lo": {"S": (after[0] + " ") if after else " "}, ":hi": {"S": upper}}
        params: dict[str, Any] = {}
        if filters:
            clauses = []
            for i, (attribute, value) in enumerate(sorted(filters.items())):
                names[f"#f{i}"] = attribute
                values[f":f{i}"] = {"S": value}
                clauses.append(f"#f{i} = :f{i}")
            params["FilterExpression"] = " AND ".join(clauses)
        response = self._query(
            IndexName=index,
            KeyConditionExpression="#pk = :pk AND #sk BETWEEN :lo AND :hi",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            Limit=limit + 1,
            **params,
        )
        items = response.get("Items", [])
        page = [self._task(i) for i in items[:limit]]
        if len(items) > limit:
            return page, (items[limit - 1][sk_attr]["S"],)
        if "LastEvaluatedKey" in response:  # the evaluated range ended before the matches did
            return page, (response["LastEvaluatedKey"][sk_attr]["S"],)
        return page, None

    def context_tasks(self, authority: str, context: str, after: tuple[str, ...] | None, limit: int) -> TaskPage:
        items, cursor = self._page("by_context", "ctx_pk", f"{authority}#{context}", "ctx_sk", after, limit)
        return TaskPage(items, cursor)

    def authority_tasks(
        self, authority: str, task_filter: TaskFilter, after: tuple[str, ...] | None, limit: int
    ) -> TaskPage:
        filters = {k: v for k, v in (("context", task_filter.context), ("state", task_filter.state)) if v}
        # updated_at >= since  ⟺  inverted(updated_at) <= inverted(since); "$" sorts just above "#".
        upper = invert(task_filter.updated_since) + "$" if task_filter.updated_since else "~"
        items, cursor = self._page(
            "by_authority", "auth_pk", authority, "auth_sk", after, limit, upper=upper, filters=filters
        )
        total, more = self._count(authority, upper, filters)
        return TaskPage(items, cursor, total_size=total, total_is_lower_bound=more)

    def _count(self, authority: str, upper: str, filters: dict[str, str]) -> tuple[int, bool]:
        """The filtered set's size from one COUNT query over the same index that evaluates at most
        TOTAL_SIZE_CAP items, so a list request's cost stays bounded; past the cap the count is a
        lower bound. Not a snapshot: the GSI is eventually consistent (see the README)."""
        names = {"#pk": "auth_pk", "#sk": "auth_sk"}
        values = {":pk": {"S": authority}, ":lo": {"S": " "}, ":hi": {"S": upper}}
        params: dict[str, Any] = {
            "IndexName": "by_authority",
            "Select": "COUNT",
            "Limit": TOTAL_SIZE_CAP,
            "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :lo AND :hi",
        }
        clauses = []
        for i, (attribute, value) in enumerate(sorted(filters.items())):
            names[f"#f{i}"] = attribute
            values[f":f{i}"] = {"S": value}
            clauses.append(f"#f{i} = :f{i}")
        if clauses:
            params["FilterExpression"] = " AND ".join(clauses)
        params.update(ExpressionAttributeNames=names, ExpressionAttributeValues=values)
        response = self._query(**params)
        # With a filter, fewer than the cap may match among the evaluated items: still a floor.
        return int(response.get("Count", 0)), "LastEvaluatedKey" in response

    def leases(self, authority: str, worker: str, after: tuple[str, ...] | None, limit: int) -> LeasePage:
        items, cursor = self._page("leases", "lease_pk", f"{authority}#{worker}", "lease_sk", after, limit)
        return LeasePage(items, cursor)


@contextmanager
def committing() -> Iterator[None]:
    """A write that may have been sent is `commit_unknown`: the receipt makes the exact retry safe."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        code = aws_error_code(exc)
        if code in THROTTLE_CODES:
            raise CommitUnknown("AWS throttled the commit; retry the exact command", aws_code=code) from exc
        raise CommitUnknown("the commit outcome is unknown; retry the exact command", aws_code=code) from exc
    except BotoCoreError as exc:
        raise CommitUnknown("the commit outcome is unknown; retry the exact command", cause=type(exc).__name__) from exc
