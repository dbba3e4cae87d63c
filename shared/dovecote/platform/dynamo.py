"""PynamoDB wiring shared by every DynamoDB adapter.

Item models are declared once, beside the adapter that uses them (`notes/records.py`,
`tasks/records.py`, ...), with a placeholder table name. The composition root binds them:
`bind(Model, table=settings.x_table, client=aws.client("dynamodb"))` returns a subclass whose
table is the configured one and whose requests go through that one cached boto3 client. So:
- table names come from settings at wiring time, never from the environment at import;
- every model shares one botocore client (one service model loaded per container, not one per
  model), with the retry and timeout settings of `platform.aws.client` (standard mode, 3 attempts,
  3 s connect, 10 s read), stated once;
- the round-trip meter and the botocore-level fault hooks that tests register on that client see
  every PynamoDB call as well.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pynamodb.connection import Connection
    from pynamodb.models import Model

M = TypeVar("M", bound="Model")

PLACEHOLDER_TABLE = "unbound"  # a model used before `bind` fails loudly against this name


def bind(model: type[M], *, table: str, client: Any) -> type[M]:
    """`model` bound to `table`, sending every request through `client`."""
    meta = type("Meta", (model.Meta,), {"table_name": table})  # type: ignore[attr-defined]
    bound = type(model.__name__, (model,), {"Meta": meta, "__module__": model.__module__})
    bound._get_connection().connection._client = client  # type: ignore[attr-defined]
    return bound  # type: ignore[return-value]


def connection(client: Any) -> Connection:
    """A PynamoDB Connection over `client`, for TransactWrite / TransactGet."""
    from pynamodb.connection import Connection

    conn = Connection(region=client.meta.region_name)
    conn._client = client
    return conn


def unwrap(exc: BaseException) -> BaseException:
    """PynamoDB wraps botocore's ClientError / BotoCoreError in its own exceptions (`cause`)."""
    from pynamodb.exceptions import PynamoDBException

    if isinstance(exc, PynamoDBException) and exc.cause is not None:
        return exc.cause
    return exc


def cancellation_codes(exc: BaseException) -> list[str]:
    """Per-item reasons of a cancelled transaction ('' where an item's condition held)."""
    reasons = getattr(exc, "cancellation_reasons", None)
    if reasons is not None:
        return [r.code if r is not None else "" for r in reasons]
    cause = unwrap(exc)
    raw = (getattr(cause, "response", None) or {}).get("CancellationReasons") or []
    return [str(r.get("Code") or "") if r.get("Code") != "None" else "" for r in raw]


@contextmanager
def pynamodb_errors(*, write: bool) -> Iterator[None]:
    """`platform.aws.aws_errors` for PynamoDB calls: the same mapping, on the unwrapped cause."""
    from pynamodb.exceptions import PynamoDBException

    from dovecote.platform.aws import aws_errors

    try:
        yield
    except PynamoDBException as exc:
        if exc.cause is None:
            raise
        with aws_errors(write=write):
            raise exc.cause from exc
