"""The reads of the DynamoDB TaskStore beyond a command's own read: the message, event and grant
streams, one message by id, a grant, a head, an apply receipt, and the index lists (claimable,
expiring, by context, by authority with its bounded count, a worker's leases), each one Query per
page (PynamoDB's iterator would page on by itself: see one_page).

A stream's latest records are inline in the task item, the earlier ones in items of their own
(tasks/dynamo_inline.py). So a page of events or grants is the task item (as the service's read of
the task just saw it, else one strongly consistent GetItem), and a Query of the items of their own
only for a page that starts before the inline tail. A page of messages is that, then one
BatchGetItem (eventually consistent: see _guards) of the messages' id guards, which hold them,
taking guards up to MESSAGE_READ_BYTES as a Query page stops at 1 MB; a v1 message (its own item)
comes with the Query. One message by id is one GetItem of its guard (a v1 guard names the message
item: a second GetItem)"""

from __future__ import annotations

from typing import Any

from dovecote.platform.dynamo import one_page, pynamodb_errors
from dovecote.platform.errors import CorruptStore
from dovecote.tasks.dynamo_inline import Inline, MessageRef, inline_of
from dovecote.tasks.dynamo_items import TaskItems, apply_pk, get_item, head_pk, message_id_pk, task_pk
from dovecote.tasks.model import TOTAL_SIZE_CAP, ApplyReceipt, Event, Grant, Message, Task, WorkspaceHead
from dovecote.tasks.ports import LeasePage, TaskFilter, TaskPage
from dovecote.tasks.records import MessageItem
from dovecote.tasks.storage import claim_key, invert

# A page of messages reads id guards up to this many bytes (at least one): as a Query page stops at
# 1 MB. (The page's answer is bounded apart, at MESSAGE_PAGE_BYTES of parts, by the service.)
MESSAGE_READ_BYTES = 1024 * 1024

# A task item as a read just saw it: the task and its inline records.
Seen = tuple[Task, Inline]


