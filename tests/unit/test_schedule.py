"""The suite's schedule (tests/support/schedule.py): per-file seconds from a --durations run, read back
as weights, slowest first."""

from __future__ import annotations

from pathlib import Path

from tests.support.schedule import SCHEDULE, from_durations, weights

DURATIONS = """
============================= slowest durations ==============================
12.50s call     tests/e2e/test_a.py::test_one[x]
0.50s setup    tests/e2e/test_a.py::test_one[x]
3.00s call     tests/unit/test_b.py::test_two
(8 durations < 0.005s hidden.  Use -vv to show these durations.)
"""


def test_durations_are_summed_per_file() -> None:
    assert from_durations(DURATIONS) == {"tests/e2e/test_a.py": 13.0, "tests/unit/test_b.py": 3.0}


def test_the_schedule_reads_back_and_lists_existing_files(tmp_path: Path) -> None:
    written = tmp_path / "schedule.txt"
    written.write_text("# a comment\n13.0 tests/e2e/test_a.py\n3.0 tests/unit/test_b.py\n")
    assert weights(written) == {"tests/e2e/test_a.py": 13.0, "tests/unit/test_b.py": 3.0}
    assert weights(tmp_path / "absent.txt") == {}
    committed = weights(SCHEDULE)
    assert committed and list(committed.values()) == sorted(committed.values(), reverse=True)
    root = SCHEDULE.parent.parent
    assert sum((root / name).is_file() for name in committed) >= 0.9 * len(committed)
