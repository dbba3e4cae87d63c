"""Start `dovecote dev` as a real process on a free port; tests speak HTTP to it."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from dovecote.client.worker import Worker
from tests.conftest import ROOT

READY_SECONDS = 120
READY_LINE = "stop: Ctrl-C"  # the last line of `dovecote dev`'s banner


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def start_dev(
    directory: Path,
    *extra: str,
    settings: dict[str, str] | None = None,
    config_home: Path | None = None,
    port: int | None = None,
) -> Iterator[dict[str, Any]]:
    """`dovecote dev` as a real process on a free port, its log in `directory`; yields the endpoint,
    the tokens, the log file and the process. `settings`: DOVECOTE_* variables the runtime starts with;
    `config_home`: the XDG_CONFIG_HOME it writes its profiles to (default `directory/config`).
    Its state goes to `directory/data` unless `extra` names a `--data` (never the shared default
    `.dovecote/data`). `port`: a given one (a restart on the same endpoint), else a free one."""
    if "--data" not in extra:
        extra = (*extra, "--data", str(directory / "data"))
    tokens_file = directory / "dev-tokens.json"
    # The runtime logs a line per request: to a file, never an unread pipe that would fill and stall it.
    log_file = directory / "dev.log"
    port = port or _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DOVECOTE_"))} | (settings or {})
    config_home = config_home or directory / "config"
    env["XDG_CONFIG_HOME"] = str(config_home)  # its `dev` profiles: never the user's config
    directory.mkdir(parents=True, exist_ok=True)
    log = log_file.open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "dovecote.cli", "dev", "--port", str(port), "--tokens-file", str(tokens_file), *extra],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # A bound on a hang, not a speed check (bench/devstart.py measures starts): two workers and their
        # runtimes share two cores under `make test` (four workers).
        deadline = time.monotonic() + READY_SECONDS
        endpoint = f"http://127.0.0.1:{port}"
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"dovecote dev exited early:\n{log_file.read_text()}")
            # Ready: serving, and its banner printed (the profiles are written before it).
            if tokens_file.exists() and READY_LINE in log_file.read_text(errors="replace"):
                try:
                    if httpx.get(endpoint + "/v1/health", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
            time.sleep(0.2)
        else:
            raise RuntimeError(
                f"dovecote dev did not become ready in {READY_SECONDS} s; its log ends:\n{log_file.read_text()[-2000:]}"
            )
        data = json.loads(Path(tokens_file).read_text())
        yield {
            "endpoint": data["endpoint"],
            "tokens": data["tokens"],
            "tokens_file": tokens_file,
            "config_home": config_home,
            "log": log_file,
            "process": process,
        }
    finally:
        # SIGTERM: a clean stop (compaction); a test that killed the process already finds it gone.
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.fixture(scope="session")
def dev_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with start_dev(tmp_path_factory.mktemp("dev"), "--faults", "--dispatch-interval", "0.5") as runtime:
        yield runtime


# One TLS context for every test client: httpx builds a new one per Client by default, loading the
# CA bundle (~50 ms of CPU), and the runtime is plain HTTP. Each test still gets a Client of its own.
TLS = ssl.create_default_context()


def local_http(endpoint: str, **options: Any) -> httpx.Client:
    """An httpx Client of the test's own for the local runtime (the shared TLS context)."""
    return httpx.Client(base_url=endpoint, verify=TLS, **options)


@pytest.fixture
def http(dev_runtime: dict[str, Any]) -> Iterator[httpx.Client]:
    with local_http(dev_runtime["endpoint"], timeout=30) as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def mint_dev_token(runtime: dict[str, Any], authority: str, role: str, worker: str | None = None) -> str:
    """A token of any authority, minted by the running runtime: `dovecote dev token`, as documented."""
    minted = subprocess.run(
        [sys.executable, "-m", "dovecote.cli", "dev", "token", "--authority", authority, "--role", role]
        + (["--worker", worker] if worker else [])
        + ["--tokens-file", str(runtime["tokens_file"]), "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DOVECOTE_"))},
    )
    return str(json.loads(minted.stdout)["token"])


@pytest.fixture(scope="session")
def other_authority(dev_runtime: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Tokens of a second authority. An admin token mints only inside its own authority; the local
    runtime mints any (`dovecote dev token`)."""
    return {
        "caller": bearer(mint_dev_token(dev_runtime, "other", "caller")),
        "worker": bearer(mint_dev_token(dev_runtime, "other", "worker", "w-other")),
    }


@pytest.fixture
def running() -> Iterator[Callable[[Worker], threading.Thread]]:
    """Starts SDK workers in threads (so they install no signal handlers); each is stopped, and must
    have stopped, when the test ends."""
    started: list[tuple[Worker, threading.Thread]] = []

    def start(worker: Worker) -> threading.Thread:
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        started.append((worker, thread))
        return thread

    yield start
    for worker, _ in started:
        worker.stop()
    for _, thread in started:
        thread.join(timeout=30)
        assert not thread.is_alive(), "the worker did not stop"
