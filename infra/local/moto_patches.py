"""Make moto's DynamoDB safe and fast under concurrent transactions.

moto 5.2's `transact_write_items` snapshots every touched table with `copy.deepcopy` for rollback:
that costs O(table size) per transaction (a dev runtime slowed to seconds per Put after a few hundred
notes) and races with other threads mutating the table ("dictionary changed size during iteration").

Changes, all matching real DynamoDB semantics:
- one lock around moto's item operations, so each request is isolated (serializable);
- transactions check every condition against the unchanged state first, then apply; if applying
  fails part-way, only the touched items are restored;
- an item's 400 KB check is made once per item, not once per attribute.

Dovecote's own code paths are unchanged; races between Dovecote requests (S3 write, then index
transaction) still interleave freely between requests.
"""

from __future__ import annotations

import copy
import functools
import threading
from typing import Any

_LOCK = threading.RLock()
# Held by every moto DynamoDB operation once `serialize_dynamodb` ran: in-process readers of moto's
# tables (the dispatcher's gate, infra/local/schedules.py) take it too.
DYNAMODB_LOCK = _LOCK
# moto's own bound on an item's size (LimitedSizeDict): DynamoDB's 400 KB, measured as moto measures it.
ITEM_SIZE_LIMIT = 405000
_OPERATIONS = (
    "transact_write_items",
    "transact_get_items",
    "put_item",
    "update_item",
    "delete_item",
    "get_item",
    "query",
    "scan",
    "batch_write_item",
    "batch_get_item",
)


