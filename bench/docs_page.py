"""The manual's benchmark page, written by `make bench` (issue 35): the figures of the run just made,
never pasted by hand.

`python -m bench` passes its report here when it ends. Each section it ran replaces that section in
docs/benchmarks/figures.json (with the run's time, whether it was `--quick`, and the Python), so a run
of one section (`make bench ARGS="--only cost"`) keeps the others' last figures; then
docs/benchmarks/index.md is rendered from that file alone. tests/unit/test_bench_docs_page.py holds the
page to the file, so an edit by hand fails the suite. `python -m bench.docs_page` re-renders the page
from the file without measuring anything.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from bench.common import ROOT

DATA = ROOT / "docs" / "benchmarks" / "figures.json"
PAGE = ROOT / "docs" / "benchmarks" / "index.md"
META = ("python", "when")  # the report's own fields, not sections
# The report's keys (bench/__main__.py SECTIONS), in the order the page shows them, with their titles.
TITLES = {
    "round_trips": "AWS round trips per command",
    "imports": "Handler import time against `import boto3`",
    "cold_start": "Cold start: import and first request against the floor",
    "cold_start_tracing": "Cold start with X-Ray subsegments on",
    "local_runtime": "Latency and throughput against the local runtime",
    "cost": "Cost per million commands",
    "recall": "Recall: ingest, search, read and outline; retrieval quality per ranker",
    "recall_dev": "Recall on real conversations: agreement with the held-out table",
    "semantic": "Recall's semantic tier",
    "memory": "Memory: round trips, detection cost, writes per second",
    "workers": "An SDK worker's requests per minute",
    "mcp": "MCP against the SDK's direct call",
    "devstart": "`dovecote dev --data` start time",
    "devidle": "`dovecote dev` at rest",
    "dispatcher": "The lease dispatcher's requests per run",
    "cli": "The `dovecote` command's start",
    "claims": "Claims at fleet scale",
    "streams": "Task streams: latency, idle cost, resume",
    "push": "Webhooks",
}
MAX_DEPTH = 4  # headings below this become bold lines


def number(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return number(value)
    return " ".join(str(value).split()).replace("|", "\\|")


def table(rows: dict[str, dict[str, Any]] | list[dict[str, Any]], first: str = "") -> list[str]:
    labelled = list(rows.items()) if isinstance(rows, dict) else [("", row) for row in rows]
    columns: list[str] = []
    for _, row in labelled:
        columns += [c for c in row if c not in columns]
    head = ([first or " "] if isinstance(rows, dict) else []) + columns
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, row in labelled:
        cells = ([text(label)] if isinstance(rows, dict) else []) + [text(row.get(c, "")) for c in columns]
        out.append("| " + " | ".join(cells) + " |")
    return out + [""]


def flatten(row: dict[str, Any]) -> dict[str, Any] | None:
    """A mapping as one table row: its scalars, and one level of nested scalars as `key.sub`
    columns; None when it holds anything deeper (a list, a mapping of mappings)."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if scalar(value):
            out[key] = value
        elif isinstance(value, dict) and all(scalar(v) for v in value.values()):
            out.update({f"{key}.{sub}": v for sub, v in value.items()})
        elif isinstance(value, list):
            continue  # a per-item breakdown: in figures.json, not in the table
        else:
            return None
    return out


def render_value(value: Any, depth: int) -> list[str]:
    """Any JSON value as Markdown: flat mappings as tables, deeper ones as sub-sections."""
    if scalar(value):
        return [text(value), ""]
    if isinstance(value, list):
        if all(scalar(v) for v in value):
            return [", ".join(text(v) for v in value) or "(none)", ""]
        if all(isinstance(v, dict) and flatten(v) is not None for v in value):
            return table([flatten(v) or {} for v in value])
        return ["```json", json.dumps(value, indent=2), "```", ""]
    flat = {k: v for k, v in value.items() if scalar(v)}
    rows = {
        k: row
        for k, v in value.items()
        if isinstance(v, dict) and v and not scalar(v) and (row := flatten(v)) is not None and row
    }
    out: list[str] = []
    if flat:
        out += ["| figure | value |", "|---|---|"] + [f"| {text(k)} | {text(v)} |" for k, v in flat.items()] + [""]
    if rows:
        out += table(rows)
    for key, child in value.items():
        if key in flat or key in rows:
            continue
        heading = "#" * depth + " " if depth <= MAX_DEPTH else "**"
        out += [heading + text(key) + ("**" if depth > MAX_DEPTH else ""), ""]
        out += render_value(child, depth + 1)
    return out


def render(data: dict[str, Any]) -> str:
    out = [
        "# Benchmark figures",
        "",
        "<!-- Written by `make bench` (bench/docs_page.py) from docs/benchmarks/figures.json: not by hand. -->",
        "",
        "The figures of the latest `make bench` run of each section, written here by the bench itself",
        "(`bench/docs_page.py`), never by hand. Each section says when it was measured and whether the run",
        'was `--quick` (fewer samples). `make bench ARGS="--only SECTION"` measures one section again and',
        "leaves the others' figures as they were. Wall times depend on the machine and its load: the",
        "[measurement notes](notes.md) say what each figure was measured on and what it decided; AWS round",
        "trips and capacity units do not depend on either.",
        "",
    ]
    shown = [key for key in TITLES if key in data] + sorted(key for key in data if key not in TITLES)
    missing = [key for key in TITLES if key not in data]
    for key in shown:
        section = data[key]
        run = "a `--quick` run" if section.get("quick") else "a full run"
        out += [f"## {TITLES.get(key, key)}", "", f"Measured {section['when']}, {run}, Python {section['python']}.", ""]
        out += render_value(section["figures"], 3)
    if missing:
        out += ["## Not measured here yet", "", "These sections have no figures on this page yet:"]
        out += [f"`{key}`" + ("," if i < len(missing) - 1 else ".") for i, key in enumerate(missing)] + [""]
        out += ['Run `make bench` (or `make bench ARGS="--only ..."`) to add them.', ""]
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n"


def dump(figures: dict[str, Any]) -> str:
    """One section a line: a full run's figures stay a short file whose diffs name the sections."""
    lines = [f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}" for key, value in figures.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def update(report: dict[str, Any], *, quick: bool, data: Path = DATA, page: Path = PAGE) -> Path:
    """Merge the report's sections into `data`, then write `page` from it; returns the page."""
    figures = json.loads(data.read_text()) if data.exists() else {}
    for key, value in report.items():
        if key not in META:
            figures[key] = {"when": report["when"], "quick": quick, "python": report["python"], "figures": value}
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text(dump(figures))
    page.write_text(render(json.loads(data.read_text())))  # as JSON holds it (tuples become lists)
    return page


if __name__ == "__main__":
    PAGE.write_text(render(json.loads(DATA.read_text())))
    print(f"written: {PAGE}")
