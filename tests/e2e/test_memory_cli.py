"""The memory SDK (dovecote.client.memory) and CLI sub-app (dovecote.cli.memory) against
`dovecote dev`. The CLI runs as a real process (`python -m dovecote.cli memory …`), so its one error
handler and exit codes are the ones a user sees."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from dovecote.client import DovecoteClient, DovecoteError
from dovecote.client.memory import MemoryClient


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def sdk(dev_runtime: dict[str, Any], role: str = "caller") -> MemoryClient:
    return MemoryClient(DovecoteClient(dev_runtime["endpoint"], dev_runtime["tokens"][role]))


def run(dev_runtime: dict[str, Any], *args: str, role: str = "caller", endpoint: str | None = None) -> Any:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")},
        "DOVECOTE_ENDPOINT": endpoint or dev_runtime["endpoint"],
        "DOVECOTE_TOKEN": dev_runtime["tokens"][role],
        "COLUMNS": "200",
    }
    done = subprocess.run(
        [sys.executable, "-m", "dovecote.cli", "memory", *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert "Traceback" not in done.stderr, done.stderr
    return SimpleNamespace(exit_code=done.returncode, output=done.stdout + done.stderr, stdout=done.stdout)


def test_the_sdk_remembers_lists_and_judges(dev_runtime: dict[str, Any]) -> None:
    memory = sdk(dev_runtime)
    scope = uid("scope")
    first = memory.remember(scope, "The cache is enabled", tags=["subject:cache"])
    second = memory.remember(scope, "The cache is not enabled", tags=["subject:cache"])
    assert first["status"] == second["status"] == "complete"
    (candidate,) = second["evidence"]["candidates"]
    assert candidate["verb"] == "conflicts_with" and candidate["to"] == first["id"]
    assert [m["id"] for m in memory.iter_memories(scope, limit=1)] == [first["id"], second["id"]]
    assert [r["id"] for r in memory.iter_memory_relations(scope, status="pending")] == [candidate["id"]]
    command = uid("c")
    judged = memory.judge_relation(candidate["id"], "dismissed", note="both were true at the time", command_id=command)
    assert judged["status"] == "dismissed"
    assert memory.judge_relation(
        candidate["id"], "dismissed", note="both were true at the time", command_id=command
    ) == (judged)
    with pytest.raises(DovecoteError) as conflict:
        memory.judge_relation(candidate["id"], "confirmed")
    assert conflict.value.status == 409 and conflict.value.code == "judgment_conflict"
    assert memory.cancel_memory_write(first["id"]) is False
    with pytest.raises(DovecoteError) as missing:
        memory.memory_write(uid("nope"))
    assert missing.value.code == "not_found"


def test_the_cli_submit_wait_status_ls_relations_judge(dev_runtime: dict[str, Any]) -> None:
    scope = uid("scope")
    first = run(dev_runtime, "submit", scope, "The retry limit is 5", "--id", uid("w"), "--wait", "20", "--json")
    assert first.exit_code == 0, first.output
    first_status = json.loads(first.output)
    assert first_status["status"] == "complete"
    second = run(dev_runtime, "submit", scope, "The retry limit is 7", "-t", "team:core", "--json")
    assert second.exit_code == 0, second.output
    write_id = json.loads(second.output)["id"]
    status = run(dev_runtime, "status", write_id, "--wait", "20", "--json")
    assert status.exit_code == 0 and json.loads(status.output)["status"] == "complete"
    human = run(dev_runtime, "status", write_id)
    assert human.exit_code == 0 and "goncho_write_complete" in human.output and "conflicts_with" in human.output
    listed = run(dev_runtime, "list", scope, "--all", "--limit", "1", "--json")
    assert [item["content"] for item in json.loads(listed.stdout)["items"]] == [
        "The retry limit is 5",
        "The retry limit is 7",
    ]
    table = run(dev_runtime, "ls", scope)
    assert table.exit_code == 0 and table.output.count("retry") == 2  # rich wraps cells at the width
    wide = run(dev_runtime, "relations", scope)  # piped: ids are printed whole, to be pasted into judge
    relations = run(dev_runtime, "relations", scope, "--status", "pending", "--json")
    (relation,) = json.loads(relations.stdout)["items"]
    assert relation["id"] in wide.stdout
    judged = run(dev_runtime, "judge", relation["id"], "confirmed", "--note", "7 it is", "--json")
    assert judged.exit_code == 0 and json.loads(judged.stdout)["relation"]["status"] == "confirmed"
    again = run(dev_runtime, "judge", relation["id"], "dismissed")
    assert again.exit_code == 1 and "judgment_conflict" in again.output
    cancel = run(dev_runtime, "cancel", write_id, "--json")
    assert cancel.exit_code == 3 and json.loads(cancel.output) == {"id": write_id, "cancelled": False}


def test_the_cli_refuses_bad_input_and_redrive_needs_admin(dev_runtime: dict[str, Any]) -> None:
    bad = run(dev_runtime, "submit", "bad scope", "x")
    assert bad.exit_code == 1 and "invalid_argument" in bad.output
    assert run(dev_runtime, "redrive").exit_code == 1  # a caller token: forbidden
    down = run(dev_runtime, "ls", "scope", endpoint="http://127.0.0.1:9")
    assert down.exit_code == 4 and len(down.output.strip().splitlines()) == 1, down.output
    redriven = run(dev_runtime, "redrive", "--json", role="admin")
    assert redriven.exit_code == 0
    moved = json.loads(redriven.output)
    assert moved["moved"] == len(moved["writes"])
