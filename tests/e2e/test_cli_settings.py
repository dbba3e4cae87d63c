"""Two `dovecote dev` on one machine, as a new user meets them (issue 29, item 4): each clone's CLI
answers from its own runtime, the second runtime does not take over the first one's `dev` profiles,
and `whoami` / `health` say which endpoint answered and where the settings came from. Two clones are
two temporary directories, each with its runtime's `.dovecote/dev-tokens.json`; both runtimes write
to one XDG_CONFIG_HOME, as they would to the user's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.e2e.conftest import start_dev


@pytest.fixture(scope="module")
def two_clones(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("clones")
    config_home = root / "xdg"
    first, second = root / "first", root / "second"
    with start_dev(first / ".dovecote", config_home=config_home) as a:
        with start_dev(second / ".dovecote", config_home=config_home) as b:
            yield {"first": first, "second": second, "a": a, "b": b, "config_home": config_home, "root": root}


def dovecote(setup: dict[str, Any], cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DOVECOTE_", "AWS_", "XDG_"))}
    return subprocess.run(
        [sys.executable, "-m", "dovecote.cli", *args],
        capture_output=True,
        text=True,
        env=clean | {"XDG_CONFIG_HOME": str(setup["config_home"]), "COLUMNS": "200"} | env,
        cwd=cwd,
        timeout=120,
    )


def fields(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert result.returncode == 0, result.stderr
    return dict(line.split(None, 1) for line in result.stdout.splitlines() if line.strip())


def test_the_second_runtime_keeps_the_first_ones_profiles(two_clones: dict[str, Any]) -> None:
    a, b = two_clones["a"], two_clones["b"]
    profiles = tomllib.loads((two_clones["config_home"] / "dovecote" / "config.toml").read_text())["profiles"]
    assert {profiles[name]["endpoint"] for name in ("dev", "dev-worker", "dev-admin")} == {a["endpoint"]}
    port = b["endpoint"].rsplit(":", 1)[1]
    for name, role in ((f"dev-{port}", "caller"), (f"dev-{port}-worker", "worker"), (f"dev-{port}-admin", "admin")):
        assert profiles[name] == {"endpoint": b["endpoint"], "token": b["tokens"][role]}
    banner = b["log"].read_text()
    assert f"point at another running dovecote dev ({a['endpoint']}), kept" in banner
    assert f"use `--profile dev-{port}`" in banner


def test_each_clone_answers_from_its_own_runtime_and_whoami_says_so(two_clones: dict[str, Any]) -> None:
    a, b = two_clones["a"], two_clones["b"]
    for clone, runtime in (("first", a), ("second", b)):
        inside = two_clones[clone] / "src"
        inside.mkdir(exist_ok=True)
        shown = fields(dovecote(two_clones, inside, "whoami"))
        assert shown["endpoint"] == runtime["endpoint"]
        assert shown["settings"] == f"file {two_clones[clone] / '.dovecote' / 'dev-tokens.json'}"
        health = fields(dovecote(two_clones, inside, "health"))
        assert (health["status"], health["endpoint"]) == ("ok", runtime["endpoint"])
    # A task created in one clone is not listed in the other.
    created = dovecote(two_clones, two_clones["second"], "tasks", "create", "only-in-second", "hi", "--json")
    assert created.returncode == 0, created.stderr
    listed = dovecote(two_clones, two_clones["first"], "tasks", "list", "--json")
    assert "only-in-second" not in {t["id"] for t in json.loads(listed.stdout)["items"]}
    # Outside any clone the dev profile answers, and whoami names it.
    outside = fields(dovecote(two_clones, two_clones["root"], "whoami"))
    config = two_clones["config_home"] / "dovecote" / "config.toml"
    assert (outside["endpoint"], outside["settings"]) == (a["endpoint"], f"profile dev in {config}")
    env = fields(
        dovecote(
            two_clones,
            two_clones["root"],
            "whoami",
            DOVECOTE_ENDPOINT=b["endpoint"],
            DOVECOTE_TOKEN=b["tokens"]["caller"],
        )
    )
    assert env["settings"] == "the environment (DOVECOTE_ENDPOINT, DOVECOTE_TOKEN)"


def test_a_second_runtime_on_port_zero_names_its_files_after_the_port_it_serves(tmp_path: Path) -> None:
    """Beside a running runtime, `dovecote dev --port 0` writes `dev-tokens-PORT.json` and
    `console-link-PORT` with the port it took, never `-0` (the next `--port 0` runtime's name too)."""
    import time

    import httpx

    with start_dev(tmp_path / ".dovecote") as first:
        log_file = tmp_path / "second.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DOVECOTE_"))}
        with log_file.open("w") as log:
            second = subprocess.Popen(
                [sys.executable, "-m", "dovecote.cli", "dev", "--port", "0"]
                + ["--tokens-file", str(first["tokens_file"]), "--data", str(tmp_path / "second-data")]
                + ["--write-profile", ""],
                cwd=ROOT,
                env=env | {"XDG_CONFIG_HOME": str(tmp_path / "xdg")},
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )
            try:
                deadline = time.monotonic() + 120
                while "stop: Ctrl-C" not in log_file.read_text() and second.poll() is None:
                    assert time.monotonic() < deadline, log_file.read_text()
                    time.sleep(0.2)
                assert second.poll() is None, log_file.read_text()
                moved = sorted(p.name for p in first["tokens_file"].parent.glob("dev-tokens-*.json"))
                assert len(moved) == 1 and moved != ["dev-tokens-0.json"], moved
                port = int(moved[0].removeprefix("dev-tokens-").removesuffix(".json"))
                written = json.loads((first["tokens_file"].parent / moved[0]).read_text())
                assert written["endpoint"] == f"http://127.0.0.1:{port}"
                assert httpx.get(written["endpoint"] + "/v1/health", timeout=5).status_code == 200
                assert (first["tokens_file"].parent / f"console-link-{port}").exists()
                # The first runtime's file is untouched.
                assert json.loads(first["tokens_file"].read_text())["endpoint"] == first["endpoint"]
            finally:
                second.terminate()
                second.wait(timeout=20)


def test_a_second_runtime_forgets_its_port_profiles_when_it_stops(tmp_path: Path) -> None:
    """Beside a running runtime the second writes `dev-PORT` profiles; they name a port nothing serves
    once it stops, so the stop removes them (the first one's `dev` profiles stay)."""
    config_home = tmp_path / "xdg"
    with start_dev(tmp_path / "a" / ".dovecote", config_home=config_home):
        with start_dev(tmp_path / "b" / ".dovecote", config_home=config_home) as b:
            port = b["endpoint"].rsplit(":", 1)[1]
            written = tomllib.loads((config_home / "dovecote" / "config.toml").read_text())["profiles"]
            assert f"dev-{port}" in written and "dev" in written
        left = tomllib.loads((config_home / "dovecote" / "config.toml").read_text())["profiles"]
        assert not [name for name in left if name.startswith(f"dev-{port}")], sorted(left)
        assert {"dev", "dev-worker", "dev-admin"} <= set(left)
