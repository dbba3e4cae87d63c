"""The `opensearch_url` fixture: one real OpenSearch node for the whole test run.

- `DOVECOTE_OPENSEARCH_URL` set: that node is used, nothing is started.
- Otherwise the first test that asks starts ONE node (`infra.local.opensearch.OpenSearchNode`), and
  every other test, in this process or in another xdist worker, gets the same URL. Unit-only runs
  never start a JVM.
- Java or Maven missing: the test is skipped with the reason, except under `CI=true`, where it
  fails: these tests must run in CI.

Sharing across `pytest -n 2`: the controller (the process without `workerinput`) makes a directory
in `pytest_configure` and exports it, with its own pid, to the workers it spawns afterwards. The
first process that needs the node takes a file lock there, starts the node with the controller as
its owner (so it outlives the worker that started it, and dies if the controller is killed), and
writes `node.json` (url and pid, or the failure, so the other worker fails fast with the same
message). The controller stops the node in `pytest_unconfigure`, after every worker has finished.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from infra.local.opensearch import OpenSearchNode, OpenSearchUnavailable, stop_pid

URL_ENV = "DOVECOTE_OPENSEARCH_URL"
# Handed from the controller to the xdist workers. Not DOVECOTE_*: settings read that prefix.
SHARED_DIR_ENV = "PYTEST_OPENSEARCH_SHARED_DIR"
OWNER_ENV = "PYTEST_OPENSEARCH_OWNER_PID"


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # a worker uses its controller's directory, inherited through the environment
    # A fresh directory for every controller, also for a pytest run inside a test.
    config.stash[_previous_key] = {name: os.environ.get(name) for name in (SHARED_DIR_ENV, OWNER_ENV)}
    os.environ[SHARED_DIR_ENV] = tempfile.mkdtemp(prefix="dovecote-pytest-opensearch-")
    os.environ[OWNER_ENV] = str(os.getpid())


def pytest_unconfigure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or _previous_key not in config.stash:
        return
    shared = Path(os.environ[SHARED_DIR_ENV])
    state = _read_state(shared)
    if "pid" in state:
        stop_pid(int(state["pid"]))
    shutil.rmtree(shared, ignore_errors=True)
    for name, value in config.stash[_previous_key].items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


_previous_key = pytest.StashKey[dict[str, str | None]]()


def _read_state(shared: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((shared / "node.json").read_text()))
    except (OSError, ValueError):
        return {}


def _shared_node(request: pytest.FixtureRequest) -> dict[str, Any]:
    shared = Path(os.environ[SHARED_DIR_ENV])
    with open(shared / "node.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits here while the node starts
        state = _read_state(shared)
        if state:
            return state
        node = OpenSearchNode(shared / "node", owner_pid=int(os.environ[OWNER_ENV]))
        capture = request.config.pluginmanager.getplugin("capturemanager")
        try:
            # A first build downloads from Maven Central for a minute or two: let its progress show.
            with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
                node.start()
            state = {"url": node.url, "pid": node.pid, "startup_seconds": round(node.startup_seconds, 1)}
        except OpenSearchUnavailable as exc:
            state = {"unavailable": str(exc)}
        except Exception as exc:  # the message carries the node's stderr
            state = {"error": f"{type(exc).__name__}: {exc}"}
        (shared / "node.json").write_text(json.dumps(state))
        return state


@pytest.fixture(scope="session")
def opensearch_url(request: pytest.FixtureRequest) -> str:
    """The base URL of a real OpenSearch 2.19 node (plain HTTP on loopback, no security)."""
    given = os.environ.get(URL_ENV, "").strip()
    if given:
        return given.rstrip("/")
    if SHARED_DIR_ENV not in os.environ:  # the plugin was loaded late, without pytest_configure
        pytest.fail(f"{SHARED_DIR_ENV} is not set: load tests.opensearch_fixture from the top conftest")
    state = _shared_node(request)
    if "url" in state:
        return str(state["url"])
    if "unavailable" in state:
        reason = f"no OpenSearch node: {state['unavailable']}; or set {URL_ENV}"
        if _in_ci():
            pytest.fail(f"{reason} (CI=true: these tests must run, never skip)", pytrace=False)
        pytest.skip(reason=reason)
    pytest.fail(f"the OpenSearch node did not start: {state['error']}", pytrace=False)
