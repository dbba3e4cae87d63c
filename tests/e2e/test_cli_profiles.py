"""Configuration from any directory, as a new user meets it: `dovecote dev` writes a `dev` profile per
role (0600), `dovecote login` verifies a token with whoami and keeps it as a profile, and the CLI and
the MCP server then work from a directory outside the clone, with no DOVECOTE_ENDPOINT or
DOVECOTE_TOKEN. `--profile` and DOVECOTE_PROFILE pick a profile. HOME and XDG_CONFIG_HOME are
temporary directories; the runtime's own profiles are in its `config_home`."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from dovecote.client import DovecoteClient


def run(home: Path, cwd: Path, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DOVECOTE_", "AWS_", "XDG_"))}
    return subprocess.run(
        [sys.executable, "-m", "dovecote.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=base | {"HOME": str(home), "XDG_CONFIG_HOME": str(home / "xdg"), "COLUMNS": "200"} | env,
        cwd=cwd,
        timeout=120,
    )


def answer(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_dev_writes_a_private_profile_per_role(dev_runtime: dict[str, Any]) -> None:
    path = dev_runtime["config_home"] / "dovecote" / "config.toml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    profiles = tomllib.loads(path.read_text())["profiles"]
    tokens = dev_runtime["tokens"]
    assert {name: p["token"] for name, p in profiles.items()} == {
        "dev": tokens["caller"],
        "dev-worker": tokens["worker"],
        "dev-admin": tokens["admin"],
    }
    assert {p["endpoint"] for p in profiles.values()} == {dev_runtime["endpoint"]}


def test_the_cli_works_from_any_directory_with_the_dev_profiles(dev_runtime: dict[str, Any], tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = home / "xdg" / "dovecote"
    config.mkdir(parents=True)
    (config / "config.toml").write_text((dev_runtime["config_home"] / "dovecote" / "config.toml").read_text())
    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    assert answer(run(home, elsewhere, "whoami", "--json"))["role"] == "caller"
    # A worker verb takes the dev-worker profile, an admin verb dev-admin, as the tokens file's roles.
    assert "items" in answer(run(home, elsewhere, "worker", "leases", "--json"))
    assert "items" in answer(run(home, elsewhere, "tokens", "list", "--limit", "1", "--json"))
    assert answer(run(home, elsewhere, "--profile", "dev-admin", "whoami", "--json"))["role"] == "admin"
    assert answer(run(home, elsewhere, "whoami", "--json", DOVECOTE_PROFILE="dev-worker"))["worker"] == "dev-worker"
    missing = run(home, elsewhere, "--profile", "nope", "whoami")
    assert missing.returncode == 4 and missing.stderr.startswith("error: no profile 'nope'")
    # DOVECOTE_ENDPOINT / DOVECOTE_TOKEN come before the profiles, --profile before them.
    down = {"DOVECOTE_ENDPOINT": "http://127.0.0.1:9", "DOVECOTE_TOKEN": "dvc_x_y"}
    assert run(home, elsewhere, "whoami", **down).returncode == 4
    assert answer(run(home, elsewhere, "--profile", "dev", "whoami", "--json", **down))["role"] == "caller"


def test_login_verifies_the_token_and_keeps_it(dev_runtime: dict[str, Any], tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path
    token = dev_runtime["tokens"]["worker"]
    logged = run(home, cwd, "login", "--endpoint", dev_runtime["endpoint"], "--token", token, "--profile", "ci")
    assert logged.returncode == 0, logged.stderr
    assert "as worker of authority dev, worker dev-worker" in logged.stdout and "profile ci written" in logged.stdout
    path = home / "xdg" / "dovecote" / "config.toml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert tomllib.loads(path.read_text())["profiles"]["ci"] == {"endpoint": dev_runtime["endpoint"], "token": token}
    assert answer(run(home, cwd, "--profile", "ci", "whoami", "--json"))["worker"] == "dev-worker"
    # Without --profile, login writes `default`, which every command then uses; the token may come on stdin.
    caller = dev_runtime["tokens"]["caller"]
    assert run(home, cwd, "login", "--endpoint", dev_runtime["endpoint"], "--token", "-", stdin=caller).returncode == 0
    assert answer(run(home, cwd, "whoami", "--json"))["role"] == "caller"
    # A refused token writes nothing.
    refused = run(home, cwd, "login", "--endpoint", dev_runtime["endpoint"], "--token", "dvc_bad", "--profile", "x")
    assert refused.returncode == 1 and refused.stderr.startswith("error: 403 forbidden")
    assert "x" not in tomllib.loads(path.read_text())["profiles"]


def test_the_mcp_server_and_the_sdk_use_the_same_profiles(dev_runtime: dict[str, Any], tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOVECOTE_", "AWS_"))}
    env |= {"XDG_CONFIG_HOME": str(dev_runtime["config_home"]), "HOME": str(tmp_path)}
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "dovecote.cli", "mcp"], env=env, cwd=str(elsewhere)
    )
    seen: dict[str, Any] = {}

    async def body() -> None:
        async with Client(server) as client:
            result = await client.call_tool("whoami", {})
            assert not result.is_error, result.content
            seen.update(result.structured_content or {})

    anyio.run(body)
    with DovecoteClient(dev_runtime["endpoint"], dev_runtime["tokens"]["caller"]) as direct:
        assert seen == direct.whoami()
