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

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pynamodb.connection import Connection
    from pynamodb.models import Model

M = TypeVar("M", bound="Model")
R = TypeVar("R")

PLACEHOLDER_TABLE = "unbound"  # a model used before `bind` fails loudly against this name


def bind(model: type[M], *, table: str, client: Any) -> type[M]:
    """`model` bound to `table`, sending every request through `client`."""
    meta = type("Meta", (model.Meta,), {"table_name": table})  # type: ignore[arg-type]
    bound = type(model.__name__, (model,), {"Meta": meta, "__module__": model.__module__})
    bound._get_connection().connection._client = client  # type: ignore[attr-defined]
    return bound  # type: ignore[return-value]


def attributes(source: Any, *, keyed: tuple[str, ...] = (), absent_when_empty: tuple[str, ...] = ()) -> dict[str, Any]:
    """A record's (a dataclass's) fields as the attributes of its item, which names them alike: except
    the ones its key holds; an empty optional one is left absent."""
    names = [f.name for f in fields(source) if f.name not in keyed]
    return {n: (getattr(source, n) or None) if n in absent_when_empty else getattr(source, n) for n in names}


def record(kind: type[R], item: Any, *, numbers: tuple[str, ...] = (), **known: Any) -> R:
    """The record `kind` (a dataclass) from the item's attributes of the same names: `numbers` as
    ints, an absent one empty; `known` the fields its key holds or that need decoding."""

    def read(name: str) -> Any:
        value = getattr(item, name)
        return int(value or 0) if name in numbers else ("" if value is None else value)

    return kind(**{f.name: read(f.name) for f in fields(kind) if f.name not in known}, **known)  # type: ignore[arg-type]


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


# ---- error mapping: what a failed request means to the caller -----------------------------------
#
# - a read that fails is `unavailable`, a throttle `throttled` (`pynamodb_errors`, over
#   platform.aws.aws_errors);
# - a write that may have been sent is `commit_unknown`, throttles and timeouts included
#   (`committing`): a command's receipt makes the exact retry safe;
# - a cancelled transaction names, per item, the condition that failed and the old item
#   (`cancellation_codes`, `failed_condition`, `failed_conditions`): the adapter turns that into its
#   typed conflict; a single conditional write says whether its condition held (`conditionally`);
# - a request AWS refuses as invalid can never succeed, so it is neither `unavailable` nor
#   `commit_unknown` ("retry"): `refusal` says so, with AWS's reason, for the adapter to raise its own.

CONDITION_FAILED = "ConditionalCheckFailed"  # a cancellation reason
CONDITION_FAILED_ERROR = "ConditionalCheckFailedException"  # a single write's error code
# AWS refused the request itself: nothing was applied, and sending it again cannot succeed.
REFUSAL_CODES = frozenset({"ValidationException", "SerializationException"})


def _reasons(exc: BaseException) -> list[tuple[str, Any]]:
    """(code, old item) per item of a cancelled transaction, ('', None) where its condition held.
    PynamoDB's VerboseClientError carries them as objects; a bare ClientError in its response."""
    reasons = getattr(exc, "cancellation_reasons", None)
    if reasons:
        return [(r.code, r.raw_item) if r is not None else ("", None) for r in reasons]
    cause = unwrap(exc)
    raw = (getattr(cause, "response", None) or {}).get("CancellationReasons") or []
    return [(str(r.get("Code") or "") if r.get("Code") != "None" else "", r.get("Item")) for r in raw]


def cancellation_codes(exc: BaseException) -> list[str]:
    """Per-item reasons of a cancelled transaction ('' where an item's condition held)."""
    return [code for code, _ in _reasons(exc)]


def failed_condition(exc: BaseException | None, names: Sequence[str]) -> tuple[str, Any] | None:
    """The first item of a cancelled transaction whose condition failed, by its name in `names`
    (the transaction's items in order), with the old item DynamoDB returned for it (ALL_OLD), or
    None when the transaction was not cancelled by a condition (a conflict, a throttle, ...)."""
    from dovecote.platform.aws import aws_error_code

    if exc is None or aws_error_code(unwrap(exc)) != "TransactionCanceledException":
        return None
    for name, (code, item) in zip(names, _reasons(exc), strict=False):
        if code == CONDITION_FAILED:
            return name, item
    return None


