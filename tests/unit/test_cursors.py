"""Signed cursors: tampering, another filter and another authority are all invalid_argument."""

from __future__ import annotations

import pytest

from dovecote.platform.cursors import CursorSigner
from dovecote.platform.errors import InvalidArgument

signer = CursorSigner(b"k" * 32)


def test_round_trip() -> None:
    cursor = signer.seal(authority="acme", scope="notes:f1", position={"after": "ab"})
    assert signer.open(cursor, authority="acme", scope="notes:f1") == {"after": "ab"}


def test_tampered_payload_is_refused() -> None:
    cursor = signer.seal(authority="acme", scope="notes:f1", position={"after": "ab"})
    payload, mac = cursor.split(".")
    forged = CursorSigner(b"x" * 32).seal(authority="acme", scope="notes:f1", position={"after": "zz"}).split(".")[0]
    for bad in (
        forged + "." + mac,
        payload[:-2] + "AA." + mac,
        payload + "." + mac[:-2] + "AA",
        "garbage",
        "",
        "a.b.c",
    ):
        with pytest.raises(InvalidArgument, match="malformed or was not issued"):
            signer.open(bad, authority="acme", scope="notes:f1")


def test_another_filter_is_refused() -> None:
    cursor = signer.seal(authority="acme", scope="notes:f1", position={"after": "ab"})
    with pytest.raises(InvalidArgument, match="different filter"):
        signer.open(cursor, authority="acme", scope="notes:f2")


def test_another_authority_is_refused() -> None:
    cursor = signer.seal(authority="acme", scope="notes:f1", position={"after": "ab"})
    with pytest.raises(InvalidArgument, match="another authority"):
        signer.open(cursor, authority="globex", scope="notes:f1")


def test_another_key_is_refused() -> None:
    cursor = signer.seal(authority="acme", scope="notes:f1", position={"after": "ab"})
    with pytest.raises(InvalidArgument):
        CursorSigner(b"y" * 32).open(cursor, authority="acme", scope="notes:f1")


def test_short_keys_are_refused() -> None:
    with pytest.raises(ValueError):
        CursorSigner(b"short")
