"""No source file over 800 lines (Python, and the console's scripts): a file that long holds more than
one home, and a reviewer reads it in pieces. Measured over what git tracks, tests included."""

from __future__ import annotations

import subprocess

from tests.conftest import ROOT

LIMIT = 800
SUFFIXES = (".py", ".js", ".jsx", ".mjs")


def test_no_source_file_is_over_800_lines() -> None:
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    paths = [p for p in tracked.decode().split("\0") if p.endswith(SUFFIXES) and (ROOT / p).is_file()]
    assert len(paths) > 300, "git ls-files found too few files to be this checkout"
    long = {p: n for p in paths if (n := len((ROOT / p).read_bytes().splitlines())) > LIMIT}
    assert long == {}, f"split these (at most {LIMIT} lines each): {long}"
