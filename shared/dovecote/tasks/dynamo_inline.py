"""The records a task item holds inline (layout v2 of the tasks table; tasks/dynamo.py has the rest).

Why: a TransactWriteItems costs 2 write units per item per started KB however small the item, and
every command writes its task item anyway. So a command's new event, its lease grant and the place
of its message (sequence, id) go into the task item, and cost nothing more while that item stays in
the kilobytes it takes anyway. The message itself goes into its id's guard item, which the command
writes anyway to keep message ids unique in the authority. The items that remain are the ones a
guarantee needs: the task (revision and fence CAS), the command receipt (command ids are one
namespace per authority: a receipt keyed by the task could not refuse an id another task used), a
guard per message id and per submission id.

The rule (`fit`), applied by every commit that rewrites the task item:
- inline are the latest records of each stream: events `ev` (by sequence), grants `gr` (by fence),
  message places `mi` (by message sequence); every earlier record is in an item of its own;
- the task item may take the kilobytes its fields need without the inline records, and at least
  one (`UNIT`): max(1 KB, its size without them rounded up to a KB). While the item with its inline
  records is larger, the kind that takes the most bytes inline leaves it whole, for one item in the
  same transaction keyed as v1 keyed the last of its records (`E#<seq>`, `G#<fence>`, `M#<seq>`),
  holding them as a list under the task item's name for it;
- so inline records never make a write dearer (the task item's write units are those of its fields,
  at least 2), the records that leave cost one item per kind however many they are (each at most
  the kilobyte they took inline, plus the command's own), and the task item stays under its fields +
  1 KB + the command's new records: its fields are bounded (ids of at most 128 characters, a lease
  end, a submission: a few KB), far from DynamoDB's 400 KB item limit. A message is never inline (a
  message may be 2 MiB, and its parts up to 8 KiB each are in the item that holds it): its guard
  item holds it, up to DynamoDB's limit as the v1 message item did.

Round trips are a command's two (the read, the transaction): the spilled records are items of the
same transaction. The transaction rewrites the task item whole, so it needs the inline records the
command's read saw: `InlineMemory` keeps them by the task's version (revision, fence, owner), which
the transaction's compare-and-swap pins, and which no write changes without changing the inline
records (a heartbeat changes neither; every commit that changes them moves the revision or the
fence, or the owner). So the records remembered for a version are the ones stored at that version,
and a commit against any other stored version fails its CAS. A commit whose version was not read
through this store (none in the service: a command reads first) reads the task item once more.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace

from dovecote.platform.dynamo import attributes, item_bytes, record, value_bytes
from dovecote.tasks.model import Event, Grant, LeaseEnd, Message
from dovecote.tasks.records import InlineEvent, InlineGrant, InlineMessage, TaskItem

# DynamoDB's write unit: the task item keeps its inline records within the kilobytes it needs anyway.
UNIT = 1024


@dataclass(frozen=True, slots=True)
class MessageRef:
    """A message's place in its task: its sequence, its id (its guard item holds it) and the size of
    that item (a page reads up to a byte budget, as a Query page does)."""

    sequence: int
    id: str
    size: int


@dataclass(frozen=True, slots=True)
class Inline:
    """The latest records of a task, held in its item: each stream's tail, oldest first."""

    events: tuple[Event, ...] = ()
    grants: tuple[Grant, ...] = ()
    messages: tuple[MessageRef, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.events or self.grants or self.messages)

    def appended(self, events: tuple[Event, ...], grant: Grant | None, messages: tuple[MessageRef, ...]) -> Inline:
        return Inline(self.events + events, self.grants + ((grant,) if grant else ()), self.messages + messages)

    def kinds(self) -> list[str]:
        return [kind for kind in KINDS if getattr(self, kind)]

    def without(self, kind: str) -> Inline:
        return replace(self, **{kind: ()})  # type: ignore[arg-type]

    def plus(self, other: Inline) -> Inline:
        return Inline(self.events + other.events, self.grants + other.grants, self.messages + other.messages)


KINDS = ("events", "grants", "messages")


# ---- the item attributes ------------------------------------------------------------------------------


