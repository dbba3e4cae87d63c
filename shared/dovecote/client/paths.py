"""The one way the SDK (and the CLI and MCP server through it) builds a request path.

Ids, refs and names reaching the SDK are untrusted: a model may pass `../admin/tokens/<id>` as a
note ref after reading hostile text. So every segment is percent-encoded whole
(`quote(segment, safe="")`): `?`, `#`, `%`, spaces and any other character stay inside the segment
and cannot start a query, a fragment or another segment.

Three segments cannot be sent at all, and are refused before any request (a `DovecoteError` with
status 0 and code `invalid_argument`):
- one that holds a `/`: API Gateway HTTP APIs decode the path before they match routes (as reported
  for HTTP APIs; AWS documents only that parameters reach the integration decoded), so even as `%2F`
  a slash would split the segment there. No id, ref or session the API accepts holds one (recall
  spells its level separator `~` in paths for this reason);
- `.` and `..`: HTTP clients (httpx among them) resolve them before sending, and no id is either;
- the empty one, which would name the collection instead of an item.
A value that is neither text nor a whole number (None, a bool, a float) is refused the same way
rather than sent as its `str()` (`"None"` would ask for an item of that name).
"""

from __future__ import annotations

from urllib.parse import quote

from dovecote.client.errors import INVALID_ARGUMENT, DovecoteError

API_PREFIX = "/v1"
UNSENDABLE = ("", ".", "..")


def segment(value: object) -> str:
    """One path segment, percent-encoded; refuses what no route can carry (see the module docstring)."""
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise DovecoteError(
            0,
            INVALID_ARGUMENT,
            f"{value!r} cannot be a segment of a request path: it is a {type(value).__name__}, not text",
            {"segment": repr(value), "reason": "not text"},
        )
    text = str(value)
    if text in UNSENDABLE or "/" in text:
        reason = "it holds a '/'" if "/" in text else "it is empty" if not text else "it is a dot segment"
        raise DovecoteError(
            0,
            INVALID_ARGUMENT,
            f"{text!r} cannot be one segment of a request path: {reason}",
            {"segment": text, "reason": reason},
        )
    try:
        return quote(text, safe="")
    except UnicodeEncodeError:
        raise DovecoteError(
            0,
            INVALID_ARGUMENT,
            f"{text!r} is not valid Unicode (it holds a lone surrogate)",
            {"segment": text, "reason": "lone surrogate"},
        ) from None


def path(*segments: object) -> str:
    """`/v1/<seg>/<seg>/…`, every segment encoded: `path("tasks", task_id, "reply")`."""
    return API_PREFIX + "".join("/" + segment(s) for s in segments)


__all__ = ["API_PREFIX", "path", "segment"]