def failed_conditions(exc: BaseException, names: Sequence[str]) -> set[str]:
    """The names (the transaction's items in order) whose condition failed in a cancelled
    transaction; empty when it was not cancelled by a condition."""
    return {name for name, code in zip(names, cancellation_codes(exc), strict=False) if code == CONDITION_FAILED}


def refusal(exc: BaseException) -> tuple[str, str] | None:
    """(code, reason) when AWS refused the request as invalid (ValidationException, a transaction
    cancelled for ValidationError, botocore's own parameter validation); None for any other failure."""
    from botocore.exceptions import ParamValidationError

    from dovecote.platform.aws import aws_error_code

    cause = unwrap(exc)
    if isinstance(cause, ParamValidationError):
        return "ParamValidationError", str(cause)
    response = getattr(cause, "response", None) or {}
    operation = getattr(cause, "operation_name", "") or "request"
    code = aws_error_code(cause)
    if code in REFUSAL_CODES:
        return code, f"{operation}: {(response.get('Error') or {}).get('Message') or code}"
    if "ValidationError" in cancellation_codes(exc):
        reasons = response.get("CancellationReasons") or []
        message = next((r.get("Message") for r in reasons if r.get("Code") == "ValidationError"), None)
        return "ValidationError", f"{operation}: {message or 'an item of the transaction is invalid'}"
    return None


@contextmanager
def refusals(refused: Callable[[str, str], Exception]) -> Iterator[None]:
    """A refusal (see `refusal`) is raised as `refused(code, reason)`; anything else passes through."""
    from pynamodb.exceptions import PynamoDBException

    try:
        yield
    except PynamoDBException as exc:
        found = refusal(exc)
        if found is not None:
            raise refused(*found) from exc
        raise


def conditionally(write: Callable[[], object]) -> bool:
    """Send one conditional write: True when it was written, False when its condition did not hold
    (nothing was written); any other failure maps as every write does (`pynamodb_errors`)."""
    from pynamodb.exceptions import PynamoDBException

    with pynamodb_errors(write=True):
        try:
            write()
        except PynamoDBException as exc:
            if exc.cause_response_code == CONDITION_FAILED_ERROR:
                return False
            raise
    return True


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


@contextmanager
def committing() -> Iterator[None]:
    """A write that may have been sent is `commit_unknown`: the receipt makes the exact retry safe.
    A throttle is too (unlike `aws_errors`): the SDK's own retries may have sent it before."""
    from botocore.exceptions import BotoCoreError, ClientError
    from pynamodb.exceptions import PynamoDBException

    from dovecote.platform.aws import THROTTLE_CODES, aws_error_code
    from dovecote.platform.errors import CommitUnknown

    try:
        yield
    except PynamoDBException as exc:
        cause = unwrap(exc)
        if cause is exc:
            raise
        with committing():
            raise cause from exc
    except ClientError as exc:
        code = aws_error_code(exc)
        if code in THROTTLE_CODES:
            raise CommitUnknown("AWS throttled the commit; retry the exact command", aws_code=code) from exc
        raise CommitUnknown("the commit outcome is unknown; retry the exact command", aws_code=code) from exc
    except BotoCoreError as exc:
        raise CommitUnknown("the commit outcome is unknown; retry the exact command", cause=type(exc).__name__) from exc


# ---- table schemas, derived from the models -----------------------------------------------------


