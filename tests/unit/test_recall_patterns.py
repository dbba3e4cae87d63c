"""Path patterns are RE2 (the reference's Go regexp): linear time, no backtracking constructs, bounded."""

from __future__ import annotations

import time

import pytest

from dovecote.platform.errors import InvalidArgument
from dovecote.recall.model import gate_search
from dovecote.recall.patterns import MAX_PATTERN_CHARS, MAX_PATTERN_PROGRAM, PATH_MAX, compile_path_pattern


def test_the_redos_reproduction_is_linear() -> None:
    """`(a+)+$` against `/aaa…!` took 5 s with 25 a's under a backtracking engine (113 s with 30)."""
    pattern = compile_path_pattern("(a+)+$", "include_path")
    assert pattern is not None
    started = time.perf_counter()
    for count in (25, 30, 4000):
        assert pattern.search("/" + "a" * count + "!") is False
    assert time.perf_counter() - started < 0.1
    assert pattern.search("/" + "a" * 30) is True


@pytest.mark.parametrize(
    "pattern",
    [
        r"(a)\1",  # backreference
        r"(?=a)b",  # look-ahead
        r"(?<!a)b",  # look-behind
        r"a++",  # possessive
        r"(?>a)",  # atomic group
        r"a{1001}",  # over Go's repeat limit
        "(",
    ],
)
def test_what_re2_refuses_is_invalid_argument(pattern: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        gate_search(q="x", include_path=pattern)
    assert caught.value.code == "invalid_argument"
    assert caught.value.details == {"field": "include_path", "syntax": "re2"}
    assert "RE2" in caught.value.message


def test_the_caps() -> None:
    assert compile_path_pattern("a" * MAX_PATTERN_CHARS, "exclude_path") is not None
    with pytest.raises(InvalidArgument) as long:
        gate_search(q="x", exclude_path="a" * (MAX_PATTERN_CHARS + 1))
    assert long.value.details["field"] == "exclude_path"
    with pytest.raises(InvalidArgument) as complex_:
        gate_search(q="x", include_path="(.*){1000}")
    assert complex_.value.details["field"] == "include_path"
    assert complex_.value.details["program_size"] > MAX_PATTERN_PROGRAM
    assert "too complex" in complex_.value.message


def test_go_semantics() -> None:
    """An unanchored search; `^`/`$` at the ends of the text; Perl classes are ASCII, as in Go."""

    def matches(pattern: str, directory: str) -> bool:
        compiled = compile_path_pattern(pattern, "include_path")
        assert compiled is not None
        return compiled.search(directory)

    assert matches("proj", "/home/me/project")
    assert not matches("^proj", "/home/me/project")
    assert matches(r"^/home/[^/]+/project$", "/home/me/project")
    assert not matches(r"^\d+$", "١٢٣")  # Arabic-Indic digits: Go's \d is ASCII (Python's is not)
    assert matches(r"(?i)PROJECT$", "/home/me/project")
    assert not matches("x$", "/a/x\n")  # `$` is the end of the text, not before a final newline (Python)


def test_a_directory_is_matched_on_path_max_characters() -> None:
    pattern = compile_path_pattern("b$", "include_path")
    assert pattern is not None
    assert pattern.search("a" * (PATH_MAX - 1) + "b")
    assert not pattern.search("a" * PATH_MAX + "b")


def test_the_gate_keeps_the_callers_spelling() -> None:
    params = gate_search(q="x", include_path="^/src", exclude_path="vendor")
    assert params.include_path is not None and params.include_path.source == "^/src"
    assert params.raw["include_path"] == "^/src" and params.raw["exclude_path"] == "vendor"
