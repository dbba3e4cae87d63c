"""The media type grammar (platform/media.py), one table: the reference's answers (Go's
`mime.ParseMediaType` after a trim check, agent.go) where RFC 9110 would say otherwise, and RFC
9110's where both agree. Every storable media type goes through this one gate: notes, message
parts, artifact payloads (checked below through each)."""

from __future__ import annotations

import pytest

from dovecote.platform.errors import InvalidArgument
from dovecote.platform.media import parse_media_type, validate_media_type

ACCEPTED = [
    "text/plain",
    "TEXT/Plain",
    "application/vnd.dovecote+json",
    "text/plain; charset=utf-8",
    "text/plain;charset=utf-8",
    "text/plain ;charset=utf-8",  # whitespace before the `;` is OWS, inside the value
    'text/plain; a="b\\"c"',  # an escaped quote inside a quoted-string
    'text/plain; a="b;c"',
    'text/plain; a=" padded "',  # whitespace inside a quoted-string is data, not an end
    "text/plain;",  # one trailing `;`: the reference ignores it
    "text/plain; a=1;",
    "text/plain; a=1 ;",
]

REFUSED = [
    # The reference refuses any value that differs from its trimmed form (issue 15 item 8).
    "text/plain ",
    "text/plain\t",
    "text/plain; charset=utf-8 ",
    "text/plain; charset=utf-8\t",
    "text/plain; ",
    "text/plain;\t",
    " text/plain",
    "\ttext/plain",
    "text/plain\u00a0",  # no-break space: Unicode White_Space, trimmed by Go's strings.TrimSpace
    "text/plain\u2003",
    "\u3000text/plain",
    "text/plain\n",
    "text/plain\r\nX-Injected: 1",
    # An empty parameter anywhere but at the end (Go: ErrInvalidMediaParameter).
    "text/plain;;",
    "text/plain; ;",
    "text/plain;;a=1",
    "text/plain; ;a=1",
    # RFC 9110 and the reference agree on these.
    "text/plain; a=1; a=2",  # a parameter twice
    "text/plain; a=1; A=2",  # names compare case-insensitively
    'text/plain; a="unterminated',
    "text/plain; a",
    "text/plain; =b",
    "text",
    "text/",
    "/plain",
    "",
    "text/plain; a=b c",
    "text/plain\x00",
    "text/" + "x" * 124,  # 129 bytes: over the 128-byte limit
]


@pytest.mark.parametrize("value", ACCEPTED)
def test_accepted_media_types(value: str) -> None:
    assert validate_media_type(value) == value  # stored exactly as given


@pytest.mark.parametrize("value", REFUSED)
def test_refused_media_types(value: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        validate_media_type(value, field="media_type")
    assert refused.value.details.get("field") == "media_type"


def test_the_trailing_semicolon_adds_no_parameter() -> None:
    assert parse_media_type("text/plain;") == ("text", "plain", {})
    assert parse_media_type('Text/Plain; A="x y";') == ("text", "plain", {"a": "x y"})


@pytest.mark.parametrize("value", ["text/plain ", "text/plain; ", "text/plain;;"])
def test_every_gate_refuses_them(value: str) -> None:
    """Notes, task message parts and artifact payloads share the one definition."""
    from dovecote.a2a.mapping import MessageBody, PartBody
    from dovecote.notes.service import PutNote, gate_put
    from dovecote.tasks import inputs

    with pytest.raises(InvalidArgument, match="media type"):
        gate_put(PutNote(key="k", run=1, name="n", text="x", content_type=value))
    with pytest.raises(InvalidArgument, match="media type"):
        inputs.message(MessageBody("m1", (PartBody(value, text="x"),)))
    with pytest.raises(InvalidArgument, match="media type"):
        inputs.payload(PartBody(value, text="x"), 1024)  # type: ignore[arg-type]
    assert gate_put(PutNote(key="k", run=1, name="n", text="x", content_type="text/plain;"))[1] == "text/plain;"
