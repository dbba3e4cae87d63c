"""The memory ports: what every backend promises. tests/integration/test_memory_conformance.py holds
the in-memory fakes (memory/fakes.py) and the AWS adapters (memory/dynamo.py, memory/queue.py) to
the same cases.

MemoryStore
- Everything is keyed by authority: another authority's write, memory or relation does not exist.
- Write items change only through conditional flips, each atomic and each answering whether it
  won: `create_write` (absent → queued), `start_write` (queued → started), `cancel_write`
  (queued → cancelled), `fail_write` (queued|started → failed), `redrive_write` (failed → queued,
  or a new generation of a queued/started write). Exactly one of two racing flips wins.
- `apply` is atomic: the scope's memory count, the memory at seq = count + 1, the write
  (started → complete with its evidence), the term postings and the relations with their list
  views become visible together or not at all. A write applies at most once: the flip to
  complete is conditional on `started`, so a redelivered message cannot apply it again.
- Reads are strongly consistent; lists are keyset-paged: memories by seq (applied order),
  relations by (from seq, relation id).
- `commit_judgment` stores the receipt and the judged relation together, conditional on the
  receipt being new and the relation still pending.
- A request the backend refuses as invalid (DynamoDB's ValidationException: a key over
  MAX_KEY_BYTES, an item too large, ...) raises `StoreRefused` from `scope_view` and `apply` and
  changes nothing. The same request can never succeed: the worker fails the write at once.

MemoryQueue (the producer side of SQS FIFO; Lambda does the receiving)
- `send` is at-least-once; messages of one (authority, scope) keep their send order; a message
  with the deduplication id of one sent in the last five minutes is dropped.
- `bury` puts a message the worker gave up on into the dead-letter queue.
- `dead_letters` receives up to `limit` of them (hidden until deleted or released).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from dovecote.memory.model import Evidence, Memory, QueueMessage, Receipt, Relation, Write
from dovecote.memory.retrieval import Posting

# DynamoDB's limit on a partition key value (the fakes refuse what DynamoDB would).
MAX_KEY_BYTES = 2048


class StoreRefused(Exception):
    """The backend refused the request as invalid; retrying the same request cannot succeed.
    `code` is the backend's own (`ValidationException`), the message its reason."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class WriteSettled(Exception):
    """`apply` found the write no longer `started`: another delivery completed it, or it failed."""


class ScopeMoved(Exception):
    """`apply` found the scope's memory count changed since it was read (a concurrent delivery of
    the same write committed first)."""


class RelationsRefused(Exception):
    """`apply` could not store the relations (the write itself could be applied without them)."""


class ReceiptTaken(Exception):
    pass


class RelationChanged(Exception):
    """The relation is no longer what the judgment was decided on."""


@dataclass(frozen=True, slots=True)
class ScopeView:
    """One consistent read: the scope's memory count and the postings of the terms asked for
    (absent terms are left out)."""

    memories: int
    postings: dict[str, Posting] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Application:
    write: Write  # as read while started
    memory: Memory  # memory.seq == expected_memories + 1
    evidence: Evidence
    relations: tuple[Relation, ...]
    # term → (posting as read, or None when absent; posting to store)
    postings: dict[str, tuple[Posting | None, Posting]]
    expected_memories: int


@dataclass(frozen=True, slots=True)
class DeadLetter:
    body: str
    handle: str
    group_id: str
    message: QueueMessage | None  # None: a body this service cannot read


class MemoryStore(Protocol):
    # ---- submit, status, cancel --------------------------------------------------------------
    def create_write(self, write: Write) -> Write | None:
        """Insert the queued write if its id is free; else return the stored write."""
        ...

    def mark_sent(self, authority: str, write_id: str) -> None: ...

    def get_write(self, authority: str, write_id: str) -> Write | None: ...

    def cancel_write(self, authority: str, write_id: str, evidence: Evidence, now: str) -> tuple[bool, Write | None]:
        """queued → cancelled with the evidence; (won, the write as it is now)."""
        ...

    # ---- the worker --------------------------------------------------------------------------
    def start_write(self, authority: str, write_id: str, now: str) -> tuple[bool, Write | None]:
        """queued → started; (won, the write as it is now)."""
        ...

    def consume_cancel(self, authority: str, write_id: str) -> None:
        """Mark a cancelled write as seen by the worker (idempotent)."""
        ...

    def scope_view(self, authority: str, scope: str, terms: tuple[str, ...]) -> ScopeView: ...

    def memories_at(self, authority: str, scope: str, seqs: list[int]) -> list[Memory]:
        """The memories at these seqs, in the order asked (missing ones left out)."""
        ...

    def apply(self, application: Application) -> None: ...

    def fail_write(self, authority: str, write_id: str, evidence: Evidence, now: str) -> bool:
        """queued|started → failed with the evidence; whether it won."""
        ...

    def redrive_write(self, authority: str, write_id: str, now: str) -> Write | None:
        """failed → queued (evidence cleared), and a queued or started write: the next generation,
        not sent. Settled writes are left alone. Returns the write as it is now."""
        ...

    # ---- reads -------------------------------------------------------------------------------
    def memories(self, authority: str, scope: str, after: int, limit: int) -> list[Memory]: ...

    def relations(self, authority: str, scope: str, status: str, after: str, limit: int) -> list[Relation]:
        """`status` '' means every status."""
        ...

    # ---- judgments ---------------------------------------------------------------------------
    def read_judgment(
        self, authority: str, command_id: str, relation_id: str
    ) -> tuple[Receipt | None, Relation | None]: ...

    def commit_judgment(self, receipt: Receipt, before: Relation, after: Relation) -> None: ...


class MemoryQueue(Protocol):
    def send(self, message: QueueMessage) -> None: ...

    def bury(self, body: str, group_id: str, deduplication_id: str) -> None: ...

    def dead_letters(self, limit: int) -> list[DeadLetter]: ...

    def delete_dead_letter(self, letter: DeadLetter) -> None: ...

    def release_dead_letter(self, letter: DeadLetter) -> None: ...
