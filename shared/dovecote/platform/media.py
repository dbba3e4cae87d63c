"""Media types: one definition of a storable media type, shared by notes and task message parts."""

from __future__ import annotations

import re

from dovecote.platform.errors import InvalidArgument

MAX_MEDIA_TYPE_BYTES = 128
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"  # noqa: S105 (an RFC 7230 token pattern, not a secret)
_MEDIA_TYPE = re.compile(rf"^{_TOKEN}/{_TOKEN}(\s*;\s*{_TOKEN}=(?:{_TOKEN}|\"[^\"]*\"))*$")


def validate_media_type(value: str, *, field: str = "content_type") -> str:
    if len(value.encode("utf-8")) > MAX_MEDIA_TYPE_BYTES:
        raise InvalidArgument(f"{field} is longer than {MAX_MEDIA_TYPE_BYTES} bytes", field=field)
    if any(ch in value for ch in "\r\n\x00") or not _MEDIA_TYPE.match(value):
        raise InvalidArgument(f"{field} {value!r} is not a media type (type/subtype[; k=v])", field=field)
    return value


def is_textual(media_type: str) -> bool:
    essence = media_type.split(";", 1)[0].strip().lower()
    return essence.startswith("text/") or essence == "application/json" or essence.endswith("+json")
