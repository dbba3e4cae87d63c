"""The `dovecote` command line (typer + rich): the same verbs and fields as the API and the SDK.

Layout: `common.py` (client, output, inputs, exit codes), one module per command group (`notes.py`,
`tasks.py` with the caller's `tasks` and the `worker` verbs, `tokens.py`, `recall.py`), and here the
app, `dev`, `health`, `--version` and `main`, which turns every expected failure into one line on
stderr and a documented exit code (`DOVECOTE_DEBUG=1` shows the traceback instead).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from dovecote.cli.common import (
    EXIT_API,
    EXIT_CODES_HELP,
    EXIT_NOTHING,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    CliError,
    Json,
    client,
    emit,
    err,
    out,
)
from dovecote.cli.notes import notes_app
from dovecote.cli.tasks import tasks_app, worker_app
from dovecote.cli.tokens import tokens_app, whoami
from dovecote.client import DovecoteError
from dovecote.client.errors import CONFIGURATION, UNAVAILABLE, WAIT_TIMEOUT

app = typer.Typer(
    help="Dovecote: durable notes, tasks, recall and memory for teams of agents.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # a traceback (DOVECOTE_DEBUG=1) must never print a token
)
app.add_typer(tokens_app, name="tokens")
app.add_typer(notes_app, name="notes")
app.add_typer(tasks_app, name="tasks")
app.add_typer(worker_app, name="worker")
app.command("whoami")(whoami)


def _mount_sub_apps() -> None:
    from dovecote.cli.artifacts import artifacts_app
    from dovecote.cli.memory import memory_app
    from dovecote.cli.recall import recall_app

    app.add_typer(recall_app, name="recall")
    app.add_typer(memory_app, name="memory")
    app.add_typer(artifacts_app, name="artifacts")
    import dovecote.cli.mcp  # noqa: F401  (registers `dovecote mcp` on app)


_mount_sub_apps()


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("dovecote")
        except PackageNotFoundError:
            found = "unknown"
        out.print(f"dovecote {found}", highlight=False)
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Dovecote: durable notes, tasks, recall and memory for teams of agents."""


@app.command()
def health(as_json: Json = False) -> None:
    """Is the endpoint up? (`GET /v1/health`, no token needed.)"""
    emit(client().health(), as_json)


@app.command()
def dev(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind (0 picks a free one).")] = 8787,
    data: Annotated[
        Path, typer.Option(help="Keep state in DIR across restarts (notes, tasks, memory, transcripts, tokens).")
    ] = Path(".dovecote/data"),
    fresh: Annotated[bool, typer.Option(help="Start empty: wipe the --data DIR first.")] = False,
    tokens_file: Annotated[Path, typer.Option(help="Where to write the dev tokens.")] = Path(
        ".dovecote/dev-tokens.json"
    ),
    dispatch_interval: Annotated[
        float, typer.Option(help="Seconds between lease-dispatcher runs (0 turns it off).")
    ] = 1.0,
    faults: Annotated[
        bool, typer.Option(help="Honour X-Dovecote-Fault: drop-response (tests of retries that replay).")
    ] = False,
    quiet: Annotated[bool, typer.Option(help="No per-request log lines.")] = False,
) -> None:
    """Run the whole service locally over moto, with API Gateway emulated (`make dev ARGS="--port 9000"`)."""
    import logging
    import signal

    root = Path(__file__).resolve().parents[3]  # the checkout: infra/ and functions/ are not installed
    if (root / "infra" / "local").is_dir() and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from infra.local.runtime import DataDirBusy, LocalRuntime

    # One line per request (method, path, status, code, ms) and the emulators' own notices. Its own
    # logger and handler: the functions' Powertools loggers ("dovecote", JSON) stay as in Lambda.
    dev_log = logging.getLogger("dovecote-dev")
    line = logging.StreamHandler(sys.stderr)
    line.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    dev_log.addHandler(line)
    dev_log.propagate = False
    dev_log.setLevel(logging.WARNING if quiet else logging.INFO)
    try:
        runtime = LocalRuntime(
            host=host,
            port=port,
            tokens_file=tokens_file,
            dispatch_interval=dispatch_interval,
            faults=faults,
            data_dir=data,
            fresh=fresh,
        ).start()
    except OSError as exc:
        if exc.filename:
            raise
        raise CliError(f"cannot serve on {host}:{port}: {exc.strerror or exc}", EXIT_UNREACHABLE) from None
    except DataDirBusy as exc:
        raise CliError(f"{exc}: stop it first, or pass another --data", EXIT_USAGE) from None
    out.print(f"Dovecote dev runtime ready at {runtime.endpoint}", highlight=False)
    out.print(f"tokens: {tokens_file} (authority 'dev'; roles admin, caller, worker)", highlight=False)
    out.print(f"data: {data} (kept across restarts; --fresh starts empty)", highlight=False)
    sys.stdout.flush()

    def _terminate(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM stops as cleanly as Ctrl-C: the state is compacted

    signal.signal(signal.SIGTERM, _terminate)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        runtime.stop()


# ---- errors -------------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(text.split())


def describe(exc: BaseException) -> tuple[int, str]:
    """An expected failure as (exit code, one line)."""
    import httpx

    if isinstance(exc, CliError):
        return exc.exit_code, exc.message
    if isinstance(exc, DovecoteError):
        if exc.status == 0 and exc.code in (UNAVAILABLE, CONFIGURATION):
            return EXIT_UNREACHABLE, exc.message
        if exc.code == WAIT_TIMEOUT:
            return EXIT_NOTHING, exc.message
        line = f"error: {exc.status} {exc.code}: {exc.message}" if exc.status else f"error: {exc.code}: {exc.message}"
        if exc.details:
            line += f" {json.dumps(exc.details, ensure_ascii=False, separators=(',', ':'))}"
        if exc.retryable and exc.command_id:
            line += f" (it may have committed: retry with --command-id {exc.command_id})"
        return EXIT_API, line
    if isinstance(exc, httpx.TransportError):
        return EXIT_UNREACHABLE, f"cannot reach Dovecote: {exc}"
    if isinstance(exc, FileNotFoundError | IsADirectoryError | PermissionError | NotADirectoryError):
        return EXIT_USAGE, f"{exc.strerror}: {exc.filename}"
    return EXIT_API, f"unexpected error: {type(exc).__name__}: {exc} (DOVECOTE_DEBUG=1 shows the traceback)"


def main() -> None:
    debug = os.environ.get("DOVECOTE_DEBUG", "") not in ("", "0")
    try:
        app(prog_name="dovecote")
    except Exception as exc:
        if debug:
            raise
        code, line = describe(exc)
        sys.stdout.flush()
        sys.stderr.write(_one_line(line) + "\n")
        sys.exit(code)


__all__ = ["app", "err", "main", "out"]

if __name__ == "__main__":
    main()