class TaskQueries:
    """The store's reads beyond a command's own, over the table's item mapping."""

    def __init__(self, items: TaskItems) -> None:
        self.items = items

    def _task(self, authority: str, task_id: str) -> tuple[Task, Inline] | None:
        with pynamodb_errors(write=False):
            item = get_item(self.items.tasks, task_pk(authority, task_id), "T")
        return (self.items.task(item), inline_of(item)) if item is not None else None

    def message(self, authority: str, task_id: str, message_id: str) -> Message | None:
        """One GetItem: the id's guard, which names the task and holds the message (v2); a v1
        guard's message is its task's M# item (a second GetItem). Read eventually consistent first
        (half the price): a guard is written once, with its message, so a stale read can only miss
        it, and a miss or a guard of another task is read again strongly before it is an answer."""
        pk = message_id_pk(authority, message_id)
        with pynamodb_errors(write=False):
            guard = get_item(self.items.claims, pk, "-", consistent=False)
            if guard is None or guard.task != task_id:
                guard = get_item(self.items.claims, pk, "-")
            if guard is None or guard.task != task_id or guard.sequence is None:
                return None
            sequence = int(guard.sequence)
            if guard.parts is not None:
                return self.items.message(authority, task_id, message_id, sequence, guard)
            item = get_item(self.items.messages, task_pk(authority, task_id), f"M#{sequence:020d}")
        if item is None or item.parts is None:
            return None
        return self.items.message(authority, task_id, message_id, sequence, item)

    def grant(self, authority: str, task_id: str, fence: int) -> Grant | None:
        page = self._records(authority, task_id, "grants", fence - 1, 1, None)
        return page[0] if page and page[0].fence == fence else None

    def grant_history(
        self, authority: str, task_id: str, after: int, limit: int, seen: Seen | None = None
    ) -> list[Grant]:
        return self._records(authority, task_id, "grants", after, limit, seen)

    def head(self, authority: str, workspace: str) -> WorkspaceHead | None:
        (item,) = self.items.get_many([(self.items.heads, head_pk(authority, workspace), "-")])
        return self.items.head(item) if item is not None else None

    def apply_receipt(self, authority: str, workspace: str, artifact: str) -> ApplyReceipt | None:
        (item,) = self.items.get_many([(self.items.apply_receipts, apply_pk(authority, workspace, artifact), "-")])
        return self.items.apply_receipt(authority, workspace, artifact, item) if item is not None else None

    # ---- streams ---------------------------------------------------------------------------------

    def _stream(
        self, model: Any, authority: str, task_id: str, prefix: str, after: int, last: int, limit: int
    ) -> tuple[list[Any], bool]:
        """The stream's items of their own holding records after `after`, up to `last` (the ones
        before the inline tail), and whether the Query stopped before `last`: one Query, none when
        the page starts in the tail. An item is keyed by the last record it holds, so the first one
        may hold records at or before `after` too; each holds at least one, so `limit` items hold
        at least `limit` records."""
        if after >= last:
            return [], False
        results = model.query(
            task_pk(authority, task_id),
            model.sk.between(f"{prefix}#{after + 1:020d}", f"{prefix}#{last:020d}"),
            consistent_read=True,
            page_size=limit,
        )
        with pynamodb_errors(write=False):
            items, more = one_page(model, results)
        return items, more is not None

    @staticmethod
    def _tail(
        own: list[Any], more: bool, inline: tuple[Any, ...], number: Any, after: int, last: int, limit: int
    ) -> list[Any]:
        """A page: the records of their own after `after`, then the inline ones."""
        own = [r for r in own if number(r) > after]
        if more and len(own) < limit:
            return own  # the Query stopped short (its 1 MB): the next page goes on from there
        start = max(after, last)
        return (own + [r for r in inline if number(r) > start])[:limit]

    def _records(
        self, authority: str, task_id: str, stream: str, after: int, limit: int, seen: Seen | None
    ) -> list[Any]:
        """Up to `limit` records of a stream after `after`: the task item (its inline tail, as
        `seen` if given, else read), then the items of their own when the page starts before the
        tail. Messages come as their places: a v1 message item, or a reference to the guard that
        holds the message."""
        found = seen or self._task(authority, task_id)
        if found is None:
            return []
        task, inline = found
        tail = getattr(inline, stream)
        items: Any = self.items
        model, prefix, count, unpack, number = {
            "events": (items.events, "E", task.event_count, items.events_in, _sequence),
            "grants": (items.grants, "G", task.fence, items.grants_in, lambda g: g.fence),
            "messages": (items.messages, "M", task.message_count, lambda _, i: items.places_in(i), _sequence),
        }[stream]
        last = count - len(tail)
        own, more = self._stream(model, authority, task_id, prefix, after, last, limit)
        records = [r for i in own for r in unpack(task_id, i)]
        return self._tail(records, more, tail, number, after, last, limit)

    def messages(self, authority: str, task_id: str, after: int, limit: int, seen: Seen | None = None) -> list[Message]:
        places = self._records(authority, task_id, "messages", after, limit, seen)
        budget, wanted = MESSAGE_READ_BYTES, list[MessageRef]()
        for place in places:
            if isinstance(place, MessageRef):
                if wanted and place.size > budget:
                    break  # a short page: the next one goes on from here
                budget -= place.size
                wanted.append(place)
        guards = self._guards(authority, task_id, wanted)
        page = []
        for place in places:
            if not isinstance(place, MessageRef):
                page.append(self.items.message(authority, task_id, place.id, int(place.sk[2:]), place))
                continue
            guard = guards.get(place.id)
            if guard is None:
                break  # not read (past the budget): a short page
            if guard.task != task_id or guard.sequence != place.sequence or guard.parts is None:
                raise CorruptStore("a message reference does not match its guard", record="message")
            page.append(self.items.message(authority, task_id, place.id, place.sequence, guard))
        return page

    def _guards(self, authority: str, task_id: str, wanted: list[MessageRef]) -> dict[str, Any]:
        """The id guards of these messages, by message id: one BatchGetItem, eventually consistent
        (half the price; PynamoDB asks again for keys DynamoDB leaves unprocessed). A guard is
        written once, in the commit that wrote the task item referring to it, so a stale read can
        only miss it (or, were an id ever reused, show another task's): those are read again,
        strongly, in a second BatchGetItem."""
        found = self._batch_guards(authority, [ref.id for ref in wanted], consistent=False)
        again = [
            ref.id
            for ref in wanted
            if (g := found.get(ref.id)) is None or g.task != task_id or g.sequence != ref.sequence
        ]
        return found | self._batch_guards(authority, again, consistent=True) if again else found

    def _batch_guards(self, authority: str, message_ids: list[str], *, consistent: bool) -> dict[str, Any]:
        if not message_ids:
            return {}
        keys = [(message_id_pk(authority, m), "-") for m in message_ids]
        with pynamodb_errors(write=False):
            found = list(self.items.claims.batch_get(keys, consistent_read=consistent))
        prefix = message_id_pk(authority, "")
        return {item.pk[len(prefix) :]: item for item in found}

    def events(self, authority: str, task_id: str, after: int, limit: int, seen: Seen | None = None) -> list[Event]:
        return self._records(authority, task_id, "events", after, limit, seen)

    # ---- index lists ------------------------------------------------------------------------------

    def expired(self, shard: int, now: str, limit: int) -> list[Task]:
        t = self.items.tasks
        with pynamodb_errors(write=False):
            items, _ = one_page(t, t.expiring.query(f"X#{shard}", t.exp_sk < now, page_size=limit))
        return [self.items.task(i) for i in items]

    def claimable_items(self, authority: str, shard: int, limit: int) -> list[Any]:
        with pynamodb_errors(write=False):
            query = self.items.tasks.claimable.query(claim_key(authority, shard), page_size=limit)
            items, _ = one_page(self.items.tasks, query)
        return items

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
            items, last_key = one_page(self.items.tasks, results)
        page = [self.items.task(i) for i in items[:limit]]
        if len(items) > limit:
            return page, (getattr(items[limit - 1], sk.attr_name),)
        if last_key is not None:  # the evaluated range ended before the matches did
            return page, (last_key[sk.attr_name]["S"],)
        return page, None

    def _filter(self, filters: dict[str, str] | None) -> Any:
        condition = None
        for attribute, value in sorted((filters or {}).items()):
            clause = getattr(self.items.tasks, attribute) == value
            condition = clause if condition is None else condition & clause
        return condition

    def context_tasks(self, authority: str, context: str, after: tuple[str, ...] | None, limit: int) -> TaskPage:
        t = self.items.tasks
        items, cursor = self._page(t.by_context, f"{authority}#{context}", t.ctx_sk, after, limit)
        return TaskPage(items, cursor)

    def authority_tasks(
        self, authority: str, task_filter: TaskFilter, after: tuple[str, ...] | None, limit: int
    ) -> TaskPage:
        t = self.items.tasks
        filters = {k: v for k, v in (("context", task_filter.context), ("state", task_filter.state)) if v}
        # updated_at >= since  ⟺  inverted(updated_at) <= inverted(since); "$" sorts just above "#".
        upper = invert(task_filter.updated_since) + "$" if task_filter.updated_since else "~"
        items, cursor = self._page(t.by_authority, authority, t.auth_sk, after, limit, upper=upper, filters=filters)
        total, more = self._count(authority, upper, filters)
        return TaskPage(items, cursor, total_size=total, total_is_lower_bound=more)

    def authority_position(self, updated_at: str, workspace: str, task_id: str) -> tuple[str, ...]:
        return ("#".join((invert(updated_at), workspace, task_id)),)  # the item's auth_sk (dynamo_items)

    def _count(self, authority: str, upper: str, filters: dict[str, str]) -> tuple[int, bool]:
        """The filtered set's size from one COUNT query over the same index that evaluates at most
        TOTAL_SIZE_CAP items, so a list request's cost stays bounded; past the cap the count is a
        lower bound. Not a snapshot: the GSI is eventually consistent (docs/design/paging.md#totals).
        (The table connection's query, because PynamoDB's `count` pages on to the end.)"""
        t = self.items.tasks
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
        t = self.items.tasks
        items, cursor = self._page(t.leases, f"{authority}#{worker}", t.lease_sk, after, limit)
        return LeasePage(items, cursor)


def _sequence(record: Any) -> int:
    """A record's sequence: an event's or a message reference's own, a v1 message item's sort key."""
    return int(record.sk[2:]) if isinstance(record, MessageItem) else int(record.sequence)
