"""The `dovecote` CLI against `dovecote dev`: put from stdin and a file, get, ls --all, rm, tokens."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from dovecote.notes.model import note_ref


def cli(
    dev_runtime: dict[str, Any], *args: str, stdin: bytes = b"", role: str = "caller"
) -> subprocess.CompletedProcess[bytes]:
    env = {
        **os.environ,
        "DOVECOTE_ENDPOINT": dev_runtime["endpoint"],
        "DOVECOTE_TOKEN": dev_runtime["tokens"][role],
        "COLUMNS": "200",
    }
    return subprocess.run(
        [sys.executable, "-m", "dovecote.cli", *args], input=stdin, capture_output=True, env=env, timeout=60
    )


def test_notes_put_get_ls_rm(dev_runtime: dict[str, Any], tmp_path: Path) -> None:
    key = f"cli:{uuid.uuid4().hex[:8]}"
    put = cli(dev_runtime, "notes", "put", key, "1", "plan", "--author", "claude", stdin=b"from stdin\n")
    assert put.returncode == 0, put.stderr
    assert json.loads(put.stdout)["ref"] == note_ref(key, 1, "plan", "claude")
    body = tmp_path / "critique.bin"
    body.write_bytes(b"\x00\xffbinary")
    assert cli(dev_runtime, "notes", "put", key, "1", "critique", "-f", str(body)).returncode == 0
    got = cli(dev_runtime, "notes", "get", "--key", key, "--run", "1", "--name", "plan", "--author", "claude")
    assert got.returncode == 0 and got.stdout == b"from stdin\n"
    assert cli(dev_runtime, "notes", "get", note_ref(key, 1, "critique", "")).stdout == b"\x00\xffbinary"
    listed = cli(dev_runtime, "notes", "ls", "--key", key, "--limit", "1", "--all", "--json")
    assert listed.returncode == 0, listed.stderr
    names = sorted(json.loads(line)["name"] for line in listed.stdout.decode().splitlines() if line.strip())
    assert names == ["critique", "plan"]
    assert cli(dev_runtime, "notes", "rm", note_ref(key, 1, "plan", "claude")).returncode == 0
    missing = cli(dev_runtime, "notes", "rm", note_ref(key, 1, "plan", "claude"))
    assert missing.returncode == 1 and b"not_found" in missing.stderr


def test_tokens_create_with_the_admin_token(dev_runtime: dict[str, Any]) -> None:
    created = cli(
        dev_runtime, "tokens", "create", "--authority", "dev", "--role", "worker", "--worker", "w9", role="admin"
    )
    assert created.returncode == 0, created.stderr
    out = json.loads(created.stdout)
    assert out["worker"] == "w9" and out["token"].startswith("dvc_")
    denied = cli(dev_runtime, "tokens", "create", "--authority", "dev", "--role", "caller", role="caller")
    assert denied.returncode == 1 and b"forbidden" in denied.stderr


def test_dev_refuses_data_dir_until_built(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dovecote.cli", "dev", "--data", str(tmp_path)], capture_output=True, timeout=60
    )
    assert result.returncode == 2 and b"not built yet" in result.stderr
