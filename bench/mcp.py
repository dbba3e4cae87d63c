"""The MCP server's overhead: `python -m bench.mcp [--quick]`, or `mcp_report()` from bench/__main__.

Against one `dovecote dev` (in its own process), the same read is timed three ways, one at a time
after a warm-up: the SDK's direct HTTP call, the tool through `dovecote mcp` over stdio (the SDK's
stdio client, one session kept open), and the tool over streamable HTTP (`dovecote mcp --http`).
The reads: notes get (one inline note) and recall search (one sample transcript indexed). Reported
as medians and p95 in milliseconds and the ratio of each MCP median to the direct one: what an
agent pays for going through MCP instead of the SDK.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.workers import DevProcess

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = Path("/work/shared/data/transcripts/claude-code/obra-episodic-memory__short-conversation.jsonl")
QUERY = "Employee dataclass"


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "median_ms": statistics.median(ordered) * 1000,
        "p95_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000,
    }


def _time(fn: Callable[[], Any], count: int) -> list[float]:
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


async def _atime(fn: Callable[[], Awaitable[Any]], count: int) -> list[float]:
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        result = await fn()
        samples.append(time.perf_counter() - start)
        if getattr(result, "is_error", False):
            raise RuntimeError(f"the tool failed: {result.content}")
    return samples


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _measure_mcp(server: Any, calls: dict[str, tuple[str, dict[str, Any]]], count: int) -> dict[str, list[float]]:
    import anyio
    from mcp import Client

    out: dict[str, list[float]] = {}

    async def run() -> None:
        async with Client(server) as client:
            for label, (tool, arguments) in calls.items():

                def one(tool: str = tool, arguments: dict[str, Any] = arguments) -> Awaitable[Any]:
                    return client.call_tool(tool, arguments)

                await _atime(one, 5)  # warm-up
                out[label] = await _atime(one, count)

    anyio.run(run)
    return out


def mcp_report(quick: bool = False) -> dict[str, Any]:
    from mcp.client.stdio import StdioServerParameters

    from dovecote.client import DovecoteClient

    count = 30 if quick else 200
    dev = DevProcess()
    http_process = None
    log = tempfile.TemporaryFile()
    try:
        token = dev.tokens["caller"]
        with DovecoteClient(dev.endpoint, token) as client:
            ref = client.put_note("bench-mcp", 1, "note", "a short note body " * 20)["ref"]
            client.push_transcript(SAMPLE, "claude-code-jsonl", project="bench-mcp")
            direct_calls: dict[str, Callable[[], Any]] = {
                "notes get": lambda: client.get_note_meta(ref),
                "recall search": lambda: client.recall_search(QUERY, project="bench-mcp"),
            }
            direct = {}
            for label, fn in direct_calls.items():
                _time(fn, 5)
                direct[label] = _time(fn, count)
        calls = {
            "notes get": ("notes_get", {"ref": ref}),
            "recall search": ("recall_search", {"query": QUERY, "project": "bench-mcp"}),
        }
        env = {"DOVECOTE_ENDPOINT": dev.endpoint, "DOVECOTE_TOKEN": token}
        stdio = _measure_mcp(
            StdioServerParameters(command=sys.executable, args=["-m", "dovecote.cli", "mcp"], env=env, cwd=str(ROOT)),
            calls,
            count,
        )
        port = _free_port()
        http_env = {k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")} | env
        http_process = subprocess.Popen(
            [sys.executable, "-m", "dovecote.cli", "mcp", "--http", str(port)],
            cwd=ROOT,
            env=http_env,
            stdout=log,
            stderr=log,
        )
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or http_process.poll() is not None:
                    raise RuntimeError("dovecote mcp --http did not start") from None
                time.sleep(0.2)
        over_http = _measure_mcp(url, calls, count)
    finally:
        if http_process is not None:
            http_process.terminate()
            http_process.wait(timeout=10)
        log.close()
        dev.close()
    report: dict[str, Any] = {}
    for label in calls:
        base = _stats(direct[label])
        row = {"direct (SDK, HTTP)": base}
        for transport, samples in (("MCP stdio", stdio[label]), ("MCP streamable HTTP", over_http[label])):
            figures = _stats(samples)
            figures["ratio"] = figures["median_ms"] / base["median_ms"]
            row[transport] = figures
        report[label] = row
    return report


def print_report(report: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    table = Table("read", "path", "n", "median ms", "p95 ms", "× direct")
    for label, rows in report.items():
        for path, figures in rows.items():
            ratio = f"{figures['ratio']:.2f}" if "ratio" in figures else "1.00"
            table.add_row(
                label, path, str(figures["n"]), f"{figures['median_ms']:.1f}", f"{figures['p95_ms']:.1f}", ratio
            )
    console.print(table)


if __name__ == "__main__":
    import json

    result = mcp_report(quick="--quick" in sys.argv)
    print_report(result)
    print(json.dumps(result, indent=2))
