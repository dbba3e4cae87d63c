"""What the edge's models declare about inputs, and how a field's rule becomes its validator.

A request model checks each field's type (pydantic: a string, an integer as JSON Schema means it, an
object of known fields, never null) and then its rule (`checked`: the context's own rule function,
e.g. dovecote/tasks/inputs.py), the one validator of that input. The two fail differently:
- a type error answers as pydantic words it (platform/http.py: `400 invalid_argument`, the
  problems listed), before anything else is looked at;
- a broken rule is the DomainError the rule raised (its stable code, message and details), and it is
  not raised by validation: a body whose every field has its type reaches its route with each refused
  field holding its refusal, raised when the field is read (`RequestModel`). The route's gate reads
  its fields in its check order, the caller's role among them, so the first refusal in that order
  is the answer (a caller's token on a worker route is 403 even when a field breaks its rule).
The published document states the same rules (`json_schema_extra`, `pattern`, bounds), built from the
same constants; tests/e2e/fuzz/ holds the two together (every schema-valid request is
accepted).

`QueryInt` is an integer query parameter, read only from its canonical decimal text
(platform/request_text.py QUERY_INT).

`JsonInt` is an integer as JSON Schema means it: `3` and `3.0` are both the integer 3 (a schema
validator accepts both, so the server must), while a string or a boolean is never an integer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetPydanticSchema,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError, core_schema

from dovecote.platform.errors import DomainError, InvalidArgument
from dovecote.platform.ids import ID_SCHEMA_PATTERN
from dovecote.platform.redrive import DEFAULT_REDRIVE, MAX_REDRIVE
from dovecote.platform.request_text import QUERY_INT, QUERY_INT_RULE

ID: dict[str, Any] = {"pattern": ID_SCHEMA_PATTERN}
SHA256_HEX: dict[str, Any] = {"pattern": "^(sha256:)?[0-9a-f]{64}$"}
# A media type without parameters is the documented subset (parameters are accepted too).
MEDIA_TYPE: dict[str, Any] = {"pattern": r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+/[!#$%&'*+.^_`|~0-9A-Za-z-]+$", "maxLength": 128}
# Base64 of at least one byte.
BASE64: dict[str, Any] = {
    "pattern": r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$"
}
# A calendar date, exactly: 30-day months end at 30, February at 28 except in leap years (every 4th
# year, not centuries unless divisible by 400), so a schema-valid date is one the server parses.
_LEAP_YEAR = r"([1-9][0-9](0[48]|[2468][048]|[13579][26])|([13579][26]|[2468][048])00)"
DATE_PATTERN = (
    r"([1-9][0-9]{3}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
    r"|02-(0[1-9]|1[0-9]|2[0-8]))|" + _LEAP_YEAR + r"-02-29)"
)
TIME_PATTERN = r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
OFFSET_PATTERN = r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"


def instant_pattern(fraction_digits: int = 6) -> str:
    """RFC 3339 with a real calendar date, as the gates parse it (seconds with up to N digits)."""
    return f"^{DATE_PATTERN}{TIME_PATTERN}(\\.[0-9]{{1,{fraction_digits}}})?{OFFSET_PATTERN}$"


# Text limited in UTF-8 bytes. JSON Schema counts characters and has no keyword for bytes, so the
# document declares the byte limit as `maxLength` (a longer string is over the limit in bytes too:
# every string the schema refuses, the server refuses) and states the byte limit itself under this
# extension keyword: a string within `maxLength` but over its bytes (multi-byte characters) is refused
# as documented. tests/e2e/fuzz/ reads it to tell those refusals from a broken contract.
MAX_UTF8_BYTES = "x-max-utf8-bytes"


def utf8_text(max_bytes: int, **extra: Any) -> dict[str, Any]:
    return {"maxLength": max_bytes, MAX_UTF8_BYTES: max_bytes, **extra}


# What Python's str.strip() removes (str.isspace), as a JSON Schema character class: a gate that
# requires "some visible character" (`value.strip() != ""`) is declared with it, not with `\s`, whose
# ECMAScript set differs (it has U+FEFF, and not U+001C-U+001F).
PY_SPACE = r"\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"

# No control characters (query text, filters).
PLAIN_TEXT: dict[str, Any] = {"pattern": r"^[^\x00-\x1f\x7f]*$"}


def bounded(minimum: int | None = None, maximum: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if minimum is not None:
        out["minimum"] = minimum
    if maximum is not None:
        out["maximum"] = maximum
    return out


def optional_int(minimum: int, maximum: int, description: str) -> Any:
    """The field of an optional integer between `minimum` and `maximum` (absent: None)."""
    return Field(default=None, json_schema_extra=bounded(minimum, maximum), description=description)


def one_of(*values: str) -> dict[str, Any]:
    return {"enum": list(values)}


def _json_int(value: Any) -> Any:
    if isinstance(value, bool) or isinstance(value, str):
        raise ValueError("must be an integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("must be an integer")
        return int(value)
    return value


JsonInt = Annotated[int, BeforeValidator(_json_int)]


def _query_int(value: Any) -> Any:
    if isinstance(value, str) and not QUERY_INT.fullmatch(value):
        # pydantic's own error type for an integer it cannot parse, with the rule in words.
        raise PydanticCustomError("int_parsing", QUERY_INT_RULE)
    return value


# Every route's integer query parameter (`Annotated[QueryInt | None, Query(...)]`): the validator
# leaves the published schema as it is (an integer with the route's bounds).
QueryInt = Annotated[int, BeforeValidator(_query_int)]


# Integers the document declares as bounded by this: JSON Schema tools handle numbers as doubles, so
# a bound of 2^63-1 would be rounded up and values past it generated. The server accepts more (its
# own bound is 2^63-1); the document promises the safe-integer range.
SAFE_MAX = 2**53 - 1


def _drop_nulls(schema: dict[str, Any]) -> None:
    """Optional request fields take a value or are left out: `null` is not a value (the gate below
    refuses it), so the document does not offer it either."""
    for prop in (schema.get("properties") or {}).values():
        options = prop.get("anyOf")
        if isinstance(options, list) and {"type": "null"} in options:
            rest = [o for o in options if o != {"type": "null"}]
            del prop["anyOf"]
            if len(rest) == 1:
                prop.update(rest[0])
            else:
                prop["anyOf"] = rest


class EdgeModel(BaseModel):
    """Base of every model at the HTTP edge. Its validator and serializer are built on its first use,
    not when its module is imported: a cold start builds only the models of the route it serves
    (pydantic's `defer_build`)."""

    model_config = ConfigDict(defer_build=True)


# The pydantic error type of a broken rule (its DomainError in the error's context, "refusal"); every
# other error type is a type error.
REFUSED = "refused"


def refusing(rule: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`rule` as a pydantic validator function: the DomainError it raises becomes a REFUSED error
    carrying it."""

    def validate(value: Any) -> Any:
        try:
            return rule(value)
        except DomainError as exc:
            raise PydanticCustomError(REFUSED, "{message}", {"message": exc.message, "refusal": exc}) from None

    return validate


def checked(rule: Callable[[Any, str], Any], label: str) -> AfterValidator:
    """A field's rule as its validator, after its type: `rule(value, label)` answers the value (or
    what it means) or raises its refusal, naming the input `label`."""
    return AfterValidator(refusing(functools.partial(_apply, rule, label)))


def _apply(rule: Callable[[Any, str], Any], label: str, value: Any) -> Any:
    return rule(value, label)


def checked_as(model: type[BaseModel], rule: Callable[[Any], Any]) -> GetPydanticSchema:
    """An object field: `model` checks its fields' types (and is what the document shows), then
    `rule` turns it into what it means (a message's parts as bytes), or refuses it whole. Annotate
    the field with the rule's answer: `Annotated[MessageInput, checked_as(MessageIn, message)]`."""
    return GetPydanticSchema(
        lambda _source, handler: core_schema.no_info_after_validator_function(refusing(rule), handler(model))
    )


def refusal_of(error: Any) -> DomainError | None:
    """The DomainError of a REFUSED pydantic error (None for a type error)."""
    if error.get("type") != REFUSED:
        return None
    found = (error.get("ctx") or {}).get("refusal")
    return found if isinstance(found, DomainError) else None


def type_error(errors: Sequence[Any]) -> InvalidArgument:
    """A request that failed its types, as pydantic words it: the first problem in the message, every
    one in `details.problems` (`field` is its path in the body). A field that also broke its rule is
    not among them: a broken rule is reported only once every type holds, by the route's gate."""
    problems = []
    for err in errors:
        if refusal_of(err) is not None:
            continue
        location = [str(part) for part in err.get("loc", ()) if part != "body"]
        if err.get("type") == "json_invalid":
            location = []
        problems.append({"field": ".".join(location), "problem": err.get("msg", "invalid")})
    first = problems[0] if problems else {"field": "", "problem": "invalid"}
    where = f"{first['field']}: " if first["field"] else ""
    return InvalidArgument(f"{where}{first['problem']}", problems=problems)


def validated(model: type[RequestModelT], data: Any) -> RequestModelT:
    """`data` as `model`, validated as the HTTP edge validates a body (for a caller that holds a body
    as a dict: a test, a benchmark): a type error raises as the API answers it; a broken rule is held
    for the gate."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise type_error(exc.errors()) from None


class RequestModel(EdgeModel):
    """Base of every request body: unknown fields are refused, and so is an explicit `null`.

    A body whose fields all have their types, but some break their rule, is still this model: each
    such field holds its refusal and raises it when read, so the gate that reads the fields in its
    check order reports the first one in that order (this module's docstring). Any type error anywhere
    fails validation as pydantic words it, as before."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_drop_nulls)
    # The body as given (presence: `given`), and the refusal of each field that broke its rule.
    _given: dict[str, Any] = PrivateAttr(default_factory=dict)
    _refused: dict[str, DomainError] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _no_nulls(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, value in data.items():
                if value is None:
                    raise ValueError(f"{name} must not be null: leave it out instead")
        return data

    @model_validator(mode="wrap")
    @classmethod
    def _refusals(cls, data: Any, handler: Callable[[Any], Any]) -> Any:
        try:
            body = handler(data)
        except ValidationError as exc:
            errors = exc.errors()
            if not isinstance(data, dict) or not errors or any(refusal_of(e) is None for e in errors):
                raise
            body = cls._holding_refusals(data)
        if isinstance(body, RequestModel) and isinstance(data, dict):
            body._given = data
        return body

    @classmethod
    def _holding_refusals(cls, data: dict[str, Any]) -> RequestModel:
        """The body with each field validated alone: its value, or (for a field that broke its rule)
        its refusal, raised when the field is read. Only ever after every type has held."""
        values: dict[str, Any] = {}
        refused: dict[str, DomainError] = {}
        for name in cls.model_fields:
            if name not in data:
                continue
            try:
                values[name] = _field_validator(cls, name).validate_python(data[name])
            except ValidationError as exc:
                refusal = refusal_of(exc.errors()[0])
                assert refusal is not None  # the whole body failed on refusals alone
                refused[name] = refusal
        body = cls.model_construct(**values)
        for name in refused:
            body.__dict__.pop(name, None)  # no default stands in for a refused field
        body._refused = refused
        return body

    def given(self, name: str) -> bool:
        """Whether the body gives `name` a value (neither left out nor empty), as sent: what a rule
        between fields asks without reading a value that may be refused."""
        return self._given.get(name) not in (None, "", {})

    def refused(self) -> bool:
        """Whether a field of this body (or of a body within it) broke its rule."""
        return bool(self._refused) or any(
            isinstance(value, RequestModel) and value.refused() for value in self.__dict__.values()
        )

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            try:
                refused = object.__getattribute__(self, "__pydantic_private__") or {}
            except AttributeError:
                refused = {}
            refusal = (refused.get("_refused") or {}).get(name)
            if refusal is not None:
                raise refusal
            return super().__getattr__(name)


RequestModelT = TypeVar("RequestModelT", bound=RequestModel)


@functools.cache
def _field_validator(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    """One field of `model` validated alone, with its type and its rule."""
    field = model.model_fields[name]
    annotation: Any = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
    return TypeAdapter(annotation)


def with_schema(base: dict[str, Any]) -> ConfigDict:
    """A request model's config with extra JSON Schema keywords (oneOf, required, ...)."""

    def extra(schema: dict[str, Any]) -> None:
        _drop_nulls(schema)
        for keyword, value in base.items():
            if keyword == "required":
                schema["required"] = sorted(set(schema.get("required", [])) | set(value))
            else:
                schema[keyword] = value

    return ConfigDict(extra="forbid", json_schema_extra=extra)


# A redrive of dead letters (platform/redrive.py), memory's and the webhooks' alike. (No docstring:
# it would become the schema's description in the API document.)
class RedriveIn(RequestModel):
    limit: JsonInt = Field(
        description=f"how many dead letters to look at; 0: the default ({DEFAULT_REDRIVE})",
        json_schema_extra=bounded(0, MAX_REDRIVE),
    )
