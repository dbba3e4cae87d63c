"""What the OpenAPI document declares about inputs, in one place.

The domain gates enforce every rule with their own stable codes and the reference's messages; these
constraints only *document* them (`json_schema_extra`), so the published schema is exact without a
second, differently worded validation in pydantic. tests/e2e/test_schemathesis.py holds the two
together: every schema-valid request must be accepted (positive data acceptance).

`JsonInt` is an integer as JSON Schema means it: `3` and `3.0` are both the integer 3 (a schema
validator accepts both, so the server must), while a string or a boolean is never an integer.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from dovecote.platform.ids import ID_SCHEMA_PATTERN

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
# as documented. tests/e2e/test_schemathesis.py reads it to tell those refusals from a broken contract.
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


class RequestModel(EdgeModel):
    """Base of every request body: unknown fields are refused, and so is an explicit `null`."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_drop_nulls)

    @model_validator(mode="before")
    @classmethod
    def _no_nulls(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, value in data.items():
                if value is None:
                    raise ValueError(f"{name} must not be null: leave it out instead")
        return data


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
