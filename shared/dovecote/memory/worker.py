"""The write queue's consumer: the reference's Submit steps (docs/design/memory.md) for one SQS message, exactly
once in effect over at-least-once delivery. Pure apart from the ports.

1. Flip queued → started (conditional). A cancel that won instead: its evidence
   (`goncho_write_cancelled`) was stored by the cancel; the worker marks the cancellation consumed
   and stores nothing. A write already complete or failed: a redelivery, nothing to do. A write
   still `started`: an earlier delivery stopped half-way; carry on from step 2.
2. Read the scope's memory count and the postings of the write's terms (one consistent read).
3. Detect: pick at most TOP_K prior memories through the postings, read them, run the detector.
   Any error here (reading, detecting, a malformed candidate) becomes
   `goncho_relation_detection_failed` evidence with write_ok true; the write still applies.
4. Apply in one atomic step: the memory at seq = count + 1, the write started → complete with its
   evidence, the postings, the PENDING relations. Conditional on the count and on `started`, so a
   redelivery can neither apply twice nor store candidates twice (relation keys are deterministic).
   If only the relations are refused, the write applies without them (detection-failed evidence).
An error anywhere else raises: the message is retried. On its GIVE_UP_AT-th receive the worker
gives up: it copies the message to the dead-letter queue, marks the write `failed` with
`goncho_write_failed`, and acknowledges it. Moving the poison itself (rather than waiting for SQS's
own redrive) matters in FIFO: the messages behind it in its group are received and skipped with it
each time, so their receive counts climb too, and SQS would sweep them into the DLQ with it. The
queue's RedrivePolicy (REDRIVE_MAX_RECEIVES) stays as the backstop for a worker that cannot run.
A write the store refuses as invalid (`StoreRefused`: AWS's ValidationException) gives up on the first
receive the same way, with AWS's code and reason in the evidence and the log: a retry cannot succeed,
and a redrive after the cause is fixed brings it back.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, replace

from dovecote.memory import model, retrieval
from dovecote.memory.detector import CandidateDetector
from dovecote.memory.ports import (
    Application,
    MemoryQueue,
    MemoryStore,
    RelationsRefused,
    ScopeMoved,
    ScopeView,
    StoreRefused,
    WriteSettled,
)
from dovecote.memory.retrieval import EMPTY, TermStats
from dovecote.platform.clock import Clock, rfc3339, utc_now

GIVE_UP_AT = 3  # receives: the worker's own poison threshold
REDRIVE_MAX_RECEIVES = GIVE_UP_AT + 2  # the queue's RedrivePolicy maxReceiveCount (backstop)
# Candidates per write: the store writes three items per relation in the apply transaction.
MAX_CANDIDATES = retrieval.TOP_K + 1
# Lost races on the scope's memory count before the message is retried instead.
APPLY_ATTEMPTS = 3

log = logging.getLogger("dovecote.memory.worker")


class ScopeBusy(Exception):
    """The scope's memory count kept moving under this write; retry the message."""


