"""Path patterns (`include_path`, `exclude_path`): RE2, the reference's dialect (Go's `regexp` is RE2).

A pattern comes from the caller and runs against working directories the caller itself ingested,
so a backtracking engine would let one request spend exponential time (`(a+)+$` against
`/aaaa…!`). RE2 matches in time linear in the subject and refuses what needs backtracking
(backreferences, look-around), as Go does. Semantics are Go's `regexp.MatchString`: an unanchored
search, leftmost-first, `^`/`$` at the ends of the text unless `(?m)`, UTF-8.

Bounds, so the linear factor stays small:
- the pattern is at most MAX_PATTERN_CHARS characters (the gate's text cap);
- its compiled program is at most MAX_PATTERN_PROGRAM instructions (RE2's own size measure, the
  factor in the worst case of a match); a larger one is refused as too complex;
- a directory is matched on at most PATH_MAX characters (no working directory is longer).
RE2 errors are never logged by the engine (the pattern is the caller's text); the gate reports them.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from dovecote.platform.errors import InvalidArgument

MAX_PATTERN_CHARS = 500
MAX_PATTERN_PROGRAM = 2000
PATH_MAX = 4096
SYNTAX = "RE2 (Go regexp) syntax"


@cache
def _re2() -> tuple[Any, Any]:
    """The binding and its options, loaded on the first pattern (15 ms of import a cold start that
    has no pattern does not pay)."""
    import re2

    options = re2.Options()
    options.log_errors = False  # the default writes the caller's pattern to stderr
    return re2, options


class PathPattern:
    """A compiled path pattern. `source` is the caller's spelling (for next_command)."""

    __slots__ = ("_regexp", "source")

    def __init__(self, source: str, regexp: Any) -> None:
        self.source = source
        self._regexp = regexp

    def search(self, directory: str) -> bool:
        return self._regexp.search(directory[:PATH_MAX]) is not None

    def __repr__(self) -> str:
        return f"PathPattern({self.source!r})"


def compile_path_pattern(value: str, field_name: str) -> PathPattern | None:
    """The gate of one path pattern: "" is no filter; otherwise valid RE2 within the bounds, or
    `invalid_argument` naming the field."""
    if not value:
        return None
    if len(value) > MAX_PATTERN_CHARS:
        raise InvalidArgument(
            f"{field_name} is longer than {MAX_PATTERN_CHARS} characters", field=field_name, limit=MAX_PATTERN_CHARS
        )
    re2, options = _re2()
    try:
        regexp = re2.compile(value, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "invalid"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise InvalidArgument(
            f"{field_name} is not a valid regular expression in {SYNTAX}: {reason}", field=field_name, syntax="re2"
        ) from None
    if regexp.programsize > MAX_PATTERN_PROGRAM:
        raise InvalidArgument(
            f"{field_name} is too complex: its RE2 program has {regexp.programsize} instructions, over "
            f"{MAX_PATTERN_PROGRAM}; simplify the pattern (fewer or smaller repetitions)",
            field=field_name,
            program_size=regexp.programsize,
            limit=MAX_PATTERN_PROGRAM,
        )
    return PathPattern(value, regexp)
