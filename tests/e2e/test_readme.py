"""The README runs (issue 16): every `sh` and `python` block of README.md, in order, against a
`dovecote dev` of its own on a free port, found the way a reader's CLI finds it after `make dev`.
The machinery and its conventions (`<name>` placeholders, `not-run="why"` in a fence) are
tests/support/runbook.py's; tests/e2e/test_docs_run.py runs the manual's pages the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.e2e.conftest import start_dev
from tests.support.runbook import Block, Reader, read_blocks, shape_problems, skip_reason

README = ROOT / "README.md"
BLOCKS = read_blocks(README)
NOT_RUN = [block for block in BLOCKS if block.not_run is not None]
README_LINES = 250  # the front door (issue 35): the rest is the manual's


def test_every_block_is_run_or_says_why() -> None:
    problems = shape_problems(BLOCKS)
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
    assert [b for b in BLOCKS if b.runs], "the README has no block to run"


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_LINES
    # It opens with the two commands, and says how to read the manual.
    first = BLOCKS[0]
    assert first.fence == 3 and [line.split()[:2] for line in first.lines] == [["make", "dev"], ["make", "test"]]
    assert "`make docs`" in text


@pytest.mark.parametrize("block", NOT_RUN, ids=[f"README.md:{b.fence}" for b in NOT_RUN])
def test_what_the_readme_test_does_not_run(block: Block) -> None:
    """Reported, not dropped: each block the README marks shows as a skip with its reason."""
    assert block.not_run and block.lines
    pytest.skip(reason=skip_reason(block))


def test_the_readme_runs(tmp_path: Path) -> None:
    runtime_dir = tmp_path / "runtime"
    runtime_dir.mkdir()
    with start_dev(runtime_dir) as runtime:
        ran = run(tmp_path, runtime, BLOCKS)
    assert ran >= len([b for b in BLOCKS if b.runs])


def run(tmp_path: Path, runtime: dict[str, Any], blocks: list[Block]) -> int:
    return Reader(tmp_path, runtime).run_page(blocks)
