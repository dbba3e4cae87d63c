"""The text checks every API request passes, Dovecote's routes (platform/http.gate_request) and A2A's
(functions/a2a_api) alike: a query string is valid UTF-8 once its percent-escapes are decoded
(strictly: a gateway that decoded `%FF` as U+FFFD would otherwise serve or store a character nobody
sent), and no query or path parameter holds a lone surrogate. A module of its own, without the
resolver or pydantic, so the A2A function's cold start pays for neither."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote_to_bytes

from dovecote.platform.errors import DomainError, InvalidArgument

# An integer in a query string is its canonical decimal text, whole (fullmatch): int() would also
# read " 1", "1\n", "+1", "01" and "1_0" (as 10), so one value could be spelt many ways and a stray
# byte would pass unnoticed. A negative one passes here and meets the route's bound.
QUERY_INT = re.compile(r"0|-?[1-9][0-9]*")
QUERY_INT_RULE = "must be an integer in canonical decimal form (digits; no +, space, _ or leading zero)"

SURROGATE = "request text must be valid Unicode (a lone surrogate is not)"


def bad_text(value: str) -> bool:
    """A lone surrogate cannot be encoded as UTF-8: it would fail deep inside a store, as a 500."""
    if value.isascii():
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def raw_query_bytes(raw: str) -> bytes:
    """The query string as the client sent it, percent-escapes decoded. API Gateway keeps
    `rawQueryString` percent-encoded (ASCII); the local gateway passes literal bytes as Latin-1
    characters, the WSGI convention (PEP 3333), so each character up to U+00FF is one byte."""
    try:
        data = raw.encode("latin-1")
    except UnicodeEncodeError:
        data = raw.encode("utf-8", "surrogatepass")
    return unquote_to_bytes(data)


def not_utf8(what: str, exc: UnicodeDecodeError) -> DomainError:
    return InvalidArgument(f"{what} is not valid UTF-8", offset=exc.start)


def query_refusal(event: dict[str, Any]) -> DomainError | None:
    """The query string (valid UTF-8) and the query and path parameters (no lone surrogate), or
    the refusal."""
    try:
        raw_query_bytes(str(event.get("rawQueryString") or "")).decode("utf-8")
    except UnicodeDecodeError as exc:
        return not_utf8("the query string", exc)
    for where in ("queryStringParameters", "pathParameters"):
        for name, value in (event.get(where) or {}).items():
            if bad_text(str(name)) or bad_text(str(value)):
                return InvalidArgument(SURROGATE)
    return None
