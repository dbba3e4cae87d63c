"""The order in which xdist hands test files to its workers: the slowest first.

`make test` runs `pytest -n 4 --dist loadfile --no-loadscope-reorder`: each file goes whole to one
worker, in collection order, as a worker frees up. Handing out the longest files first (longest
processing time first) keeps the workers' finishing times close; in file order, or xdist's own
order by test count, a slow file drawn last ran alone while the other worker sat idle (about a tenth
of the suite's wall time).

tests/schedule.txt holds one file per line, `seconds path`, from a whole run's `--durations=0`
output (setup, call and teardown summed per file). Regenerate it after a suite changes much:

    .venv/bin/python -m pytest -n 4 --dist loadfile --durations=0 -q > /tmp/durations.txt
    .venv/bin/python -m tests.support.schedule /tmp/durations.txt > tests/schedule.txt

A file it does not list (a new one) runs after the listed ones, in collection order.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

SCHEDULE = Path(__file__).resolve().parent.parent / "schedule.txt"
DURATION = re.compile(r"\s*([\d.]+)s (?:setup|call|teardown)\s+([^:\s]+)::")


def weights(path: Path = SCHEDULE) -> dict[str, float]:
    """File (relative to the repository) → its measured seconds."""
    if not path.is_file():
        return {}
    found: dict[str, float] = {}
    for line in path.read_text().splitlines():
        seconds, _, name = line.strip().partition(" ")
        if name and not line.startswith("#"):
            found[name.strip()] = float(seconds)
    return found


def from_durations(text: str) -> Counter[str]:
    totals: Counter[str] = Counter()
    for line in text.splitlines():
        match = DURATION.match(line)
        if match:
            totals[match.group(2)] += float(match.group(1))
    return totals


def main(argv: list[str]) -> None:
    totals = from_durations(Path(argv[0]).read_text())
    if not totals:
        raise SystemExit(f"no durations in {argv[0]}: run pytest with --durations=0")
    sys.stdout.write("# seconds per test file, slowest first (tests/support/schedule.py)\n")
    for name, seconds in totals.most_common():
        sys.stdout.write(f"{seconds:.1f} {name}\n")


if __name__ == "__main__":
    main(sys.argv[1:])
