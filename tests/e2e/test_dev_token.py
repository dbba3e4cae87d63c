"""A second authority locally is one command: `dovecote dev token --authority A --role R` asks the
running `dovecote dev` (its endpoint and control secret from the tokens file), which mints the token
(infra/local/control.py). Also: `tokens bootstrap` honours AWS_REGION, as its message says."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import ROOT
from tests.e2e.conftest import bearer


def dovecote(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DOVECOTE_"))}
    return subprocess.run(
        [sys.executable, "-m", "dovecote.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=clean | (env or {}),
        timeout=120,
    )


def whoami(endpoint: str, token: str) -> dict[str, Any]:
    answer = httpx.get(endpoint + "/v1/whoami", headers=bearer(token), timeout=30)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_a_token_of_another_authority_is_one_command(dev_runtime: dict[str, Any]) -> None:
    tokens_file = str(dev_runtime["tokens_file"])
    authority = "team-" + uuid.uuid4().hex[:8]
    plain = dovecote("dev", "token", "--authority", authority, "--role", "caller", "--tokens-file", tokens_file)
    assert plain.returncode == 0, plain.stderr
    token = plain.stdout.strip()
    assert plain.stdout.count("\n") == 1  # the token alone: TOKEN=$(dovecote dev token ...)
    me = whoami(dev_runtime["endpoint"], token)
    assert (me["authority"], me["role"]) == (authority, "caller")

    worker = dovecote(
        "dev", "token", "--authority", authority, "--role", "worker", "--worker", "w1", "--json",
        "--tokens-file", tokens_file,
    )  # fmt: skip
    assert worker.returncode == 0, worker.stderr
    minted = json.loads(worker.stdout)
    assert set(minted) == {"token", "token_id", "authority", "role", "worker", "agent", "expires_at"}
    assert (minted["authority"], minted["role"], minted["worker"]) == (authority, "worker", "w1")
    me = whoami(dev_runtime["endpoint"], minted["token"])
    assert (me["authority"], me["role"], me["worker"]) == (authority, "worker", "w1")

    # Without --authority: a token of the runtime's own authority, `dev`.
    own = dovecote("dev", "token", "--role", "admin", "--json", "--tokens-file", tokens_file)
    assert own.returncode == 0, own.stderr
    assert whoami(dev_runtime["endpoint"], json.loads(own.stdout)["token"])["authority"] == "dev"

    # The other authority sees nothing of `dev`'s: a note written by the dev caller is not found.
    note = {"key": "iso-" + uuid.uuid4().hex[:6], "run": 1, "name": "n", "text": "mine"}
    ref = httpx.put(
        dev_runtime["endpoint"] + "/v1/notes", json=note, headers=bearer(dev_runtime["tokens"]["caller"]), timeout=30
    ).json()["ref"]
    assert httpx.get(f"{dev_runtime['endpoint']}/v1/notes/{ref}", headers=bearer(token), timeout=30).status_code == 404


def test_bad_input_is_a_4xx_and_mints_nothing(dev_runtime: dict[str, Any]) -> None:
    tokens_file = str(dev_runtime["tokens_file"])
    authority = "bad-" + uuid.uuid4().hex[:8]
    refused = dovecote("dev", "token", "--authority", authority, "--role", "boss", "--tokens-file", tokens_file)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("error: 400 invalid_argument:"), refused.stderr
    bad_id = dovecote("dev", "token", "--authority", "no spaces", "--tokens-file", tokens_file)
    assert bad_id.returncode == 1 and "invalid_argument" in bad_id.stderr
    admin = json.loads(
        dovecote(
            "dev", "token", "--authority", authority, "--role", "admin", "--json", "--tokens-file", tokens_file
        ).stdout
    )  # fmt: skip
    listed = httpx.get(dev_runtime["endpoint"] + "/v1/admin/tokens", headers=bearer(admin["token"]), timeout=30)
    assert [t["token_id"] for t in listed.json()["items"]] == [admin["token_id"]]  # the refused mints left nothing


def test_the_control_route_needs_the_secret(dev_runtime: dict[str, Any]) -> None:
    url = dev_runtime["endpoint"] + "/_dev/tokens"
    secret = json.loads(Path(dev_runtime["tokens_file"]).read_text())["control"]
    body = {"authority": "x" + uuid.uuid4().hex[:6], "role": "admin"}
    for headers in ({}, {"X-Dovecote-Dev-Control": "wrong"}, bearer(dev_runtime["tokens"]["admin"])):
        refused = httpx.post(url, json=body, headers=headers, timeout=30)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    assert httpx.get(url, headers={"X-Dovecote-Dev-Control": secret}, timeout=30).status_code == 405
    assert httpx.post(url, content=b"[]", headers={"X-Dovecote-Dev-Control": secret}, timeout=30).status_code == 400
    unknown = httpx.post(url, json={**body, "scope": "all"}, headers={"X-Dovecote-Dev-Control": secret}, timeout=30)
    assert unknown.status_code == 400 and unknown.json()["error"]["details"] == {"field": "scope"}
    assert httpx.get(dev_runtime["endpoint"] + "/_dev/other", timeout=30).status_code == 404


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_without_a_running_runtime_the_command_says_so(tmp_path: Path) -> None:
    missing = dovecote("dev", "token", "--authority", "a", "--tokens-file", str(tmp_path / "none.json"))
    assert missing.returncode == 4 and missing.stderr.startswith("error: no running dovecote dev:"), missing.stderr
    stale = tmp_path / "stale.json"
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    stale.write_text(json.dumps({"endpoint": endpoint, "tokens": {}, "control": "x"}))
    gone = dovecote("dev", "token", "--authority", "a", "--tokens-file", str(stale))
    assert gone.returncode == 4, gone.stderr
    assert gone.stderr.startswith(f"error: cannot reach dovecote dev at {endpoint}"), gone.stderr
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"endpoint": endpoint, "tokens": {}}))
    older = dovecote("dev", "token", "--authority", "a", "--tokens-file", str(old))
    assert older.returncode == 4 and "names no dev control secret" in older.stderr


def test_bootstrap_takes_its_region_from_aws_region(tmp_path: Path) -> None:
    env = {
        "AWS_REGION": "us-east-1",  # and no AWS_DEFAULT_REGION, no config file
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{_closed_port()}",
        "AWS_MAX_ATTEMPTS": "1",
    }
    args = ("tokens", "bootstrap", "--authority", "a", "--table", "t")
    without = dovecote(*args, env={k: v for k, v in env.items() if k != "AWS_REGION"})
    assert without.returncode == 4
    assert without.stderr.startswith("error: no AWS region: pass --region, or set AWS_REGION")
    result = dovecote(*args, env=env)
    # The region was found: what fails now is the (closed) endpoint.
    assert result.returncode != 0 and "no AWS region" not in result.stderr, result.stderr
    assert "storage dependency failed" in result.stderr or "cannot reach AWS" in result.stderr


def test_dev_admin_tokens_are_short_lived_and_the_banner_says_so(dev_runtime: dict[str, Any]) -> None:
    """Admin tokens mint and revoke every token of the authority: the dev runtime's lasts 7 days (it
    is renewed at a start that finds it due), as does one from `dovecote dev token --role admin`; the
    caller and worker tokens keep their year."""
    from datetime import UTC, datetime, timedelta

    def lifetime(token: str) -> timedelta:
        expires = whoami(dev_runtime["endpoint"], token)["expires_at"]
        return datetime.fromisoformat(expires.replace("Z", "+00:00")) - datetime.now(UTC)

    assert timedelta(days=6) < lifetime(dev_runtime["tokens"]["admin"]) <= timedelta(days=7)
    assert lifetime(dev_runtime["tokens"]["caller"]) > timedelta(days=300)
    assert lifetime(dev_runtime["tokens"]["worker"]) > timedelta(days=300)
    minted = dovecote(
        "dev", "token", "--authority", "short-" + uuid.uuid4().hex[:6], "--role", "admin",
        "--tokens-file", str(dev_runtime["tokens_file"]),
    )  # fmt: skip
    assert minted.returncode == 0, minted.stderr
    assert lifetime(minted.stdout.strip()) <= timedelta(days=7)
    assert "the admin token lasts 7 days" in dev_runtime["log"].read_text()
