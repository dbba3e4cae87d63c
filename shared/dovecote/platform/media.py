"""Media types: one definition of a storable media type, shared by notes, task message parts and
artifact payloads.

A small recursive-descent parser of RFC 9110 §8.3.1 rather than a regex: the grammar has
quoted-strings with quoted-pairs (`a="b\\"c"` is one parameter) and parameter names compare
case-insensitively, so `a=1; A=2` names one parameter twice (refused), which a regex cannot see.

    media-type = type "/" subtype parameters [ OWS ";" ]
    parameters = *( OWS ";" OWS parameter )
    parameter  = parameter-name "=" parameter-value
    parameter-value = ( token / quoted-string )

Two rules come from the reference (agent.go validates with Go's `mime.ParseMediaType`), where they
are narrower than RFC 9110:
- a value that differs from its whitespace-trimmed form is refused before it is parsed, so no
  whitespace at either end (`"text/plain "`, `"text/plain; "`);
- an empty parameter is allowed only as one trailing `;` (`text/plain;` is accepted, Go ignores it);
  `text/plain;;` and `text/plain; ;a=1` are refused.
"""

from __future__ import annotations

from dovecote.platform.errors import InvalidArgument

MAX_MEDIA_TYPE_BYTES = 128
_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_WS = " \t"


def _qdtext(char: str) -> bool:
    code = ord(char)
    return char in _WS or code == 0x21 or 0x23 <= code <= 0x5B or 0x5D <= code <= 0x7E or code >= 0x80


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def done(self) -> bool:
        return self.at >= len(self.text)

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def token(self) -> str:
        start = self.at
        while self.at < len(self.text) and self.text[self.at] in _TCHAR:
            self.at += 1
        if self.at == start:
            raise ValueError(f"a token was expected at {start}")
        return self.text[start : self.at]

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(f"{char!r} was expected at {self.at}")
        self.at += 1

    def ows(self) -> None:
        while self.peek() and self.peek() in _WS:
            self.at += 1

    def quoted_string(self) -> str:
        self.expect('"')
        out: list[str] = []
        while True:
            char = self.peek()
            if char == "":
                raise ValueError("an unterminated quoted-string")
            self.at += 1
            if char == '"':
                return "".join(out)
            if char == "\\":
                escaped = self.peek()
                if escaped == "" or not (escaped in _WS or 0x21 <= ord(escaped) <= 0x7E or ord(escaped) >= 0x80):
                    raise ValueError("a bad quoted-pair")
                self.at += 1
                out.append(escaped)
            elif (
                char in _WS
                or char == "!"
                or 0x23 <= ord(char) <= 0x5B
                or 0x5D <= ord(char) <= 0x7E
                or ord(char) >= 0x80
            ):
                out.append(char)
            else:
                raise ValueError(f"{char!r} cannot appear in a quoted-string")


def parse_media_type(value: str) -> tuple[str, str, dict[str, str]]:
    """(type, subtype, parameters) with lowercase type, subtype and parameter names; ValueError when
    the value is not a media type or names a parameter twice."""
    parser = _Parser(value)
    kind = parser.token().lower()
    parser.expect("/")
    subtype = parser.token().lower()
    parameters: dict[str, str] = {}
    while True:
        parser.ows()
        if parser.done():
            return kind, subtype, parameters
        parser.expect(";")
        parser.ows()
        if parser.done():
            return kind, subtype, parameters  # one trailing `;`: ignored, as the reference does
        name = parser.token().lower()
        parser.expect("=")
        parameter = parser.quoted_string() if parser.peek() == '"' else parser.token()
        if name in parameters:
            raise ValueError(f"parameter {name!r} appears twice")
        parameters[name] = parameter


def validate_media_type(value: str, *, field: str = "content_type") -> str:
    if len(value.encode("utf-8", "surrogatepass")) > MAX_MEDIA_TYPE_BYTES:
        raise InvalidArgument(f"{field} is longer than {MAX_MEDIA_TYPE_BYTES} bytes", field=field)
    if any(ch in value for ch in "\r\n\x00"):
        raise InvalidArgument(f"{field} is not a media type: it must not contain CR, LF or NUL", field=field)
    # The reference's first test: str.strip() trims what Go's strings.TrimSpace does (Unicode White_Space),
    # and also U+001C-U+001F, which neither side accepts at an end anyway (not a token character).
    if value != value.strip():
        raise InvalidArgument(f"{field} {value!r} is not a media type: no whitespace before or after it", field=field)
    try:
        parse_media_type(value)
    except ValueError as exc:
        raise InvalidArgument(
            f"{field} {value!r} is not a media type (type/subtype[; name=value]): {exc}", field=field
        ) from None
    return value


def is_textual(media_type: str) -> bool:
    essence = media_type.split(";", 1)[0].strip().lower()
    return essence.startswith("text/") or essence == "application/json" or essence.endswith("+json")


def text_of(media_type: str, data: bytes) -> str | None:
    """The bytes as the text Dovecote renders them as (a textual media type, valid UTF-8), or None:
    what every binding shows as text rather than bytes."""
    if not is_textual(media_type):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
