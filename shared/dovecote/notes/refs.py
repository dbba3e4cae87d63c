"""A note's ref: the primary key any agent computes from the coordinates alone (docs/design/notes.md).
Kept apart from dovecote.notes.model, which re-exports it, so that the SDK and the CLI need neither
its dataclasses nor its gates."""

from __future__ import annotations

import hashlib
import struct


def _field(value: bytes) -> bytes:
    return struct.pack(">Q", len(value)) + value


def ref_preimage(key: str, run: int, name: str, author: str) -> bytes:
    """Length-prefixing makes the encoding injective for all inputs: a boundary comes from the
    lengths, never from the content, so no coordinate can shift bytes across a boundary."""
    return (
        _field(key.encode("utf-8"))
        + struct.pack(">Q", run & 0xFFFFFFFFFFFFFFFF)
        + _field(name.encode("utf-8"))
        + _field(author.encode("utf-8"))
    )


def note_ref(key: str, run: int, name: str, author: str) -> str:
    """The note's primary key, computable by any agent from the coordinates alone."""
    return hashlib.sha256(ref_preimage(key, run, name, author)).hexdigest()


def is_ref(value: str) -> bool:
    return len(value) == 64 and all(c in "0123456789abcdef" for c in value)
