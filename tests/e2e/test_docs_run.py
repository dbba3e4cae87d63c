"""The manual runs (issue 35): every `sh` and `python` block of each page under docs/, in order,
against a `dovecote dev` of the page's own (a reader may open any page first, so none leans on
another's state), exactly as tests/e2e/test_readme.py runs the README (tests/support/runbook.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.e2e.conftest import start_dev
from tests.support.runbook import Block, Reader, read_blocks, shape_problems, skip_reason

DOCS = ROOT / "docs"
PAGES = {page.relative_to(ROOT).as_posix(): read_blocks(page) for page in sorted(DOCS.rglob("*.md"))}
RUNNABLE = [page for page, blocks in PAGES.items() if any(b.runs for b in blocks)]
NOT_RUN = [block for blocks in PAGES.values() for block in blocks if block.not_run is not None]
# The `dovecote dev` options a page tells its reader to start with (in a not-run block of its own).
DEV_OPTIONS = {"docs/guides/webhooks.md": ("--allow-loopback-webhooks",)}


def test_every_block_of_the_manual_is_run_or_says_why() -> None:
    problems = [problem for blocks in PAGES.values() for problem in shape_problems(blocks)]
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
    assert RUNNABLE, "no page of the manual has a block to run"


@pytest.mark.parametrize("block", NOT_RUN, ids=[f"{b.page}:{b.fence}" for b in NOT_RUN])
def test_what_the_docs_test_does_not_run(block: Block) -> None:
    """Reported, not dropped: each block a page marks shows as a skip with its reason."""
    assert block.not_run and block.lines
    pytest.skip(reason=skip_reason(block))


@pytest.mark.parametrize("page", RUNNABLE)
def test_the_page_runs(page: str, tmp_path: Path) -> None:
    blocks = PAGES[page]
    runtime_dir = tmp_path / "runtime"
    runtime_dir.mkdir()
    with start_dev(runtime_dir, *DEV_OPTIONS.get(page, ())) as runtime:
        ran = Reader(tmp_path, runtime).run_page(blocks)
    assert ran >= len([b for b in blocks if b.runs])
