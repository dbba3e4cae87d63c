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


def test_tasks_and_worker_commands(dev_runtime: dict[str, Any]) -> None:
    task_id = f"cli-{uuid.uuid4().hex[:8]}"
    created = cli(dev_runtime, "tasks", "create", task_id, "hello", "--context", "cli")
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["revision"] == 1
    leased = None
    while True:  # earlier tests may have left claimable tasks: claim until ours comes up
        claim = cli(dev_runtime, "worker", "claim", role="worker")
        assert claim.returncode == 0, claim.stderr
        assignment = json.loads(claim.stdout)
        if assignment["task"]["id"] == task_id:
            leased = assignment
            break
    fence = str(leased["fence"])
    assert cli(dev_runtime, "worker", "accept", task_id, "1", fence, role="worker").returncode == 0
    asked = cli(dev_runtime, "worker", "request-input", task_id, "2", fence, "why?", role="worker")
    assert json.loads(asked.stdout)["state"] == "input_required"
    assert cli(dev_runtime, "tasks", "reply", task_id, "3", "because").returncode == 0
    done = cli(dev_runtime, "worker", "complete", task_id, "4", fence, "done", role="worker")
    assert json.loads(done.stdout)["state"] == "completed"
    stale = cli(dev_runtime, "worker", "fail", task_id, "5", fence, role="worker")
    assert stale.returncode == 1 and b"stale_lease" in stale.stderr
    messages = json.loads(cli(dev_runtime, "tasks", "messages", task_id).stdout)
    assert [m["author"] for m in messages["items"]] == ["caller", "agent", "caller", "agent"]
    events = json.loads(cli(dev_runtime, "tasks", "events", task_id, "--after", "3").stdout)
    assert [e["type"] for e in events["items"]] == ["caller_replied", "task_completed"]
    listed = json.loads(cli(dev_runtime, "tasks", "ls", "--context", "cli", "--state", "completed").stdout)
    assert task_id in [t["id"] for t in listed["items"]] and listed["total_size"] >= 1
    assert json.loads(cli(dev_runtime, "tasks", "get", task_id).stdout)["state"] == "completed"
    assert cli(dev_runtime, "worker", "leases", role="worker").returncode == 0


def test_tokens_ls_and_revoke_over_the_cli_and_the_revoked_token_is_denied(dev_runtime: dict[str, Any]) -> None:
    created = cli(
        dev_runtime, "tokens", "create", "--authority", "dev", "--role", "caller", "--agent", "bot", role="admin"
    )
    assert created.returncode == 0, created.stderr
    minted = json.loads(created.stdout)
    assert minted["agent"] == "bot" and minted["token_id"] in minted["token"]
    env_token = {**dev_runtime, "tokens": {**dev_runtime["tokens"], "bot": minted["token"]}}
    assert cli(env_token, "notes", "put", "tok:k", "1", "n", "--author", "bot", stdin=b"x", role="bot").returncode == 0
    other = cli(env_token, "notes", "put", "tok:k", "1", "n", "--author", "eve", stdin=b"x", role="bot")
    assert other.returncode == 1 and b"forbidden" in other.stderr

    listed = cli(dev_runtime, "tokens", "ls", "--json", role="admin")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.decode().splitlines() if line.strip()]
    # Listed through an eventually consistent index: in the local runtime it is immediate.
    mine = [r for r in rows if r["token_id"] == minted["token_id"]]
    assert mine and mine[0]["agent"] == "bot" and not mine[0].get("revoked_at")
    assert minted["token"] not in listed.stdout.decode()
    assert "token_hash" not in listed.stdout.decode()

    assert cli(dev_runtime, "tokens", "revoke", minted["token_id"], role="admin").returncode == 0
    denied = cli(env_token, "notes", "put", "tok:k", "1", "n", "--author", "bot", stdin=b"x", role="bot")
    assert denied.returncode == 1 and b"403" in denied.stderr
    again = cli(dev_runtime, "tokens", "ls", "--json", role="admin").stdout.decode()
    assert any(
        json.loads(line)["token_id"] == minted["token_id"] and json.loads(line)["revoked_at"]
        for line in again.splitlines()
        if line.strip()
    )
    unknown = cli(dev_runtime, "tokens", "revoke", "ffffffffffffffff", role="admin")
    assert unknown.returncode == 1 and b"not_found" in unknown.stderr