def _transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        ConditionalCheckFailed,
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )

    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    planned: list[tuple[str, dict[str, Any], str, dict[str, Any], Any]] = []
    seen: set[tuple[str, str]] = set()
    errors: list[Any] = []
    for entry in transact_items:
        if len(entry) > 1:
            raise TransactWriteSingleOpException
        op_type, op = next(iter(entry.items()))
        table_name = op["TableName"]
        table = self.get_table(table_name)
        if op_type == "Put":
            key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
            if table.range_key_attr is not None:
                key[table.range_key_attr] = op["Item"][table.range_key_attr]
        else:
            key = op["Key"]
        marker = (table_name, str(dict(sorted(key.items()))))
        if marker in seen:
            raise MultipleTransactionsException()
        seen.add(marker)
        current = self.get_item(table_name, key)
        error: Any = (None, None, None)
        condition = op.get("ConditionExpression")
        if condition is not None:
            check = get_filter_expression(
                condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
            )
            if not check.expr(current):
                old = None
                if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                    old = current.to_json()["Attributes"]
                error = ("ConditionalCheckFailed", str(ConditionalCheckFailed(item=old).message), old)
        errors.append(error)
        original = copy.deepcopy(current.to_json()["Attributes"]) if current else None
        planned.append((op_type, op, table_name, key, original))
    if any(code is not None for code, _, _ in errors):
        raise TransactionCanceledException(errors)
    applied: list[tuple[str, dict[str, Any], Any]] = []
    try:
        for op_type, op, table_name, key, original in planned:
            names, values = op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
            if op_type == "Put":
                self.put_item(
                    table_name, op["Item"], expression_attribute_names=names, expression_attribute_values=values
                )
            elif op_type == "Delete":
                self.delete_item(table_name, key, expression_attribute_names=names, expression_attribute_values=values)
            elif op_type == "Update":
                self.update_item(
                    table_name,
                    key,
                    update_expression=op["UpdateExpression"],
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            applied.append((table_name, key, original))
    except Exception:
        for table_name, key, original in reversed(applied):
            if original is None:
                self.delete_item(table_name, key)
            else:
                self.put_item(table_name, original)
        raise


def _lock_each(backend: type, names: tuple[str, ...], lock: Any) -> None:
    """Each of the backend's methods `names` (those it has) runs holding `lock`."""
    for name in names:
        original = getattr(backend, name, None)
        if original is None:
            continue

        def locked(self: Any, *args: Any, __original: Any = original, **kwargs: Any) -> Any:
            with lock:
                return __original(self, *args, **kwargs)

        functools.update_wrapper(locked, original)
        setattr(backend, name, locked)


def serialize_dynamodb() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    if getattr(DynamoDBBackend, "_dovecote_serialized", False):
        return
    DynamoDBBackend.transact_write_items = _transact_write_items  # type: ignore[method-assign]
    _lock_each(DynamoDBBackend, _OPERATIONS, _LOCK)
    _serialize_dynamodb_requests()
    _size_items_once()
    DynamoDBBackend._dovecote_serialized = True  # type: ignore[attr-defined]


def _size_items_once() -> None:
    """moto's Item fills its attributes one `LimitedSizeDict.__setitem__` at a time, and each one
    sums the size of every attribute already set: quadratic in the attributes, and the largest single
    cost of a put (served, or replayed from the journal at a start). The same 400 KB check, once: the
    running total only grows, so the check on the last attribute is the one that can fail."""
    from moto.dynamodb.exceptions import ItemSizeTooLarge
    from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
    from moto.dynamodb.models.utilities import bytesize

    def __init__(self: Any, hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> None:  # noqa: N807
        self.hash_key = hash_key
        self.range_key = range_key
        values = {key: DynamoType(value) for key, value in attrs.items()}
        if sum(bytesize(key) + value.size() for key, value in values.items()) > ITEM_SIZE_LIMIT:
            raise ItemSizeTooLarge
        self.attrs = LimitedSizeDict()
        dict.update(self.attrs, values)

    functools.update_wrapper(__init__, Item.__init__)
    Item.__init__ = __init__  # type: ignore[method-assign]


def _serialize_dynamodb_requests() -> None:
    """The whole DynamoDB request under the lock, not only the backend call: moto's UpdateItem
    handler deep-copies the live item it got from `get_item` after that call returned, so a
    concurrent update of the same item broke the copy ("dictionary changed size during iteration").
    Racing flips on one item (a cancel against the worker's start) hit it."""
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.call_action

    def call_action(self: Any) -> Any:
        with _LOCK:
            return original(self)

    functools.update_wrapper(call_action, original)
    DynamoHandler.call_action = call_action  # type: ignore[method-assign]


# ---- SQS ----------------------------------------------------------------------------------------

_SQS_LOCK = threading.RLock()
SQS_LOCK = _SQS_LOCK  # held by moto's SQS calls (a long-polling receive excepted); the compaction's cut takes it
_SQS_OPERATIONS = (
    "send_message",
    "send_message_batch",
    "delete_message",
    "delete_message_batch",
    "change_message_visibility",
    "change_message_visibility_batch",
    "purge_queue",
)


def serialize_sqs() -> None:
    """Make moto's SQS FIFO deliver a message group in order, and its backend thread-safe.

    - moto 5.2 keeps a received message in `pending_messages` after its visibility timeout ends,
      so when a group's messages all become visible again, `receive_message` skips the group's
      head (its group still looks in flight because of the messages behind it) and hands out a
      later message first. Real SQS delivers a group in order up to its first in-flight message.
      Here a message whose visibility timeout has ended stops being pending before the receive.
    - `delete_message` rebuilds the queue's message list without the lock `add_message` takes,
      so a concurrent send could be dropped: every mutating call takes one lock. A long-polling
      receive (WaitTimeSeconds > 0) waits for sends, so it runs without that lock.
    """
    from moto.sqs.models import SQSBackend

    if getattr(SQSBackend, "_dovecote_serialized", False):
        return
    original_receive = SQSBackend.receive_message

    def receive_message(
        self: Any, queue_name: str, count: int, wait_seconds_timeout: int, *args: Any, **kwargs: Any
    ) -> Any:
        def receive() -> Any:
            queue = self.get_queue(queue_name)
            for message in list(queue.pending_messages):
                if message.visible:
                    queue.pending_messages.discard(message)
            return original_receive(self, queue_name, count, wait_seconds_timeout, *args, **kwargs)

        if wait_seconds_timeout:
            return receive()
        with _SQS_LOCK:
            return receive()

    functools.update_wrapper(receive_message, original_receive)
    SQSBackend.receive_message = receive_message  # type: ignore[method-assign]
    _lock_each(SQSBackend, _SQS_OPERATIONS, _SQS_LOCK)
    SQSBackend._dovecote_serialized = True  # type: ignore[attr-defined]


# ---- the server's dispatch ------------------------------------------------------------------------


def dispatcher_app() -> Any:
    """moto's server app (`DomainDispatcherApplication`), remembering which backend serves a host.

    moto resolves the backend of every request by listing its package directory (`listdir` and an
    `isdir` per service, ~200) and matching ~300 URL patterns, under one lock: the biggest share of
    an idle runtime's CPU when the event sources polled. The answer depends only on the host string
    (few distinct ones locally), so it is computed once per host."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    class CachedDispatcher(DomainDispatcherApplication):
        def __init__(self) -> None:
            super().__init__(create_backend_app)
            self._backends: dict[str | None, Any] = {}

        def get_backend_for_host(self, host: str | None) -> Any:
            try:
                return self._backends[host]
            except KeyError:
                found = self._backends[host] = super().get_backend_for_host(host)
                return found

    return CachedDispatcher()
