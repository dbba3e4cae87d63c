"""The DynamoDB adapter of the A2A waits bound (dovecote/a2a/waits.py says the design and its round
trips): one item per authority in the tasks table, through a PynamoDB model."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeSetAttribute
from pynamodb.exceptions import DoesNotExist
from pynamodb.expressions.condition import size
from pynamodb.expressions.update import Action

from dovecote.a2a.waits import IDLE_SECONDS, entry_for, expired
from dovecote.platform.dynamo import bind, conditionally, pynamodb_errors
from dovecote.platform.items import KeyedItem


class WaitsItem(KeyedItem):
    """pk "AW#<authority>", sk "-": the authority's blocking waits in progress (see the module)."""

    holders = UnicodeSetAttribute(null=True)
    expires_ttl = NumberAttribute(null=True)  # epoch seconds: the tasks table's TTL attribute


class DynamoWaits:
    def __init__(self, *, table: str, dynamodb: Any, limit: int, clock: Callable[[], float] = time.time) -> None:
        self.limit = limit
        self._clock = clock
        self._items = bind(WaitsItem, table=table, client=dynamodb)

    def take(self, authority: str) -> str | None:
        if self.limit <= 0:
            return None
        for attempt in range(2):
            now = self._clock()
            entry = entry_for(now)
            if self._add(authority, entry, now):
                return entry
            if attempt == 0 and not self._reclaim(authority, now):
                return None  # full, and every holder still within its time
        return None

    def give_back(self, authority: str, entry: str) -> None:
        items = self._items
        with pynamodb_errors(write=True):
            items(f"AW#{authority}", "-").update(actions=[items.holders.delete({entry})])

    def _add(self, authority: str, entry: str, now: float) -> bool:
        items = self._items
        item = items(f"AW#{authority}", "-")
        free = items.holders.does_not_exist() | (size(items.holders) < self.limit)
        actions: list[Action] = [items.holders.add({entry}), items.expires_ttl.set(int(now) + IDLE_SECONDS)]
        return conditionally(lambda: item.update(actions=actions, condition=free))

    def _reclaim(self, authority: str, now: float) -> bool:
        """Delete the entries past their time; True when there were any."""
        items = self._items
        try:
            with pynamodb_errors(write=False):
                found = items.get(f"AW#{authority}", "-", consistent_read=True, attributes_to_get=["holders"])
        except DoesNotExist:
            return True  # gone meanwhile (its TTL): the next take creates it
        late = {e for e in (found.holders or set()) if expired(e, now)}
        if not late:
            return False
        with pynamodb_errors(write=True):
            items(f"AW#{authority}", "-").update(actions=[items.holders.delete(late)])
        return True