class TableDef:
    """One DynamoDB table: the models stored in it, plus what only the table knows (its stream and
    TTL attribute). CDK (`infra/constructs/data.py`), the local runtime and the tests all create
    tables from these, so keys, indexes and projections are stated once, in the models."""

    def __init__(
        self,
        setting: str,
        models: tuple[type[Model], ...],
        *,
        stream: str | None = None,
        ttl: str | None = None,
        description: str = "",
    ) -> None:
        self.setting = setting  # the Settings field (and DOVECOTE_<SETTING> env var) naming the table
        self.models = models
        self.stream = stream  # NEW_AND_OLD_IMAGES, NEW_IMAGE, ... or None
        self.ttl = ttl
        self.description = description

    def schema(self) -> dict[str, Any]:
        """The union of the models' schemas: attribute definitions, key schema, GSIs."""
        attributes: dict[str, str] = {}
        key_schema: list[dict[str, str]] | None = None
        indexes: dict[str, dict[str, Any]] = {}
        for model in self.models:
            raw: dict[str, Any] = dict(model._get_schema())  # type: ignore[attr-defined]
            for definition in raw["attribute_definitions"]:
                name, kind = definition["AttributeName"], definition["AttributeType"]
                if attributes.setdefault(name, kind) != kind:
                    raise ValueError(f"{self.setting}: attribute {name} has two types")
            keys: list[dict[str, str]] = sorted(raw["key_schema"], key=lambda k: k["KeyType"])
            if key_schema is None:
                key_schema = keys
            elif key_schema != keys:
                raise ValueError(f"{self.setting}: models disagree on the key schema")
            for index in raw["global_secondary_indexes"]:
                entry = {
                    "IndexName": index["index_name"],
                    "KeySchema": sorted(index["key_schema"], key=lambda k: k["KeyType"]),
                    "Projection": index["projection"],
                }
                if indexes.setdefault(index["index_name"], entry) != entry:
                    raise ValueError(f"{self.setting}: index {index['index_name']} is declared twice, differently")
        return {
            "AttributeDefinitions": [{"AttributeName": n, "AttributeType": t} for n, t in attributes.items()],
            "KeySchema": key_schema or [],
            "GlobalSecondaryIndexes": list(indexes.values()),
        }

    def create_table_kwargs(self, name: str) -> dict[str, Any]:
        """`CreateTable` arguments for this table under `name` (local runtime, tests)."""
        schema = self.schema()
        kwargs: dict[str, Any] = {"TableName": name, "BillingMode": "PAY_PER_REQUEST", **schema}
        if not kwargs["GlobalSecondaryIndexes"]:
            del kwargs["GlobalSecondaryIndexes"]
        if self.stream:
            kwargs["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": self.stream}
        return kwargs


def one_page(model: type[M], results: Any) -> tuple[list[M], dict[str, Any] | None]:
    """Exactly one Query/Scan request from a PynamoDB result iterator: its items and its
    LastEvaluatedKey. (PynamoDB's item iterator fetches further pages on its own; Dovecote counts
    round trips, so every list is one request per page, and a short page says so with a cursor.)"""
    page = next(results.page_iter)
    items = [model.from_raw_data(raw) for raw in page.get("Items", [])]  # type: ignore[attr-defined]
    return items, page.get("LastEvaluatedKey")


# ---- item sizes -------------------------------------------------------------------------------------


def value_bytes(value: dict[str, Any]) -> int:
    """One attribute value's size as DynamoDB counts it (its published sizing rules): strings and
    binary by length, numbers 1 byte per 2 significant digits + 1, lists and maps 3 bytes plus 1 per
    element plus the elements (a map's keys counted like attribute names), sets their members."""
    ((kind, v),) = value.items()
    if kind == "S":
        return len(v.encode("utf-8"))
    if kind == "B":
        return len(v)
    if kind == "N":
        digits = len(str(v).lstrip("-").replace(".", "").strip("0")) or 1
        return (digits + 1) // 2 + 1
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + value_bytes(x) for x in v)
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + 1 + value_bytes(x) for k, x in v.items())
    if kind in ("SS", "BS", "NS"):
        return sum(value_bytes({kind[0]: x}) for x in v)
    raise ValueError(f"unknown attribute type {kind}")


def item_bytes(item: dict[str, Any]) -> int:
    """An item's size (its attributes as a request or `Model.serialize()` holds them): the sum of its
    attribute names and values. What a write is priced on (1 write unit per started KB, 2 in a
    transaction) and what the 400 KB item limit bounds."""
    return sum(len(name.encode("utf-8")) + value_bytes(value) for name, value in item.items())
