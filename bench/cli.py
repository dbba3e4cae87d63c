"""How fast the `dovecote` command answers: `python -m bench.cli`, or `cli_report()` from bench/__main__.

Each command runs as a new process, the way a shell or an agent runs it, nine times (median), beside
`python -c pass` (the interpreter's own start, the floor no command can beat):
- `dovecote --version`: the console script's fast path (goal ≤ 100 ms);
- `dovecote notes get REF` against `dovecote dev` (in its own process): an inline note's body on stdout,
  the command agents run most (goal ≤ 250 ms);
- `dovecote notes get REF --json` and `dovecote --help`, for comparison.

Wall time is what a user waits; the CPU time (user + system of the child) is reported beside it, since it
moves less when other work shares the machine. The load average at the start is part of the report. A
first run of each command writes its bytecode (a user's install has it; PYTHONDONTWRITEBYTECODE is
dropped for the children), and is not counted.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
RUNS = 9
DOVECOTE = Path(sys.executable).with_name("dovecote")
GOALS_MS = {"dovecote --version": 100.0, "dovecote notes get REF": 250.0}


@contextmanager
def _own_config() -> Iterator[None]:
    """The runtime's `dev` profiles go to a temporary config, never the user's."""
    with tempfile.TemporaryDirectory(prefix="bench-cli-config-") as folder:
        old = os.environ.get("XDG_CONFIG_HOME")
        os.environ["XDG_CONFIG_HOME"] = folder
        try:
            yield
        finally:
            if old is None:
                os.environ.pop("XDG_CONFIG_HOME", None)
            else:
                os.environ["XDG_CONFIG_HOME"] = old


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """One process: (wall seconds, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=tempfile.gettempdir(), capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _measure(commands: dict[str, list[str]], env: dict[str, str], runs: int) -> dict[str, dict[str, float]]:
    """Every command once to warm up, then `runs` rounds, interleaved so load hits all alike."""
    for argv in commands.values():
        _run(argv, env)
    samples: dict[str, list[tuple[float, float]]] = {label: [] for label in commands}
    for _ in range(runs):
        for label, argv in commands.items():
            samples[label].append(_run(argv, env))
    return {
        label: {
            "n": len(rows),
            "median_ms": statistics.median(wall for wall, _ in rows) * 1000,
            "min_ms": min(wall for wall, _ in rows) * 1000,
            "cpu_median_ms": statistics.median(cpu for _, cpu in rows) * 1000,
        }
        for label, rows in samples.items()
    }


def _ready(endpoint: str) -> None:
    """The tokens file comes first; wait until the API answers too."""
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(endpoint + "/v1/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def cli_report(quick: bool = False, runs: int = RUNS) -> dict[str, Any]:
    from bench.workers import DevProcess

    load = os.getloadavg()
    with _own_config():
        dev = DevProcess()
    try:
        _ready(dev.endpoint)
        token = dev.tokens["caller"]
        note = httpx.put(
            dev.endpoint + "/v1/notes",
            json={"key": "bench:cli", "run": 1, "name": "plan", "text": "a short plan\n"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        note.raise_for_status()
        ref = note.json()["ref"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_") and k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"DOVECOTE_ENDPOINT": dev.endpoint, "DOVECOTE_TOKEN": token}
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "dovecote --version": [str(DOVECOTE), "--version"],
            "dovecote notes get REF": [str(DOVECOTE), "notes", "get", ref],
            "dovecote notes get REF --json": [str(DOVECOTE), "notes", "get", ref, "--json"],
            "dovecote --help": [str(DOVECOTE), "--help"],
        }
        figures = _measure(commands, env, runs)
    finally:
        dev.close()
    floor = figures["python -c pass"]["median_ms"]
    for label, row in figures.items():
        row["minus_floor_ms"] = row["median_ms"] - floor
        if label in GOALS_MS:
            row["goal_ms"] = GOALS_MS[label]
    return {"load_average": [round(x, 2) for x in load], "runs": runs, "commands": figures}


def print_report(report: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    table = Table("command", "n", "median ms", "min ms", "− python ms", "CPU ms", "goal ms")
    for label, row in report["commands"].items():
        goal = f"≤ {row['goal_ms']:.0f}" if "goal_ms" in row else ""
        table.add_row(
            label,
            str(row["n"]),
            f"{row['median_ms']:.0f}",
            f"{row['min_ms']:.0f}",
            f"{row['minus_floor_ms']:+.0f}",
            f"{row['cpu_median_ms']:.0f}",
            goal,
        )
    console.print(table)
    load = ", ".join(f"{x:.2f}" for x in report["load_average"])
    console.print(f"load average at the start (1, 5, 15 min): {load}")


if __name__ == "__main__":
    import json

    result = cli_report(quick="--quick" in sys.argv)
    print_report(result)
    print(json.dumps(result, indent=2))
