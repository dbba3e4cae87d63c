"""Ref: the shared test vectors, and injectivity across field boundaries (hypothesis)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dovecote.notes.model import note_ref, ref_preimage
from tests.conftest import DATA

# The reference's Ref vectors, committed with the tests (tests/data).
VECTORS = json.loads((DATA / "note-ref-vectors.json").read_text())["vectors"]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: f"{v['key']!r}/{v['run']}/{v['name']!r}/{v['author']!r}")
def test_ref_matches_the_shared_vectors(vector: dict) -> None:
    assert note_ref(vector["key"], vector["run"], vector["name"], vector["author"]) == vector["ref"]


def test_vectors_file_is_not_empty() -> None:
    assert len(VECTORS) >= 10


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (("k", 1, "a", "bc"), ("k", 1, "ab", "c")),
        (("a", 1, "\x00b", ""), ("a\x00", 1, "b", "")),
        (("a/b", 1, "n", ""), ("a", 1, "b/c", "")),
        (("a/b", 1, "n", ""), ("a", 1, "b%2Fc", "")),
        (("a/b", 1, "n", ""), ("a%b", 1, "n", "")),
        (("a", 1, "bc", ""), ("ab", 1, "c", "")),
    ],
)
def test_boundary_shifts_give_different_refs(a: tuple, b: tuple) -> None:
    assert note_ref(*a) != note_ref(*b)


coordinate = st.text(max_size=12)
runs = st.integers(min_value=1, max_value=2**63 - 1)


@given(coordinate, runs, coordinate, coordinate, coordinate, runs, coordinate, coordinate)
def test_ref_is_injective(k1: str, r1: int, n1: str, a1: str, k2: str, r2: int, n2: str, a2: str) -> None:
    # Injective preimage ⇒ distinct coordinates get distinct Refs (up to SHA-256 collisions).
    if (k1, r1, n1, a1) != (k2, r2, n2, a2):
        assert ref_preimage(k1, r1, n1, a1) != ref_preimage(k2, r2, n2, a2)
        assert note_ref(k1, r1, n1, a1) != note_ref(k2, r2, n2, a2)
    else:
        assert note_ref(k1, r1, n1, a1) == note_ref(k2, r2, n2, a2)


@given(st.lists(st.text(max_size=6), min_size=4, max_size=4), st.integers(0, 3), st.integers(1, 3))
def test_moving_bytes_across_a_boundary_changes_the_ref(fields: list[str], at: int, shift: int) -> None:
    key, name, author = fields[0], fields[1], fields[2]
    joined = key + name
    cut = min(len(joined), max(0, len(key) + shift))
    moved = (joined[:cut], joined[cut:])
    if moved != (key, name):
        assert note_ref(key, 1, name, author) != note_ref(moved[0], 1, moved[1], author)