def event_attribute(e: Event) -> InlineEvent:
    optional = ("message", "submission", "artifact", "reason")
    return InlineEvent(**attributes(e, keyed=("task",), absent_when_empty=optional))


def lease_end_text(end: LeaseEnd | None) -> str | None:
    return json.dumps(end.to_json(), sort_keys=True, separators=(",", ":")) if end is not None else None


def lease_end(text: str | None) -> LeaseEnd | None:
    return LeaseEnd.from_json(json.loads(text)) if text else None


def grant_attribute(g: Grant) -> InlineGrant:
    return InlineGrant(fence=g.fence, worker=g.worker, granted_at=g.granted_at, previous=lease_end_text(g.previous))


def message_attribute(m: MessageRef) -> InlineMessage:
    return InlineMessage(sequence=m.sequence, id=m.id, size=m.size)


def set_inline(item: TaskItem, inline: Inline) -> TaskItem:
    """`item` holding `inline` (each list absent when empty)."""
    item.events = [event_attribute(e) for e in inline.events] or None
    item.grants = [grant_attribute(g) for g in inline.grants] or None
    item.message_refs = [message_attribute(m) for m in inline.messages] or None
    return item


def events_of(task_id: str, stored: list[InlineEvent] | None) -> tuple[Event, ...]:
    return tuple(record(Event, e, numbers=("sequence", "revision"), task=task_id) for e in stored or ())


def grants_of(task_id: str, stored: list[InlineGrant] | None) -> tuple[Grant, ...]:
    return tuple(
        Grant(task_id, g.worker, int(g.fence), g.granted_at, previous=lease_end(g.previous)) for g in stored or ()
    )


def refs_of(stored: list[InlineMessage] | None) -> tuple[MessageRef, ...]:
    return tuple(MessageRef(int(m.sequence), m.id, int(m.size)) for m in stored or ())


def inline_of(item: TaskItem) -> Inline:
    """The inline records of a task item (none in a v1 item)."""
    return Inline(events_of(item.id, item.events), grants_of(item.id, item.grants), refs_of(item.message_refs))


def message_ref(message: Message, guard_bytes: int) -> MessageRef:
    return MessageRef(message.sequence, message.id, guard_bytes)


# ---- the rule -------------------------------------------------------------------------------------------


def allowance(fields_bytes: int) -> int:
    """The size the task item may take with its inline records: the kilobytes its fields need, at
    least one."""
    return max(UNIT, math.ceil(fields_bytes / UNIT) * UNIT)


INLINE_NAMES = {"events": "ev", "grants": "gr", "messages": "mi"}  # TaskItem's attribute per kind


def fit(build: Callable[[Inline], TaskItem], inline: Inline) -> tuple[TaskItem, Inline]:
    """The task item holding as many of `inline`'s records as the rule allows, and the records that
    leave it (whole kinds, each for one item of its own). The item is built and measured once, and
    built again only if a kind left it."""
    item = build(inline)
    raw = item.serialize()
    kinds = {kind: len(name) + value_bytes(raw[name]) for kind, name in INLINE_NAMES.items() if name in raw}
    size = item_bytes(raw)
    limit = allowance(size - sum(kinds.values()))
    spilled = Inline()
    while kinds and size > limit:
        kind = max(kinds, key=lambda k: kinds[k])  # the kind taking the most bytes inline
        size -= kinds.pop(kind)
        spilled = spilled.plus(Inline(**{kind: getattr(inline, kind)}))
        inline = inline.without(kind)
    return (build(inline) if spilled else item), spilled


# ---- the records a command's read saw ----------------------------------------------------------------

Version = tuple[str, str, int, int, str]  # (authority, task, revision, fence, owner)


class InlineMemory:
    """The inline records of the task items this store read lately, by version (see the module
    docstring): what a commit rewrites the task item with. Bounded; thread-safe."""

    def __init__(self, capacity: int = 512) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._seen: OrderedDict[Version, Inline] = OrderedDict()

    def remember(self, version: Version, inline: Inline) -> None:
        with self._lock:
            self._seen[version] = inline
            self._seen.move_to_end(version)
            while len(self._seen) > self.capacity:
                self._seen.popitem(last=False)

    def recall(self, version: Version) -> Inline | None:
        with self._lock:
            return self._seen.get(version)
