"""Faults injected at botocore level: a client's event hook (before-call.s3.PutObject,
after-call.dynamodb.…) raises, below the adapter, never a mock of it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import ClientError

Fault = Exception | Callable[..., None]


def raise_(error: Exception) -> Callable[..., None]:
    """An event handler that raises `error`."""

    def fail(**_: Any) -> None:
        raise error

    return fail


def inject(client: Any, event: str, fault: Fault) -> None:
    """From now on, the `event` of `client` raises `fault` (an exception), or runs it (a handler)."""
    handler = raise_(fault) if isinstance(fault, Exception) else fault
    client.meta.events.register(event, handler, unique_id="fault")


def heal(client: Any, event: str) -> None:
    client.meta.events.unregister(event, unique_id="fault")


@contextmanager
def failing(client: Any, event: str, fault: Fault) -> Iterator[None]:
    """`inject` for the duration of the block."""
    inject(client, event, fault)
    try:
        yield
    finally:
        heal(client, event)


def server_error(operation: str, code: str = "InternalServerError") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "injected"}}, operation)
