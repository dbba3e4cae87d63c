"""CDK synthesis runs aws-cdk-lib through jsii, which needs Node.js. Outside CI a machine without
Node skips these tests with the reason; under CI=true they must run, so a missing Node fails."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


NO_NODE = "Node.js is not installed; aws-cdk-lib needs it to synthesize (apt-get install nodejs)"
# The stack deploys the web console's built files (infra/constructs/console.py).
NO_CONSOLE = "the web console is not built (console/dist: make install builds it with npm; apt-get install npm)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    built = (Path(__file__).resolve().parents[2] / "console" / "dist" / "index.html").is_file()
    missing = NO_NODE if not shutil.which("node") else NO_CONSOLE if not built else ""
    if not missing:
        return
    if os.environ.get("CI") == "true":
        raise pytest.UsageError(f"CI=true but {missing}: the CDK infra tests cannot be skipped in CI")
    skip = pytest.mark.skip(reason=missing)
    for item in items:
        if "tests/infra" in str(item.fspath):
            item.add_marker(skip)


# Every stack option the tests turn on, in one synthesis: each option's test reads its own effect
# from it, and "off unless asked" is read from the default synthesis.
OPTIONS: dict[str, object] = {"snapstart": True, "claim_shards": 16, "embedder": "bedrock", "embedding_dimension": 256}


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def synthesize(
    tmp_path_factory: pytest.TempPathFactory, name: str, context: dict[str, object] | None = None
) -> dict[str, Any]:
    """The stack synthesized once per test run with this context, whichever xdist worker asks first
    (the others wait for it and read its output): a synthesis costs 15–20 s of CPU, and several
    test files read the same one. {"raw": template JSON, "outdir", "stack": the construct, or None
    when another worker built it}."""
    from infra.app import build_app

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    outdir = shared / f"cdk-{name}"
    stack = None
    with _locked(shared / f"cdk-{name}.lock"):
        done = outdir / "synthesized.json"
        if not done.is_file() or json.loads(done.read_text()) != (context or {}):
            shutil.rmtree(outdir, ignore_errors=True)
            app, stack = build_app(outdir=str(outdir), context=context)
            app.synth()
            done.write_text(json.dumps(context or {}))
    raw = json.loads((outdir / "Dovecote.template.json").read_text())
    return {"raw": raw, "outdir": outdir, "stack": stack}


@pytest.fixture(scope="session")
def default_synth(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return synthesize(tmp_path_factory, "default")


@pytest.fixture(scope="session")
def options_synth(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return synthesize(tmp_path_factory, "options", OPTIONS)


@pytest.fixture(scope="session")
def production_template(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The stack synthesized with the production context, as a CDK assertions Template."""
    from aws_cdk.assertions import Template

    return Template.from_json(synthesize(tmp_path_factory, "production", {"production": True})["raw"])
