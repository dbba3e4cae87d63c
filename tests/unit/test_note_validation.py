"""The one Put gate, in the reference order, as a table."""

from __future__ import annotations

import base64

import pytest

from dovecote.notes.limits import INLINE_LIMIT
from dovecote.notes.model import NoteCoordinates, NoteFilter, list_limit
from dovecote.notes.service import BINARY_DEFAULT, TEXT_DEFAULT, PutNote, gate_put
from dovecote.platform.errors import InvalidArgument, PayloadTooLarge

SHA = "a" * 64


@pytest.mark.parametrize(
    ("request_", "error", "message"),
    [
        (PutNote(key="", run=0, name=""), InvalidArgument, "Note.Key is required"),
        (PutNote(key="", run=1, name="n"), InvalidArgument, "Note.Key is required"),
        (PutNote(key="k", run=0, name=""), InvalidArgument, "Note.Name is required"),
        (PutNote(key="k", run=0, name="n"), InvalidArgument, "Note.Run must be >= 1, got 0"),
        (PutNote(key="k", run=-1, name="n"), InvalidArgument, "Note.Run must be >= 1, got -1"),
        (PutNote(key="k", run=2**53, name="n"), InvalidArgument, "Note.Run must be <= 9007199254740991"),
        (PutNote(key="k" * 1025, run=1, name="n"), InvalidArgument, "Note.Key is 1025 bytes"),
        (PutNote(key="k", run=1, name="n", author="é" * 513), InvalidArgument, "Note.Author is 1026 bytes"),
        (PutNote(key="k", run=1, name="n", text="x", body_b64="eA=="), InvalidArgument, "either text or body_b64"),
        (PutNote(key="k", run=1, name="n", body_b64="not base64!"), InvalidArgument, "not valid base64"),
        (PutNote(key="k", run=1, name="n", body_b64="eA="), InvalidArgument, "not valid base64"),
        (PutNote(key="k", run=1, name="n", text="x" * (INLINE_LIMIT + 1)), PayloadTooLarge, "inline bodies"),
        (
            PutNote(key="k", run=1, name="n", body_b64=base64.b64encode(b"x" * (INLINE_LIMIT + 3)).decode()),
            PayloadTooLarge,
            "inline bodies",
        ),
        (PutNote(key="k", run=1, name="n", text="x", content_type="nonsense"), InvalidArgument, "not a media type"),
        (PutNote(key="k", run=1, name="n", text="x", content_type="text/plain\r\nX: y"), InvalidArgument, "media type"),
        (PutNote(key="k", run=1, name="n", upload=True), InvalidArgument, "sha256 must be 64 hex"),
        (PutNote(key="k", run=1, name="n", upload=True, sha256=SHA, text="x"), InvalidArgument, "no inline body"),
    ],
)
def test_gate_rejects_in_reference_order(request_: PutNote, error: type, message: str) -> None:
    with pytest.raises(error) as caught:
        gate_put(request_)
    assert message in caught.value.message


@pytest.mark.parametrize(
    ("request_", "content_type", "body"),
    [
        (PutNote(key="k", run=1, name="n"), TEXT_DEFAULT, b""),
        (PutNote(key="k", run=1, name="n", text="héllo"), TEXT_DEFAULT, "héllo".encode()),
        (PutNote(key="k", run=1, name="n", body_b64="AAE="), BINARY_DEFAULT, b"\x00\x01"),
        (PutNote(key="k", run=1, name="n", text="{}", content_type="application/json"), "application/json", b"{}"),
        (PutNote(key="k", run=1, name="n", text="x" * INLINE_LIMIT), TEXT_DEFAULT, b"x" * INLINE_LIMIT),
        # An upload commit that names no type keeps the one its upload URL was signed for ("").
        (PutNote(key="k", run=1, name="n", upload=True, sha256=SHA), "", None),
    ],
)
def test_gate_accepts_and_defaults_the_content_type(request_: PutNote, content_type: str, body: bytes | None) -> None:
    coordinates, got_type, got_body = gate_put(request_)
    assert coordinates == NoteCoordinates("k", 1, "n", "")
    assert got_type == content_type
    assert got_body == body


def test_author_is_optional_and_empty_is_the_shared_scope() -> None:
    assert NoteCoordinates("k", 1, "n").validate().author == ""


@pytest.mark.parametrize(("limit", "expected"), [(None, 1000), (0, 1000), (1, 1), (1000, 1000)])
def test_list_limit_defaults(limit: int | None, expected: int) -> None:
    assert list_limit(limit) == expected


@pytest.mark.parametrize("limit", [-1, 1001])
def test_list_limit_out_of_range_is_invalid(limit: int) -> None:
    with pytest.raises(InvalidArgument):
        list_limit(limit)


def test_filter_author_has_three_states() -> None:
    shared, claude = NoteCoordinates("k", 1, "n", ""), NoteCoordinates("k", 1, "n", "claude")
    assert NoteFilter(author=None).matches(shared) and NoteFilter(author=None).matches(claude)
    assert NoteFilter(author="").matches(shared) and not NoteFilter(author="").matches(claude)
    assert NoteFilter(author="claude").matches(claude) and not NoteFilter(author="claude").matches(shared)


def test_filter_digest_tells_absent_author_from_empty_author() -> None:
    assert NoteFilter(author=None).digest() != NoteFilter(author="").digest()
    assert NoteFilter(key="a", name="bc").digest() != NoteFilter(key="ab", name="c").digest()


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("text/plain", True),
        ("text/plain; charset=utf-8", True),
        ('text/plain; a="b\\"c"', True),  # an escaped quote inside a quoted-string (RFC 9110)
        ('text/plain; a="b;c"', True),
        ("text/plain;", True),
        ("text/plain; a=1; a=2", False),  # a parameter twice
        ("text/plain; a=1; A=2", False),  # names compare case-insensitively
        ('text/plain; a="unterminated', False),
        ("text/plain; a", False),
        ("text", False),
        ("text/", False),
        ("/plain", False),
        ("text/plain; a=b c", False),
    ],
)
def test_media_types_are_parsed_per_rfc_9110(value: str, ok: bool) -> None:
    from dovecote.platform.errors import InvalidArgument
    from dovecote.platform.media import validate_media_type

    if ok:
        assert validate_media_type(value) == value
    else:
        with pytest.raises(InvalidArgument):
            validate_media_type(value)
