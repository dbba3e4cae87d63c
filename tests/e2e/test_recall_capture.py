"""Transcript capture against `dovecote dev`: the Claude Code hook (`dovecote recall hook`) and the
tree watcher (`dovecote recall push --watch`), as real processes. Both are incremental by SHA-256
and never fail the agent beside them: exit 0, the reason in the log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import DATA

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = DATA / "transcripts"
TINY = SAMPLES / "claude-code" / "obra-episodic-memory__tiny-conversation.jsonl"
AGENT = SAMPLES / "claude-code" / "lanegrid-agtrace__claude_agent.jsonl"
AGENT_SESSION = "7f2abd2d-7cfc-4447-9ddd-3ca8d14e02e9"
CODEX = SAMPLES / "codex" / "daaain-claude-code-log__rollout-44444444-legacy.synthetic.jsonl"


def fresh_copy(sample: Path, dest: Path, old_session: str | None = None, session: str | None = None) -> str:
    """The sample under a new session id (or `session`), so this test's files are told apart from other
    tests' on the shared runtime: the same bytes pushed by another test would be `unchanged` here."""
    session = session or str(uuid.uuid4())
    text = sample.read_text()
    if old_session:
        text = text.replace(old_session, session)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text)
    return session


def env_for(dev_runtime: dict[str, Any], tmp_path: Path, endpoint: str | None = None) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")}
    return {
        **base,
        "HOME": str(tmp_path),
        "DOVECOTE_ENDPOINT": endpoint or dev_runtime["endpoint"],
        "DOVECOTE_TOKEN": dev_runtime["tokens"]["caller"],
    }


def run_hook(payload: str, env: dict[str, str], tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """`dovecote recall hook --json` in `tmp_path`, given the hook's stdin `payload`."""
    return subprocess.run(
        [sys.executable, "-m", "dovecote.cli", "recall", "hook", "--json", *options],
        input=payload,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


def sessions_found(dev_runtime: dict[str, Any], query: str) -> set[str]:
    response = httpx.get(
        dev_runtime["endpoint"] + "/v1/recall/search",
        params={"q": query, "limit": 50},
        headers={"Authorization": f"Bearer {dev_runtime['tokens']['caller']}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return {hit["read_ref"].split(":")[0] for hit in response.json()["results"]}


def test_the_claude_code_hook_pushes_once_and_search_finds_it(dev_runtime: dict[str, Any], tmp_path: Path) -> None:
    transcript = tmp_path / ".claude" / "projects" / "-Users-testuser-example" / "tiny.jsonl"
    session = fresh_copy(TINY, transcript, old_session="67a8478e-78dc-44ab-82ea-f65c8ead85f6")
    # A subagent's transcript beside the session, where Claude Code keeps them (under the session's id:
    # test_recall_http and test_recall_cli push the sample as it is to the same runtime and authority).
    fresh_copy(AGENT, transcript.with_suffix("") / "subagents" / "agent-1.jsonl", AGENT_SESSION, session)
    payload = json.dumps(
        {
            "session_id": session,
            "transcript_path": str(transcript),
            "cwd": str(tmp_path),
            "hook_event_name": "SessionEnd",
            "reason": "exit",
        }
    )
    env = env_for(dev_runtime, tmp_path)
    first = run_hook(payload, env, tmp_path)
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert (summary["files"], summary["pushed"], summary["failed"]) == (2, 2, 0), summary
    assert session[:8] in sessions_found(dev_runtime, "tentative instructions")
    log = (tmp_path / ".dovecote" / "recall-push.log").read_text()
    assert f"SessionEnd pushed {transcript}" in log

    again = json.loads(run_hook(payload, env, tmp_path).stdout)
    assert (again["pushed"], again["unchanged"]) == (0, 2), again

    with transcript.open("a") as handle:  # the session went on: PreCompact pushes it again
        handle.write(
            json.dumps(
                {
                    "type": "user",
                    "sessionId": session,
                    "uuid": str(uuid.uuid4()),
                    "timestamp": "2025-09-19T18:00:00.000Z",
                    "cwd": str(tmp_path),
                    "message": {"role": "user", "content": "zanzibarquokka is the codeword"},
                }
            )
            + "\n"
        )
    grown = json.loads(run_hook(payload.replace("SessionEnd", "PreCompact"), env, tmp_path).stdout)
    assert (grown["pushed"], grown["unchanged"]) == (1, 1), grown
    assert session[:8] in sessions_found(dev_runtime, "zanzibarquokka")


def test_the_hook_never_fails_the_agent(dev_runtime: dict[str, Any], tmp_path: Path) -> None:
    log = tmp_path / ".dovecote" / "recall-push.log"
    # Not a hook payload at all.
    garbage = run_hook("{nope", env_for(dev_runtime, tmp_path), tmp_path)
    assert garbage.returncode == 0 and json.loads(garbage.stdout)["failed"] == 1
    assert "not a hook payload" in log.read_text()
    # The server is not running: exit 0 promptly, the reason kept.
    transcript = tmp_path / "t.jsonl"
    fresh_copy(TINY, transcript)
    payload = json.dumps({"session_id": "s", "transcript_path": str(transcript), "hook_event_name": "SessionEnd"})
    started = time.monotonic()
    down = run_hook(payload, env_for(dev_runtime, tmp_path, endpoint="http://127.0.0.1:9"), tmp_path)
    assert down.returncode == 0, down.stderr
    assert time.monotonic() - started < 30
    assert json.loads(down.stdout)["failed"] == 1
    assert f"SessionEnd failed {transcript}" in log.read_text()
    assert "Traceback" not in down.stderr
    # A bad token: refused, logged, exit 0, and the file is not marked pushed.
    env = {**env_for(dev_runtime, tmp_path), "DOVECOTE_TOKEN": "dvc_not-a-token"}
    refused = run_hook(payload, env, tmp_path)
    assert refused.returncode == 0 and json.loads(refused.stdout)["failed"] == 1
    retried = json.loads(run_hook(payload, env_for(dev_runtime, tmp_path), tmp_path).stdout)
    assert retried["pushed"] == 1, retried


def test_watch_pushes_new_and_changed_files(dev_runtime: dict[str, Any], tmp_path: Path) -> None:
    tree = tmp_path / "sessions"
    tree.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "dovecote.cli", "recall", "push", "--watch", str(tree), "--interval", "0.2", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(dev_runtime, tmp_path),
        cwd=ROOT,
    )
    try:
        session = fresh_copy(
            CODEX, tree / "2026" / "rollout-a.jsonl", old_session="44444444-4444-4444-8444-444444444444"
        )
        marker = "quetzalwombat"
        deadline = time.monotonic() + 60
        while session[:8] not in sessions_found(dev_runtime, "synthetic legacy session"):
            assert time.monotonic() < deadline, "the watcher never pushed the new file"
            time.sleep(0.3)
        with (tree / "2026" / "rollout-a.jsonl").open("a") as handle:
            message = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": marker}]}
            handle.write(json.dumps(message) + "\n")
        while session[:8] not in sessions_found(dev_runtime, marker):
            assert time.monotonic() < deadline, "the watcher never pushed the change"
            time.sleep(0.3)
    finally:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    pushed = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert [o["status"] for o in pushed].count("pushed") == 2, stdout
    assert "Traceback" not in stderr
