"""The DynamoDB MemoryStore, through the PynamoDB models of memory/records.py.

One table, (pk, sk) strings. IDs, scopes, authorities and terms never contain '#', so keys are
injective:
- write     W#<authority>#<write id>, "-"           state, content, tags, evidence, seq once applied
- scope     S#<authority>#<scope>, "-"              `memories`: the count, i.e. the last seq
- memory    M#<authority>#<scope>, <seq:020d>       applied memories, listed in applied order
- posting   P#<authority>#<scope>#<term>, "-"       df + the POSTING_RECENT latest seqs with the term
- relation  R#<authority>#<relation id>, "-"        the candidate (and its judgment)
- views     RS#<authority>#<scope>, <from seq:020d>#<relation id>            every relation
            RT#<authority>#<scope>#<status>, <from seq:020d>#<relation id>   by status
- receipt   C#<authority>#<command id>, "-"         a judgment's stored result
There are no GSIs: every list is a strongly consistent Query of base-table items, so what a
worker applied is listed at once.

Round trips
- submit: PutItem (conditional on a new id) + SQS SendMessage + UpdateItem (`sent`) = 3;
  an exact resubmit: the refused PutItem + GetItem = 2 (+ the send and mark if it was never sent).
- status: 1 GetItem per read (a long poll re-reads with backoff, ≤ ~25 reads in 20 s).
- cancel: 1 conditional UpdateItem (+ 1 GetItem when the flip loses).
- applied write (the worker): UpdateItem (queued → started) + TransactGetItems (scope count and
  the postings of ≤ MAX_INDEX_TERMS + 1 terms) + BatchGetItem (≤ TOP_K + 1 prior memories; skipped
  when the postings name none) + TransactWriteItems (scope count, memory, write → complete with
  evidence, postings, relations with their views) = 4, or 3. Constant in the scope's size.
  (Lambda deletes the message; that SQS call is not ours.)
- list memories / relations: 1 Query per page. Judgment: TransactGetItems + TransactWriteItems.

Refusals: a request DynamoDB refuses as invalid (ValidationException, a transaction cancelled for
ValidationError, botocore's own parameter validation) is `StoreRefused` from the worker's reads and
its apply, with AWS's reason: it can never succeed, so it is not `commit_unknown` ("retry").

Consistency: every flip is one conditional write; `apply` is one transaction conditional on the
write still `started`, the scope count and each posting's df as read, so a redelivered message
(even one racing the first delivery) can apply a write at most once.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from pynamodb.expressions.update import Action

from dovecote.memory import machine
from dovecote.memory.model import Evidence, Judgment, Memory, Receipt, Relation, Write
from dovecote.memory.ports import (
    Application,
    ReceiptTaken,
    RelationChanged,
    RelationsRefused,
    ScopeMoved,
    ScopeView,
    StoreRefused,
    WriteSettled,
)
from dovecote.memory.records import (
    NO_SORT,
    MemoryItem,
    PostingItem,
    ReceiptItem,
    RelationItem,
    ScopeItem,
    WriteItem,
)
from dovecote.memory.retrieval import Posting
from dovecote.platform.dynamo import (
    attributes,
    bind,
    conditionally,
    connection,
    failed_conditions,
    pynamodb_errors,
    record,
    refusals,
)


def _key(*parts: str) -> str:
    return "#".join(parts)


# The keys of the layout above, each (authority, ...) -> "<prefix>#<authority>#...".
write_key = partial(_key, "W")
scope_key = partial(_key, "S")
memories_key = partial(_key, "M")
posting_key = partial(_key, "P")
relation_key = partial(_key, "R")
scope_view_key = partial(_key, "RS")
status_view_key = partial(_key, "RT")
receipt_key = partial(_key, "C")


def seq_key(seq: int) -> str:
    return f"{seq:020d}"


def _strings(value: Any) -> tuple[str, ...]:
    """A ListAttribute of strings as read (PynamoDB types list elements as attributes)."""
    return tuple(str(v) for v in value or ())


def _ints(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in value or ())


class DynamoMemoryStore:
    def __init__(self, *, table: str, dynamodb: Any) -> None:
        self._writes = bind(WriteItem, table=table, client=dynamodb)
        self._scopes = bind(ScopeItem, table=table, client=dynamodb)
        self._memories = bind(MemoryItem, table=table, client=dynamodb)
        self._postings = bind(PostingItem, table=table, client=dynamodb)
        self._relations = bind(RelationItem, table=table, client=dynamodb)
        self._receipts = bind(ReceiptItem, table=table, client=dynamodb)
        self._connection = connection(dynamodb)

    # ---- encoding ---------------------------------------------------------------------------

    @staticmethod
    def _write(item: WriteItem) -> Write:
        return record(
            Write,
            item,
            numbers=("generation", "seq"),
            tags=_strings(item.tags),
            sent=bool(item.sent),
            consumed=bool(item.consumed),
            evidence=Evidence.from_json(item.evidence) if item.evidence else None,
        )

    @staticmethod
    def _memory(authority: str, scope: str, item: MemoryItem) -> Memory:
        return Memory(authority, item.id, scope, int(item.sk), item.content, _strings(item.tags), item.applied_at)

    def _memory_item(self, authority: str, scope: str, m: Memory) -> MemoryItem:
        key = memories_key(authority, scope), seq_key(m.seq)
        return self._memories(*key, id=m.id, content=m.content, tags=list(m.tags), applied_at=m.applied_at)

    def _posting_item(self, authority: str, scope: str, term: str, p: Posting) -> PostingItem:
        return self._postings(posting_key(authority, scope, term), NO_SORT, df=p.df, recent=list(p.recent))

    @staticmethod
    def _relation(authority: str, item: RelationItem) -> Relation:
        j = item.judgment
        judgment = Judgment(j["decision"], j["note"], j["judged_at"], j["command_id"]) if j else None
        evidence_ids = _strings(item.evidence_ids)
        return record(
            Relation,
            item,
            numbers=("from_seq", "to_seq"),
            authority=authority,
            evidence_ids=evidence_ids,
            judgment=judgment,
        )

    def _relation_item(self, pk: str, sk: str, r: Relation) -> RelationItem:
        values = attributes(r, keyed=("authority",))
        values.update(evidence_ids=list(r.evidence_ids), judgment=attributes(r.judgment) if r.judgment else None)
        return self._relations(pk, sk, relation_id=r.id, **values)

    # ---- writes -----------------------------------------------------------------------------

    def create_write(self, write: Write) -> Write | None:
        values = attributes(write, keyed=("evidence",))
        values.update(tags=list(write.tags), consumed=False, seq=0)
        item = self._writes(write_key(write.authority, write.id), NO_SORT, **values)
        if conditionally(lambda: item.save(condition=self._writes.pk.does_not_exist())):
            return None
        return self.get_write(write.authority, write.id)

    def get_write(self, authority: str, write_id: str) -> Write | None:
        from pynamodb.exceptions import DoesNotExist

        with pynamodb_errors(write=False):
            try:
                item = self._writes.get(write_key(authority, write_id), NO_SORT, consistent_read=True)
            except DoesNotExist:
                return None
        return self._write(item)

    def mark_sent(self, authority: str, write_id: str) -> None:
        W = self._writes
        item = W(write_key(authority, write_id), NO_SORT)
        # A write started or settled meanwhile fails the condition: nothing to mark.
        conditionally(lambda: item.update(actions=[W.sent.set(True)], condition=W.status.is_in("queued", "started")))

    def _flip(self, authority: str, write_id: str, kind: str, actions: list[Any]) -> tuple[bool, Write | None]:
        W = self._writes
        item = W(write_key(authority, write_id), NO_SORT)
        actions = [W.status.set(machine.TRANSITIONS[kind].to), *actions]
        allowed = W.status.is_in(*sorted(machine.allowed_from(kind)))
        if conditionally(lambda: item.update(actions=actions, condition=allowed)):
            return True, self._write(item)
        return False, self.get_write(authority, write_id)

    def cancel_write(self, authority: str, write_id: str, evidence: Evidence, now: str) -> tuple[bool, Write | None]:
        W = self._writes
        return self._flip(authority, write_id, "cancel", [W.evidence.set(evidence.to_json()), W.updated_at.set(now)])

    def start_write(self, authority: str, write_id: str, now: str) -> tuple[bool, Write | None]:
        return self._flip(authority, write_id, "start", [self._writes.updated_at.set(now)])

    def fail_write(self, authority: str, write_id: str, evidence: Evidence, now: str) -> bool:
        W = self._writes
        won, _ = self._flip(authority, write_id, "fail", [W.evidence.set(evidence.to_json()), W.updated_at.set(now)])
        return won

    def consume_cancel(self, authority: str, write_id: str) -> None:
        W = self._writes
        item = W(write_key(authority, write_id), NO_SORT)
        conditionally(lambda: item.update(actions=[W.consumed.set(True)], condition=W.status == "cancelled"))

    def redrive_write(self, authority: str, write_id: str, now: str) -> Write | None:
        W = self._writes
        for _ in range(3):
            write = self.get_write(authority, write_id)
            if write is None or write.status not in ("failed", "queued", "started"):
                return write
            actions: list[Action] = [
                W.generation.set(write.generation + 1),
                W.sent.set(False),
                W.updated_at.set(now),
            ]
            status = machine.next_status("requeue", write.status)
            if status is not None:
                actions += [W.status.set(status), W.evidence.remove()]
            item = W(write_key(authority, write_id), NO_SORT)
            unchanged = (W.status == write.status) & (W.generation == write.generation)
            if conditionally(partial(item.update, actions=actions, condition=unchanged)):
                return self._write(item)
            # it moved on: decide again on what it is now
        return self.get_write(authority, write_id)

    # ---- the worker --------------------------------------------------------------------------

    def scope_view(self, authority: str, scope: str, terms: tuple[str, ...]) -> ScopeView:
        from pynamodb.exceptions import DoesNotExist
        from pynamodb.transactions import TransactGet

        with pynamodb_errors(write=False), refusals(StoreRefused):
            with TransactGet(connection=self._connection) as get:
                head = get.get(self._scopes, scope_key(authority, scope), NO_SORT)
                futures = {t: get.get(self._postings, posting_key(authority, scope, t), NO_SORT) for t in terms}
        try:
            memories = int(head.get().memories)
        except DoesNotExist:
            memories = 0
        postings: dict[str, Posting] = {}
        for term, future in futures.items():
            try:
                item = future.get()
            except DoesNotExist:
                continue
            postings[term] = Posting(int(item.df), _ints(item.recent))
        return ScopeView(memories, postings)

    def memories_at(self, authority: str, scope: str, seqs: list[int]) -> list[Memory]:
        pk = memories_key(authority, scope)
        with pynamodb_errors(write=False):
            items = list(self._memories.batch_get([(pk, seq_key(s)) for s in seqs], consistent_read=True))
        found = {int(i.sk): self._memory(authority, scope, i) for i in items}
        return [found[s] for s in seqs if s in found]

    def apply(self, application: Application) -> None:
        from pynamodb.exceptions import TransactWriteError
        from pynamodb.transactions import TransactWrite

        write, memory = application.write, application.memory
        a, scope = write.authority, write.scope
        S, M, P, W = self._scopes, self._memories, self._postings, self._writes
        # PynamoDB sends puts first, then updates: `what` follows that order, to read the reasons.
        what: list[str] = []
        try:
            with refusals(StoreRefused), TransactWrite(connection=self._connection) as tx:
                expected = application.expected_memories
                tx.save(
                    S(scope_key(a, scope), NO_SORT, memories=memory.seq),
                    condition=S.pk.does_not_exist() if expected == 0 else S.memories == expected,
                )
                what.append("scope")
                tx.save(self._memory_item(a, scope, memory), condition=M.pk.does_not_exist())
                what.append("memory")
                for term, (before, after) in application.postings.items():
                    tx.save(
                        self._posting_item(a, scope, term, after),
                        condition=P.pk.does_not_exist() if before is None else P.df == before.df,
                    )
                    what.append("posting")
                for r in application.relations:
                    for pk, sk in (
                        (relation_key(a, r.id), NO_SORT),
                        (scope_view_key(a, scope), r.position),
                        (status_view_key(a, scope, r.status), r.position),
                    ):
                        tx.save(self._relation_item(pk, sk, r), condition=self._relations.pk.does_not_exist())
                        what.append("relation")
                tx.update(
                    W(write_key(a, write.id), NO_SORT),
                    actions=[
                        W.status.set(machine.TRANSITIONS["complete"].to),
                        W.evidence.set(application.evidence.to_json()),
                        W.seq.set(memory.seq),
                        W.updated_at.set(memory.applied_at),
                    ],
                    condition=W.status == "started",
                )
                what.append("write")
        except TransactWriteError as exc:
            failed = failed_conditions(exc, what)
            if "write" in failed:
                raise WriteSettled() from None
            if failed and failed <= {"relation"}:
                raise RelationsRefused("a relation with this id already exists") from None
            if failed:
                raise ScopeMoved() from None
            with pynamodb_errors(write=True):
                raise

    def bulk_load(self, authority: str, scope: str, memories: list[Memory]) -> None:
        """Load applied memories into an empty scope with BatchWriteItem (benchmarks, imports):
        the memory items, the final postings and the scope count. Not a port method and not
        atomic: no writes, no evidence, no relations; the scope must not be in use meanwhile."""
        from dovecote.memory.retrieval import build_postings

        if self.scope_view(authority, scope, ()).memories:
            raise ValueError("bulk_load needs an empty scope")
        postings = build_postings([(m.seq, m.content, m.tags) for m in memories])
        with pynamodb_errors(write=True):
            with self._memories.batch_write() as batch:
                for m in memories:
                    batch.save(self._memory_item(authority, scope, m))
            with self._postings.batch_write() as batch:
                for term, p in postings.items():
                    batch.save(self._posting_item(authority, scope, term, p))
            count = max((m.seq for m in memories), default=0)
            self._scopes(scope_key(authority, scope), NO_SORT, memories=count).save()

    # ---- reads -------------------------------------------------------------------------------

    def memories(self, authority: str, scope: str, after: int, limit: int) -> list[Memory]:
        M = self._memories
        with pynamodb_errors(write=False):
            items = list(
                M.query(
                    memories_key(authority, scope),
                    range_key_condition=M.sk > seq_key(after),
                    consistent_read=True,
                    limit=limit,
                )
            )
        return [self._memory(authority, scope, i) for i in items]

    def relations(self, authority: str, scope: str, status: str, after: str, limit: int) -> list[Relation]:
        R = self._relations
        pk = status_view_key(authority, scope, status) if status else scope_view_key(authority, scope)
        with pynamodb_errors(write=False):
            condition = R.sk > after if after else None
            items = list(R.query(pk, range_key_condition=condition, consistent_read=True, limit=limit))
        return [self._relation(authority, i) for i in items]

    # ---- judgments ---------------------------------------------------------------------------

    def read_judgment(
        self, authority: str, command_id: str, relation_id: str
    ) -> tuple[Receipt | None, Relation | None]:
        from pynamodb.exceptions import DoesNotExist
        from pynamodb.transactions import TransactGet

        with pynamodb_errors(write=False):
            with TransactGet(connection=self._connection) as get:
                receipt_future = get.get(self._receipts, receipt_key(authority, command_id), NO_SORT)
                relation_future = get.get(self._relations, relation_key(authority, relation_id), NO_SORT)
        receipt = relation = None
        try:
            r = receipt_future.get()
            receipt = Receipt(authority, command_id, r.kind, r.digest, result=dict(r.result))
        except DoesNotExist:
            pass
        try:
            relation = self._relation(authority, relation_future.get())
        except DoesNotExist:
            pass
        return receipt, relation

    def commit_judgment(self, receipt: Receipt, before: Relation, after: Relation) -> None:
        from pynamodb.exceptions import TransactWriteError
        from pynamodb.transactions import TransactWrite

        a = receipt.authority
        R, C = self._relations, self._receipts
        what: list[str] = []
        try:
            with TransactWrite(connection=self._connection) as tx:
                tx.save(
                    C(
                        receipt_key(a, receipt.id),
                        NO_SORT,
                        kind=receipt.kind,
                        digest=receipt.digest,
                        result=receipt.result,
                    ),
                    condition=C.pk.does_not_exist(),
                )
                what.append("receipt")
                tx.save(self._relation_item(relation_key(a, after.id), NO_SORT, after), condition=R.status == "pending")
                what.append("relation")
                tx.save(self._relation_item(scope_view_key(a, after.scope), after.position, after))
                what.append("view")
                tx.save(self._relation_item(status_view_key(a, after.scope, after.status), after.position, after))
                what.append("view")
                tx.delete(R(status_view_key(a, before.scope, before.status), before.position))
                what.insert(0, "view")  # deletes are sent before puts
        except TransactWriteError as exc:
            failed = failed_conditions(exc, what)
            if "receipt" in failed:
                raise ReceiptTaken() from None
            if "relation" in failed:
                raise RelationChanged() from None
            with pynamodb_errors(write=True):
                raise
