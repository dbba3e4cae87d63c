"""The benchmark page is the bench's (issue 35): docs/benchmarks/index.md is exactly what
bench/docs_page.py renders from docs/benchmarks/figures.json, so a figure pasted or edited by hand fails
here; and a run of some sections replaces those and keeps the others."""

from __future__ import annotations

import json
from pathlib import Path

from bench.docs_page import DATA, PAGE, TITLES, render, update


def test_the_page_is_the_rendered_figures() -> None:
    assert PAGE.read_text() == render(json.loads(DATA.read_text())), "run `python -m bench.docs_page`"


def test_a_run_replaces_its_sections_and_keeps_the_others(tmp_path: Path) -> None:
    data, page = tmp_path / "figures.json", tmp_path / "index.md"
    first = {"python": "3.11.7", "when": "2026-01-01T00:00:00Z", "round_trips": {"get": 1}, "cost": {"x": 1.5}}
    update(first, quick=True, data=data, page=page)
    second = {"python": "3.12.1", "when": "2026-02-01T00:00:00Z", "cost": {"x": 2.25}}
    update(second, quick=False, data=data, page=page)
    figures = json.loads(data.read_text())
    assert figures["round_trips"]["when"] == "2026-01-01T00:00:00Z" and figures["round_trips"]["quick"] is True
    assert figures["cost"] == {
        "when": "2026-02-01T00:00:00Z",
        "quick": False,
        "python": "3.12.1",
        "figures": {"x": 2.25},
    }
    shown = page.read_text()
    assert f"## {TITLES['round_trips']}" in shown and "| get | 1 |" in shown and "| x | 2.25 |" in shown
    assert "`imports`" in shown  # what was never measured is named, not hidden


def test_every_shape_renders(tmp_path: Path) -> None:
    report = {
        "python": "3.11.7",
        "when": "2026-01-01T00:00:00Z",
        "local_runtime": {"put": {"n": 3, "median_ms": 41.04, "p95_ms": 80.7, "per_s": 21.2}},
        "dispatcher": [{"open": 100, "queries": 8}, {"open": 1000, "queries": 8}],
        "claims": {"deep": {"deeper": {"deepest": {"value": [1, 2, {"x": [1]}]}}}, "tuple": (1, 2)},
    }
    page = tmp_path / "index.md"
    update(report, quick=True, data=tmp_path / "figures.json", page=page)
    shown = page.read_text()
    assert "| put | 3 | 41.04 | 80.70 | 21.20 |" in shown
    assert "| 1,000 | 8 |" in shown and "1, 2" in shown
