"""In-memory fakes of the memory ports, held to the same conformance suite as the AWS adapters
(tests/integration/test_memory_conformance.py). Named `fakes` because `memory` is the context.

InMemoryMemoryStore checks every condition first, then changes everything, under one lock: each
flip and `apply` is atomic, as the DynamoDB adapter's conditional writes and transactions are.

InMemoryMemoryQueue models SQS FIFO as Lambda consumes it: `drain` delivers rounds (batches) in
send order, a failing message keeps the rest of its group back for the round (Powertools
`skip_group_on_error`), every message delivered or skipped in a round counts a receive, and a
message received REDRIVE_MAX_RECEIVES times is moved to the dead-letter list on the next round.
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from dovecote.memory import machine, ports
from dovecote.memory.dynamo import posting_key
from dovecote.memory.model import Evidence, Memory, QueueMessage, Receipt, Relation, Write
from dovecote.memory.retrieval import Posting
from dovecote.memory.worker import REDRIVE_MAX_RECEIVES


class InMemoryMemoryStore:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.writes: dict[tuple[str, str], Write] = {}
        self.heads: dict[tuple[str, str], int] = defaultdict(int)
        self.memories_by_scope: dict[tuple[str, str], dict[int, Memory]] = defaultdict(dict)
        self.postings: dict[tuple[str, str, str], Posting] = {}
        self.relations_by_id: dict[tuple[str, str], Relation] = {}
        self.receipts: dict[tuple[str, str], Receipt] = {}

    # ---- writes -----------------------------------------------------------------------------

    def create_write(self, write: Write) -> Write | None:
        with self._lock:
            existing = self.writes.get((write.authority, write.id))
            if existing is not None:
                return existing
            self.writes[(write.authority, write.id)] = write
            return None

    def mark_sent(self, authority: str, write_id: str) -> None:
        with self._lock:
            write = self.writes.get((authority, write_id))
            if write is not None and write.status in ("queued", "started"):
                self.writes[(authority, write_id)] = replace(write, sent=True)

    def get_write(self, authority: str, write_id: str) -> Write | None:
        with self._lock:
            return self.writes.get((authority, write_id))

    def _flip(self, authority: str, write_id: str, kind: str, **changes: Any) -> tuple[bool, Write | None]:
        with self._lock:
            write = self.writes.get((authority, write_id))
            if write is None or write.status not in machine.allowed_from(kind):
                return False, write
            after = replace(write, status=machine.TRANSITIONS[kind].to, **changes)
            self.writes[(authority, write_id)] = after
            return True, after

    def cancel_write(self, authority: str, write_id: str, evidence: Evidence, now: str) -> tuple[bool, Write | None]:
        return self._flip(authority, write_id, "cancel", evidence=evidence, updated_at=now)

    def start_write(self, authority: str, write_id: str, now: str) -> tuple[bool, Write | None]:
        return self._flip(authority, write_id, "start", updated_at=now)

    def consume_cancel(self, authority: str, write_id: str) -> None:
        with self._lock:
            write = self.writes.get((authority, write_id))
            if write is not None and write.status == "cancelled":
                self.writes[(authority, write_id)] = replace(write, consumed=True)

    def fail_write(self, authority: str, write_id: str, evidence: Evidence, now: str) -> bool:
        return self._flip(authority, write_id, "fail", evidence=evidence, updated_at=now)[0]

    def redrive_write(self, authority: str, write_id: str, now: str) -> Write | None:
        with self._lock:
            write = self.writes.get((authority, write_id))
            if write is None or write.status not in ("failed", "queued", "started"):
                return write
            status = machine.next_status("requeue", write.status) or write.status
            after = replace(
                write,
                status=status,
                generation=write.generation + 1,
                sent=False,
                evidence=None if status == "queued" else write.evidence,
                updated_at=now,
            )
            self.writes[(authority, write_id)] = after
            return after

    # ---- the worker --------------------------------------------------------------------------

    def scope_view(self, authority: str, scope: str, terms: tuple[str, ...]) -> ports.ScopeView:
        with self._lock:
            found = {t: self.postings[(authority, scope, t)] for t in terms if (authority, scope, t) in self.postings}
            return ports.ScopeView(self.heads[(authority, scope)], found)

    def memories_at(self, authority: str, scope: str, seqs: list[int]) -> list[Memory]:
        with self._lock:
            memories = self.memories_by_scope[(authority, scope)]
            return [memories[s] for s in seqs if s in memories]

    def apply(self, application: ports.Application) -> None:
        write, memory = application.write, application.memory
        a, scope = write.authority, write.scope
        with self._lock:
            for term in application.postings:
                # What DynamoDB refuses before looking at any condition: a key over its limit.
                if len(posting_key(a, scope, term).encode("utf-8")) > ports.MAX_KEY_BYTES:
                    raise ports.StoreRefused(
                        "ValidationException", f"a posting key is over {ports.MAX_KEY_BYTES} bytes"
                    )
            current = self.writes.get((a, write.id))
            if current is None or current.status != "started":
                raise ports.WriteSettled()
            if (
                self.heads[(a, scope)] != application.expected_memories
                or memory.seq != application.expected_memories + 1
            ):
                raise ports.ScopeMoved()
            for term, (before, _) in application.postings.items():
                stored = self.postings.get((a, scope, term))
                if (stored.df if stored else None) != (before.df if before else None):
                    raise ports.ScopeMoved()
            if any((a, r.id) in self.relations_by_id for r in application.relations):
                raise ports.RelationsRefused("a relation with this id already exists")
            # every condition holds: change everything
            self.heads[(a, scope)] = memory.seq
            self.memories_by_scope[(a, scope)][memory.seq] = memory
            self.writes[(a, write.id)] = replace(
                current,
                status="complete",
                evidence=application.evidence,
                seq=memory.seq,
                updated_at=memory.applied_at,
            )
            for term, (_, after) in application.postings.items():
                self.postings[(a, scope, term)] = after
            for relation in application.relations:
                self.relations_by_id[(a, relation.id)] = relation

    def bulk_load(self, authority: str, scope: str, memories: list[Memory]) -> None:
        """Load applied memories into an empty scope at once (benchmarks, imports). Not a port
        method: no writes, no evidence, no relations."""
        from dovecote.memory.retrieval import build_postings

        with self._lock:
            if self.heads[(authority, scope)]:
                raise ValueError("bulk_load needs an empty scope")
            for m in memories:
                self.memories_by_scope[(authority, scope)][m.seq] = m
            self.heads[(authority, scope)] = max((m.seq for m in memories), default=0)
            for term, posting in build_postings([(m.seq, m.content, m.tags) for m in memories]).items():
                self.postings[(authority, scope, term)] = posting

    # ---- reads -------------------------------------------------------------------------------

    def memories(self, authority: str, scope: str, after: int, limit: int) -> list[Memory]:
        with self._lock:
            memories = self.memories_by_scope.get((authority, scope), {})
            return [memories[s] for s in sorted(memories) if s > after][:limit]

    def relations(self, authority: str, scope: str, status: str, after: str, limit: int) -> list[Relation]:
        with self._lock:
            found = [
                r
                for (a, _), r in self.relations_by_id.items()
                if a == authority and r.scope == scope and (not status or r.status == status) and r.position > after
            ]
        return sorted(found, key=lambda r: r.position)[:limit]

    # ---- judgments ---------------------------------------------------------------------------

    def read_judgment(
        self, authority: str, command_id: str, relation_id: str
    ) -> tuple[Receipt | None, Relation | None]:
        with self._lock:
            return self.receipts.get((authority, command_id)), self.relations_by_id.get((authority, relation_id))

    def commit_judgment(self, receipt: Receipt, before: Relation, after: Relation) -> None:
        with self._lock:
            if (receipt.authority, receipt.id) in self.receipts:
                raise ports.ReceiptTaken()
            current = self.relations_by_id.get((before.authority, before.id))
            if current is None or current.status != "pending":
                raise ports.RelationChanged()
            self.receipts[(receipt.authority, receipt.id)] = receipt
            self.relations_by_id[(after.authority, after.id)] = after


@dataclass
class _Message:
    id: str
    body: str
    group_id: str
    deduplication_id: str
    receives: int = 0
    held: bool = False


class InMemoryMemoryQueue:
    def __init__(self, max_receives: int = REDRIVE_MAX_RECEIVES) -> None:
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._max_receives = max_receives
        self.messages: list[_Message] = []
        self.dead: list[_Message] = []
        self._seen: set[str] = set()  # deduplication ids (SQS keeps them five minutes; the fake, forever)
        self._dead_seen: set[str] = set()
        self.sent = 0

    def send(self, message: QueueMessage) -> None:
        with self._lock:
            self.sent += 1
            if message.deduplication_id in self._seen:
                return
            self._seen.add(message.deduplication_id)
            self.messages.append(
                _Message(str(next(self._ids)), message.to_body(), message.group_id, message.deduplication_id)
            )

    def bury(self, body: str, group_id: str, deduplication_id: str) -> None:
        with self._lock:
            if deduplication_id in self._dead_seen:
                return
            self._dead_seen.add(deduplication_id)
            self.dead.append(_Message(str(next(self._ids)), body, group_id, deduplication_id))

    def dead_letters(self, limit: int) -> list[ports.DeadLetter]:
        with self._lock:
            out: list[ports.DeadLetter] = []
            for m in self.dead:
                if len(out) >= limit:
                    break
                if m.held:
                    continue
                m.held = True
                try:
                    message: QueueMessage | None = QueueMessage.from_body(m.body)
                except ValueError:
                    message = None
                out.append(ports.DeadLetter(m.body, m.id, m.group_id, message))
            return out

    def delete_dead_letter(self, letter: ports.DeadLetter) -> None:
        with self._lock:
            self.dead = [m for m in self.dead if m.id != letter.handle]

    def release_dead_letter(self, letter: ports.DeadLetter) -> None:
        with self._lock:
            for m in self.dead:
                if m.id == letter.handle:
                    m.held = False

    # ---- the consumer side (Lambda's part) -----------------------------------------------------

    def deliver_round(self, consume: Callable[..., Any]) -> int:
        """One batch of every visible message, in send order. Returns how many were acknowledged."""
        with self._lock:
            for m in [m for m in self.messages if m.receives >= self._max_receives]:
                self.messages.remove(m)  # SQS's own redrive on the next receive
                self.dead.append(m)
            batch = list(self.messages)
        failed_groups: set[str] = set()
        done = []
        for m in batch:
            m.receives += 1
            if m.group_id in failed_groups:
                continue
            try:
                consume(m.body, receive_count=m.receives, group_id=m.group_id)
            except Exception:  # noqa: BLE001 - a failed message stays, like an SQS partial failure
                failed_groups.add(m.group_id)
                continue
            done.append(m)
        with self._lock:
            self.messages = [m for m in self.messages if m not in done]
        return len(done)

    def drain(self, consume: Callable[..., Any], max_rounds: int = 50) -> int:
        """Deliver rounds until the queue is empty (or `max_rounds`); returns messages acknowledged."""
        total = 0
        for _ in range(max_rounds):
            if not self.messages:
                break
            total += self.deliver_round(consume)
        return total
