"""The MCP server's overhead: `python -m bench.mcp [--quick]`, or `mcp_report()` from bench/__main__.

Against one `dovecote dev` (in its own process), the same read is timed three ways, interleaved round
by round after a warm-up: the SDK's direct HTTP call, the tool through `dovecote mcp` over stdio (the SDK's
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
SAMPLE = ROOT / "tests" / "data" / "transcripts" / "claude-code" / "obra-episodic-memory__short-conversation.jsonl"
QUERY = "Employee dataclass"


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "median_ms": statistics.median(ordered) * 1000,
        "p95_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000,
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_http(env: dict[str, str], log: Any) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "dovecote.cli", "mcp", "--http", str(port)],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")} | env,
        stdout=log,
        stderr=log,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return process, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("dovecote mcp --http did not start") from None
            time.sleep(0.2)


async def _timed(fn: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    result = await fn()
    elapsed = time.perf_counter() - start
    if getattr(result, "is_error", False):
        raise RuntimeError(f"the tool failed: {result.content}")
    return elapsed


def _interleaved(
    direct: dict[str, Callable[[], Any]],
    calls: dict[str, tuple[str, dict[str, Any]]],
    servers: dict[str, Any],
    count: int,
) -> dict[str, dict[str, list[float]]]:
    """Each round times the direct call and then the tool on every transport, back to back, so
    the machine's drift (other processes on shared cores) touches every path alike."""
    import anyio
    from mcp import Client

    samples: dict[str, dict[str, list[float]]] = {label: {} for label in calls}

    async def run() -> None:
        async with Client(servers["MCP stdio"]) as stdio, Client(servers["MCP streamable HTTP"]) as over_http:
            sessions = {"MCP stdio": stdio, "MCP streamable HTTP": over_http}
            for label, (tool, arguments) in calls.items():
                paths: dict[str, Callable[[], Awaitable[Any]]] = {}

                async def sdk(fn: Callable[[], Any] = direct[label]) -> Any:
                    return fn()

                paths["direct (SDK, HTTP)"] = sdk
                for name, session in sessions.items():

                    def one(session: Client = session, tool: str = tool, arguments: dict[str, Any] = arguments) -> Any:
                        return session.call_tool(tool, arguments)

                    paths[name] = one
                for _ in range(5):  # warm-up
                    for fn in paths.values():
                        await _timed(fn)
                for _ in range(count):
                    for name, fn in paths.items():
                        samples[label].setdefault(name, []).append(await _timed(fn))

    anyio.run(run)
    return samples


def mcp_report(quick: bool = False) -> dict[str, Any]:
    from mcp.client.stdio import StdioServerParameters

    from dovecote.client import DovecoteClient

    count = 30 if quick else 200
    dev = DevProcess()
    http_process = None
    log = tempfile.TemporaryFile()
    try:
        token = dev.tokens["caller"]
        env = {"DOVECOTE_ENDPOINT": dev.endpoint, "DOVECOTE_TOKEN": token}
        http_process, url = _start_http(env, log)
        with DovecoteClient(dev.endpoint, token) as client:
            ref = client.put_note("bench-mcp", 1, "note", "a short note body " * 20)["ref"]
            client.push_transcript(SAMPLE, "claude-code-jsonl", project="bench-mcp")
            direct: dict[str, Callable[[], Any]] = {
                "notes get": lambda: client.get_note_meta(ref),
                "recall search": lambda: client.recall_search(QUERY, project="bench-mcp"),
            }
            calls = {
                "notes get": ("notes_get", {"ref": ref}),
                "recall search": ("recall_search", {"query": QUERY, "project": "bench-mcp"}),
            }
            stdio = StdioServerParameters(
                command=sys.executable, args=["-m", "dovecote.cli", "mcp"], env=env, cwd=str(ROOT)
            )
            samples = _interleaved(direct, calls, {"MCP stdio": stdio, "MCP streamable HTTP": url}, count)
    finally:
        if http_process is not None:
            http_process.terminate()
            http_process.wait(timeout=10)
        log.close()
        dev.close()
    report: dict[str, Any] = {}
    for label, paths in samples.items():
        base = _stats(paths["direct (SDK, HTTP)"])
        row = {"direct (SDK, HTTP)": base}
        for name, values in paths.items():
            if name == "direct (SDK, HTTP)":
                continue
            figures = _stats(values)
            figures["ratio"] = figures["median_ms"] / base["median_ms"]
            figures["added_ms"] = figures["median_ms"] - base["median_ms"]
            row[name] = figures
        report[label] = row
    return report


def print_report(report: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    table = Table("read", "path", "n", "median ms", "p95 ms", "× direct", "+ ms")
    for label, rows in report.items():
        for path, figures in rows.items():
            ratio = f"{figures['ratio']:.2f}" if "ratio" in figures else "1.00"
            added = f"{figures['added_ms']:+.1f}" if "added_ms" in figures else ""
            table.add_row(
                label, path, str(figures["n"]), f"{figures['median_ms']:.1f}", f"{figures['p95_ms']:.1f}", ratio, added
            )
    console.print(table)


if __name__ == "__main__":
    import json

    result = mcp_report(quick="--quick" in sys.argv)
    print_report(result)
    print(json.dumps(result, indent=2))
