"""Memory commands on the API side: submit, status (long poll), cancel, the two lists, judgment and
redrive. Pure apart from the MemoryStore and MemoryQueue ports; the worker's side (the reference's
Submit steps) is memory/worker.py.

Submit is "record, then send": a conditional insert of the write as `queued`, then one SQS FIFO
message, then a best-effort `sent` mark. A send that fails after the insert loses nothing: the
write stays `queued` and unsent, and an exact resubmit or any status read sends it again (SQS
drops the copy if the first send did land, by its deduplication id; the worker's conditional flip
drops any later copy). A write that was never sent is applied in the order of its successful send.

A different write under a taken id is `idempotency_conflict` (409): the write id is the submit's
idempotency key, exactly what that code means for task command ids, so clients branch on one code.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import replace

from dovecote.memory import machine
from dovecote.memory.model import (
    RELATION_STATUSES,
    WRITE_CANCELLED,
    Cancellation,
    Evidence,
    Judgment,
    JudgmentInput,
    Memory,
    QueueMessage,
    Receipt,
    Redriven,
    Relation,
    Submitted,
    Write,
    WriteInput,
    check_id,
    check_scope,
    check_wait,
    gate_judgment,
    gate_write,
    intent_digest,
    page_limit,
)
from dovecote.memory.ports import MemoryQueue, MemoryStore, ReceiptTaken, RelationChanged
from dovecote.platform.clock import Clock, rfc3339, utc_now
from dovecote.platform.cursors import CursorSigner, LazySigner
from dovecote.platform.errors import (
    DomainError,
    IdempotencyConflict,
    InvalidArgument,
    JudgmentConflict,
    NotFound,
)
from dovecote.platform.paging import Page
from dovecote.platform.principal import Principal
from dovecote.platform.redrive import redrive_size

RELATION_ID = re.compile(r"r-[0-9a-f]{32}")
# Status long polls re-read with this backoff (seconds), so a 20 s wait costs at most ~25 reads.
POLL_FIRST, POLL_MAX = 0.05, 1.0
JUDGE = "judge_relation"


class MemoryService:
    def __init__(
        self,
        store: MemoryStore,
        queue: MemoryQueue,
        signer: CursorSigner | None = None,
        *,
        clock: Clock = utc_now,
        signer_factory: Callable[[], CursorSigner] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._queue = queue
        self._signers = LazySigner(signer, signer_factory)
        self._clock = clock
        self._sleep = sleep
        self._monotonic = monotonic

    def _now(self) -> str:
        return rfc3339(self._clock())

    # ---- submit -----------------------------------------------------------------------------

    def submit(self, principal: Principal, write_input: WriteInput) -> Submitted:
        principal.require("caller", "worker")
        given = gate_write(write_input)
        now = self._now()
        write = Write(
            principal.authority,
            given.id,
            given.scope,
            given.content,
            given.tags,
            given.digest,
            "queued",
            now,
            now,
        )
        existing = self._store.create_write(write)
        if existing is not None:
            if existing.digest != given.digest:
                raise IdempotencyConflict(
                    "this write id was already used for a different write", id=given.id, scope=existing.scope
                )
            self._ensure_sent(existing)
        else:
            self._send(write)
        return Submitted(given.id, given.scope)

    def _send(self, write: Write) -> None:
        self._queue.send(QueueMessage(write.authority, write.id, write.scope, write.generation))
        try:
            self._store.mark_sent(write.authority, write.id)
        except DomainError:
            pass  # the message is on its way; at worst a status read sends a copy SQS or the worker drops

    def _ensure_sent(self, write: Write) -> None:
        if write.status == "queued" and not write.sent:
            self._send(write)

    # ---- status, cancel ---------------------------------------------------------------------

    def _write(self, principal: Principal, write_id: str) -> Write:
        write = self._store.get_write(principal.authority, write_id)
        if write is None:
            raise NotFound("memory write not found", id=write_id)
        return write

    def status(self, principal: Principal, write_id: str, wait: int | None = None) -> Write:
        """The write's status and evidence; with `wait`, re-read (with backoff) until the write
        settles or `wait` seconds pass."""
        principal.require("caller", "worker")
        check_id(write_id)
        seconds = check_wait(wait)
        deadline = self._monotonic() + seconds
        write = self._write(principal, write_id)
        self._ensure_sent(write)
        delay = POLL_FIRST
        while not machine.is_settled(write.status):
            left = deadline - self._monotonic()
            if left <= 0:
                break
            self._sleep(min(delay, left))
            delay = min(delay * 2, POLL_MAX)
            write = self._write(principal, write_id)
        return write

    def cancel(self, principal: Principal, write_id: str) -> Cancellation:
        """The reference's Cancel: true if this cancel won the race with the worker's start, or the
        write is already cancelled and the worker has not consumed it yet; false once it started,
        finished, or its cancellation was consumed. An empty or malformed id is invalid_argument
        (docs/clients/http.md#errors: bad input is a 4xx); an unknown id is not_found."""
        principal.require("caller", "worker")
        check_id(write_id)
        evidence = Evidence(WRITE_CANCELLED, False)
        won, write = self._store.cancel_write(principal.authority, write_id, evidence, self._now())
        if write is None:
            raise NotFound("memory write not found", id=write_id)
        cancelled = won or (write.status == "cancelled" and not write.consumed)
        return Cancellation(write_id, cancelled)

    # ---- lists ------------------------------------------------------------------------------

    def list_memories(self, principal: Principal, scope: str, limit: int | None, cursor: str | None) -> Page[Memory]:
        principal.require("caller", "worker")
        check_scope(scope)
        size = page_limit(limit)
        filter_key = "memories:" + scope
        after = self._open(principal, cursor, filter_key)
        try:
            after_seq = int(after or "0")
        except ValueError:
            raise InvalidArgument("cursor is malformed", field="cursor") from None
        items = self._store.memories(principal.authority, scope, after_seq, size + 1)
        more = len(items) > size
        items = items[:size]
        return Page(tuple(items), self._seal(principal, filter_key, str(items[-1].seq)) if more and items else None)

    def list_relations(
        self, principal: Principal, scope: str, status: str, limit: int | None, cursor: str | None
    ) -> Page[Relation]:
        principal.require("caller", "worker")
        check_scope(scope)
        if status and status not in RELATION_STATUSES:
            raise InvalidArgument(f"status must be one of {', '.join(RELATION_STATUSES)}", field="status")
        size = page_limit(limit)
        filter_key = f"relations:{scope}:{status}"
        after = self._open(principal, cursor, filter_key) or ""
        items = self._store.relations(principal.authority, scope, status, after, size + 1)
        more = len(items) > size
        items = items[:size]
        return Page(tuple(items), self._seal(principal, filter_key, items[-1].position) if more and items else None)

    def _open(self, principal: Principal, cursor: str | None, filter_key: str) -> str | None:
        if not cursor:
            return None
        position = self._signers.get().open(cursor, authority=principal.authority, scope=filter_key).get("after")
        if not isinstance(position, str):
            raise InvalidArgument("cursor is malformed", field="cursor")
        return position

    def _seal(self, principal: Principal, filter_key: str, after: str) -> str:
        return self._signers.get().seal(authority=principal.authority, scope=filter_key, position={"after": after})

    # ---- judgment ---------------------------------------------------------------------------

    def judge(self, principal: Principal, relation_id: str, judgment: JudgmentInput) -> Relation:
        """Confirm or dismiss a pending candidate: the relation as judged. One receipt per command
        id: the exact retry answers the same; any other judgment of a judged relation is
        judgment_conflict."""
        principal.require("caller", "worker")
        if not isinstance(relation_id, str) or not RELATION_ID.fullmatch(relation_id):
            raise InvalidArgument(f"relation id must match {RELATION_ID.pattern}", field="id")
        given = gate_judgment(judgment)
        command = {"relation": relation_id, "decision": given.decision, "note": given.note}
        digest = intent_digest(JUDGE, command)
        for _ in range(3):
            receipt, relation = self._store.read_judgment(principal.authority, given.command_id, relation_id)
            if receipt is not None:
                if receipt.kind != JUDGE or receipt.digest != digest:
                    raise IdempotencyConflict(
                        "this command id was already used for a different command", command_id=given.command_id
                    )
                if relation is not None:
                    # This command judged it, and a judged relation never changes again (the commit
                    # is conditional on `pending`; relations are never deleted): the first answer.
                    return relation
            if relation is None:
                raise NotFound("relation not found", id=relation_id)
            if relation.status != "pending":
                previous = relation.judgment.decision if relation.judgment else relation.status
                raise JudgmentConflict(
                    f"the relation was already judged: {previous}", id=relation_id, status=relation.status
                )
            judged = replace(
                relation,
                status=given.decision,
                judgment=Judgment(given.decision, given.note, self._now(), given.command_id),
            )
            # The receipt keeps the answer as JSON too, as before: a function version that replays from
            # it may still be running during a deploy.
            result = {"relation": judged.to_json()}
            try:
                self._store.commit_judgment(
                    Receipt(principal.authority, given.command_id, JUDGE, digest, result=result), relation, judged
                )
            except (ReceiptTaken, RelationChanged):
                continue  # re-read: replay the winner's receipt, or report the judgment that won
            return judged
        raise JudgmentConflict("the relation kept changing; read it and retry", id=relation_id)

    # ---- redrive ----------------------------------------------------------------------------

    def redrive(self, principal: Principal, limit: int | None = None) -> Redriven:
        """Move this authority's dead letters back to the queue (admin). A failed write goes back
        to `queued` with a new generation, so its message is not dropped as a duplicate of the
        first send. Other authorities' letters are left in the dead-letter queue."""
        principal.require("admin")
        size = redrive_size(limit)
        moved: list[str] = []
        others = []
        for letter in self._queue.dead_letters(size):
            message = letter.message
            if message is None or message.authority != principal.authority:
                others.append(letter)
                continue
            write = self._store.redrive_write(principal.authority, message.id, self._now())
            if write is not None and write.status in ("queued", "started") and not write.sent:
                self._send(write)
            self._queue.delete_dead_letter(letter)
            moved.append(message.id)
        for letter in others:
            self._queue.release_dead_letter(letter)
        return Redriven(len(moved), tuple(moved))
