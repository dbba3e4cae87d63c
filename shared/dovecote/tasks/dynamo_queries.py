"""The reads of the DynamoDB TaskStore beyond a command's own read: message and event streams (one
strongly consistent Query per page), one message by id, a grant, a head, an apply receipt, and the
index lists (claimable, expiring, by context, by authority with its bounded count, a worker's
leases), each one Query per page (PynamoDB's iterator would page on by itself: see one_page)."""

from __future__ import annotations

from typing import Any

from dovecote.platform.dynamo import one_page, pynamodb_errors
from dovecote.tasks.dynamo_items import TaskItems, apply_pk, get_item, head_pk, message_id_pk, task_pk
from dovecote.tasks.model import TOTAL_SIZE_CAP, ApplyReceipt, Event, Grant, Message, Task, WorkspaceHead
from dovecote.tasks.ports import LeasePage, TaskFilter, TaskPage
from dovecote.tasks.storage import claim_key, invert


class TaskQueries:
    """The store's reads beyond a command's own, over the table's item mapping."""

    def __init__(self, items: TaskItems) -> None:
        self.items = items

    def message(self, authority: str, task_id: str, message_id: str) -> Message | None:
        """Two round trips: the authority-wide id claim names the task and the sequence, then the
        message item itself."""
        with pynamodb_errors(write=False):
            claim = get_item(self.items.claims, message_id_pk(authority, message_id), "-")
            if claim is None or claim.task != task_id or claim.sequence is None:
                return None
            item = get_item(self.items.messages, task_pk(authority, task_id), f"M#{int(claim.sequence):020d}")
        return self.items.message(authority, task_id, item) if item is not None else None

    def grant(self, authority: str, task_id: str, fence: int) -> Grant | None:
        with pynamodb_errors(write=False):
            item = get_item(self.items.grants, task_pk(authority, task_id), f"G#{fence:020d}")
        return self.items.grant(task_id, fence, item) if item is not None else None

    def grant_history(self, authority: str, task_id: str, after: int, limit: int) -> list[Grant]:
        return [
            self.items.grant(task_id, int(i.sk[2:]), i)
            for i in self._stream(self.items.grants, authority, task_id, "G", after, limit)
        ]

    def head(self, authority: str, workspace: str) -> WorkspaceHead | None:
        (item,) = self.items.get_many([(self.items.heads, head_pk(authority, workspace), "-")])
        return self.items.head(item) if item is not None else None

    def apply_receipt(self, authority: str, workspace: str, artifact: str) -> ApplyReceipt | None:
        (item,) = self.items.get_many([(self.items.apply_receipts, apply_pk(authority, workspace, artifact), "-")])
        return self.items.apply_receipt(authority, workspace, artifact, item) if item is not None else None

    # ---- streams ---------------------------------------------------------------------------------

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
            self.items.message(authority, task_id, i)
            for i in self._stream(self.items.messages, authority, task_id, "M", after, limit)
        ]

    def events(self, authority: str, task_id: str, after: int, limit: int) -> list[Event]:
        return [
            self.items.event(task_id, i) for i in self._stream(self.items.events, authority, task_id, "E", after, limit)
        ]

    # ---- index lists ------------------------------------------------------------------------------

    def expired(self, shard: int, now: str, limit: int) -> list[Task]:
        t = self.items.tasks
        with pynamodb_errors(write=False):
            items, _ = one_page(t, t.expiring.query(f"X#{shard}", t.exp_sk < now, page_size=limit))
        return [self.items.task(i) for i in items]

    def claimable(self, authority: str, shard: int, limit: int) -> list[Task]:
        with pynamodb_errors(write=False):
            query = self.items.tasks.claimable.query(claim_key(authority, shard), page_size=limit)
            items, _ = one_page(self.items.tasks, query)
        return [self.items.task(i) for i in items]

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
