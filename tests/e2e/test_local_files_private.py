"""The files the local side writes are its user's only (issue 15, item 4): `dovecote dev`'s data
directory (moto's snapshot holds memories in plaintext and the cursor signing key, the journal, the
recall index, the settings and tokens) and its tokens file; and the transcript capture's log, which
names no endpoint credentials."""

from __future__ import annotations

import json
import os
import socket
import stat
import uuid
from pathlib import Path

import httpx

from tests.e2e.conftest import bearer, start_dev
from tests.e2e.test_recall_capture import run_hook


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def modes(directory: Path) -> dict[str, int]:
    """Every directory and file under `directory`, itself included, by relative path."""
    found = {".": mode(directory)}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = Path(root) / name
            found[str(path.relative_to(directory))] = mode(path)
    return found


def use_everything(dev: dict[str, object]) -> None:
    """A note, a memory and a transcript: every store the data directory holds gets written."""
    tokens = dev["tokens"]
    assert isinstance(tokens, dict)
    caller = bearer(tokens["caller"])
    with httpx.Client(base_url=str(dev["endpoint"]), headers=caller, timeout=30) as http:
        put = http.put("/v1/notes", json={"key": "private", "run": 1, "name": "n", "text": "secret plan"})
        assert put.status_code == 200, put.text
        write = {"id": "w-" + uuid.uuid4().hex[:8], "scope": "private", "content": "the launch code is 1234"}
        assert http.post("/v1/memory/writes", json=write).status_code == 202
        status = http.get(f"/v1/memory/writes/{write['id']}", params={"wait": 20}).json()
        assert status["status"] == "complete", status
        said = {"uuid": str(uuid.uuid4()), "role": "user", "text": "private words", "timestamp": "2025-06-01T00:00:00Z"}
        session = {"source": "e2e", "project": "p", "session_id": str(uuid.uuid4()), "messages": [said]}
        ingested = http.post("/v1/transcripts", json=session)
        assert ingested.status_code == 200, ingested.text


def assert_private(data: Path, tokens_file: Path) -> None:
    found = modes(data)
    assert "moto.snapshot" in found and any(name.startswith("recall.sqlite") for name in found), found
    wrong = {
        name: oct(m)
        for name, m in found.items()
        if m != (0o700 if (data / name).is_dir() and not (data / name).is_symlink() else 0o600)
    }
    assert wrong == {}, f"not owner-only under {data}: {wrong}"
    assert mode(tokens_file) == 0o600


def test_every_file_the_runtime_writes_is_owner_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with start_dev(tmp_path, "--data", str(data)) as dev:
        use_everything(dev)
        assert_private(data, tmp_path / "dev-tokens.json")
    assert_private(data, tmp_path / "dev-tokens.json")  # the clean stop's compaction too


def test_a_data_directory_written_before_is_made_private_at_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with start_dev(tmp_path, "--data", str(data)) as dev:
        use_everything(dev)
    # As an older runtime left them: 0755 and 0644, a left-over temporary snapshot included.
    (data / ".moto.snapshot.tmp").write_bytes(b"left by a crash")
    mine = data / "my-notes.txt"
    mine.write_text("not the runtime's")
    for path in [data, *data.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    assert mode(data / "moto.snapshot") == 0o644
    with start_dev(tmp_path, "--data", str(data)):
        mine.rename(tmp_path / "my-notes.txt")  # not the runtime's file: left as it was, below
        assert_private(data, tmp_path / "dev-tokens.json")
    assert mode(tmp_path / "my-notes.txt") == 0o644


def test_the_capture_hook_logs_privately_and_without_endpoint_credentials(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])  # closed once the block ends: the push fails
    home = tmp_path / "home"
    home.mkdir()
    transcript = tmp_path / "session.jsonl"
    line = {"type": "user", "sessionId": "s-hook", "uuid": "u1", "timestamp": "2025-06-01T00:00:00Z", "message": {}}
    transcript.write_text(json.dumps(line) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")} | {
        "HOME": str(home),
        "DOVECOTE_ENDPOINT": f"http://agent:pw-s3cret@127.0.0.1:{port}/?token=q-s3cret",
        "DOVECOTE_TOKEN": "dvc_x_y",
    }
    payload = json.dumps({"transcript_path": str(transcript), "hook_event_name": "SessionEnd"})
    done = run_hook(payload, env, tmp_path, "--timeout", "5")
    assert done.returncode == 0 and json.loads(done.stdout)["failed"] == 1, done.stderr
    log = home / ".dovecote" / "recall-push.log"
    written = log.read_text()
    assert f"SessionEnd failed {transcript}" in written and f"127.0.0.1:{port}" in written
    assert "s3cret" not in written and "agent:" not in written and "token=" not in written
    assert mode(log) == 0o600 and mode(log.parent) == 0o700