@dataclass(eq=False)
class WriteWorker:
    store: MemoryStore
    queue: MemoryQueue
    detector: CandidateDetector | None
    _: KW_ONLY
    clock: Clock = utc_now
    give_up_at: int = GIVE_UP_AT

    def _now(self) -> str:
        return rfc3339(self.clock())

    # ---- one SQS message --------------------------------------------------------------------

    def handle(self, body: str, *, receive_count: int = 1, group_id: str = "") -> str:
        """Process one message; returns what happened. Raises to have the message retried."""
        try:
            message = model.QueueMessage.from_body(body)
        except ValueError as exc:
            # It can never succeed: straight to the dead-letter queue, no retries.
            log.error("unreadable memory write message buried", extra={"reason": str(exc)})
            self.queue.bury(body, group_id, model.digest("dead", body))
            return "buried"
        try:
            return self.process(message)
        except StoreRefused as exc:
            self.give_up(message, body, group_id or message.group_id, exc)  # every retry would be refused
            return "failed"
        except Exception as exc:
            if receive_count < self.give_up_at:
                raise
            self.give_up(message, body, group_id or message.group_id, exc)
            return "failed"

    def give_up(self, message: model.QueueMessage, body: str, group_id: str, exc: BaseException) -> None:
        # The DLQ copy first: a write marked failed whose message is gone could not be redriven.
        self.queue.bury(body, group_id, model.digest("dead", message.deduplication_id))
        facts = model.error_facts(exc)
        evidence = model.Evidence(model.WRITE_FAILED, False, error=facts)
        self.store.fail_write(message.authority, message.id, evidence, self._now())
        extra = {"write": message.id, "code": facts["code"], "error": facts["message"]}
        if isinstance(exc, StoreRefused):
            log.error("memory write refused by the store", extra=extra)
        else:
            log.error("memory write failed after %d receives", self.give_up_at, extra=extra)

    # ---- the reference's Submit steps ------------------------------------------------------------

    def process(self, message: model.QueueMessage) -> str:
        _, write = self.store.start_write(message.authority, message.id, self._now())
        if write is None:
            log.warning("message for an unknown memory write dropped", extra={"write": message.id})
            return "missing"
        if write.status == "cancelled":
            if not write.consumed:
                self.store.consume_cancel(write.authority, write.id)
            return "cancelled"
        if write.status != "started":
            return "duplicate"  # complete or failed: a redelivery
        return self._apply(write)

    def _apply(self, write: model.Write) -> str:
        terms = retrieval.index_terms(write.content, write.tags)
        for _ in range(APPLY_ATTEMPTS):
            view = self.store.scope_view(write.authority, write.scope, terms)
            now = self._now()
            memory = model.Memory(
                write.authority, write.id, write.scope, view.memories + 1, write.content, write.tags, now
            )
            evidence, relations = self._detect(memory, terms, view, now)
            postings = {}
            for term in terms:
                before = view.postings.get(term)
                postings[term] = (before, (before or EMPTY).with_memory(memory.seq))
            application = Application(write, memory, evidence, relations, postings, view.memories)
            try:
                try:
                    self.store.apply(application)
                except RelationsRefused as exc:
                    # The reference: a save error is detection-failed evidence; the write still applies.
                    evidence = model.Evidence(model.RELATION_DETECTION_FAILED, True, error=model.error_facts(exc))
                    self.store.apply(replace(application, evidence=evidence, relations=()))
            except WriteSettled:
                return "duplicate"
            except ScopeMoved:
                continue
            return evidence.code
        raise ScopeBusy(f"the memory count of scope {write.scope!r} kept changing")

    def _detect(
        self, memory: model.Memory, terms: tuple[str, ...], view: ScopeView, now: str
    ) -> tuple[model.Evidence, tuple[model.Relation, ...]]:
        if self.detector is None:
            return model.Evidence(model.WRITE_COMPLETE, True), ()
        try:
            picks = retrieval.pick(terms, view.postings, view.memories)
            prior = self.store.memories_at(memory.authority, memory.scope, [p.seq for p in picks]) if picks else []
            stats = TermStats(view.memories, {t: p.df for t, p in view.postings.items()})
            candidates = self.detector.detect(memory, prior, stats)
            relations = _relations(memory, candidates, prior, now)
        except Exception as exc:  # the reference: detection never fails the write
            log.warning("relation detection failed", extra={"write": memory.id, "error": str(exc)})
            return model.Evidence(model.RELATION_DETECTION_FAILED, True, error=model.error_facts(exc)), ()
        stored = tuple(model.Candidate(r.from_id, r.to_id, r.verb, r.note, r.evidence_ids) for r in relations)
        return model.Evidence(model.WRITE_COMPLETE, True, stored), relations


def _relations(
    memory: model.Memory, candidates: Sequence[model.Candidate], prior: Sequence[model.Memory], now: str
) -> tuple[model.Relation, ...]:
    """Check what a detector returned (it may be third-party code) and make the PENDING relations."""
    if len(candidates) > MAX_CANDIDATES:
        raise ValueError(f"the detector returned {len(candidates)} candidates; at most {MAX_CANDIDATES}")
    by_id = {m.id: m for m in prior}
    relations: dict[str, model.Relation] = {}
    for c in candidates:
        if not isinstance(c, model.Candidate):
            raise TypeError(f"the detector returned {type(c).__name__}, not a Candidate")
        if c.from_id != memory.id or c.to_id not in by_id:
            raise ValueError(f"candidate {c.from_id!r} → {c.to_id!r} is not from the new memory to a prior one")
        if c.verb not in model.VERBS:
            raise ValueError(f"candidate verb {c.verb!r} is not in the vocabulary")
        if c.id in relations:
            raise ValueError(f"duplicate candidate {c.from_id!r} → {c.to_id!r} {c.verb}")
        older = by_id[c.to_id]
        relations[c.id] = model.Relation(
            memory.authority,
            memory.scope,
            c.from_id,
            c.to_id,
            c.verb,
            str(c.note)[:1000],
            tuple(str(e)[:200] for e in c.evidence_ids)[:32],
            memory.seq,
            older.seq,
            now,
        )
    return tuple(relations.values())
