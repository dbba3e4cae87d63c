"""The capture's files are the user's only, and its log names no credentials (issue 15, item 4)."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import pytest

from dovecote.client import DovecoteClient
from dovecote.client.capture import TranscriptPusher, log_line, log_outcomes, redact_urls

# One Claude Code line: enough for the format sniffer.
SAMPLE = '{"type":"user","sessionId":"s-private","uuid":"u1","timestamp":"2025-06-01T00:00:00Z","message":{}}\n'


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once it is closed


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("at http://agent:pw@127.0.0.1:9/?token=tk: refused", "at http://127.0.0.1:9/: refused"),
        ("https://h.example/v1/x?X-Amz-Signature=sig#frag, then", "https://h.example/v1/x, then"),
        ("http://user@h:1 (from DOVECOTE_ENDPOINT)", "http://h:1 (from DOVECOTE_ENDPOINT)"),
        ("http://u:raw/slash@h/p?q", "http://h/p"),
        ("no url: 503 unavailable", "no url: 503 unavailable"),
    ],
)
def test_urls_are_logged_without_userinfo_or_query(text: str, shown: str) -> None:
    assert redact_urls(text) == shown


def test_a_push_log_line_for_an_endpoint_with_credentials_names_only_its_host(tmp_path: Path) -> None:
    port = closed_port()
    endpoint = f"http://agent:pw-s3cret@127.0.0.1:{port}/?token=q-s3cret"
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(SAMPLE)
    with DovecoteClient(endpoint, "dvc_x_y", max_attempts=1, timeout=5) as client:
        outcome = TranscriptPusher(client, tmp_path / "state.json").push(transcript)
    assert outcome.status == "failed" and "s3cret" in outcome.message  # the SDK's error names the endpoint
    log = tmp_path / "logs" / "recall-push.log"
    log_outcomes(log, "SessionEnd", [outcome])
    written = log.read_text()
    assert f"SessionEnd failed {transcript}" in written
    assert f"http://127.0.0.1:{port}/" in written
    assert "s3cret" not in written and "agent" not in written and "token=" not in written
    assert mode(log) == 0o600 and mode(log.parent) == 0o700


def test_a_log_and_a_state_written_before_are_made_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    own = tmp_path / ".dovecote"
    own.mkdir(mode=0o755)
    own.chmod(0o755)
    log, state = own / "recall-push.log", own / "recall-push.json"
    log.write_text("an old line\n")
    state.write_text("{}")
    log.chmod(0o644)
    state.chmod(0o644)
    log_line(Path("~/.dovecote/recall-push.log"), "a new line")
    assert log.read_text() == "an old line\na new line\n"
    assert mode(log) == 0o600 and mode(own) == 0o700

    class Client:
        endpoint = "http://user:pw@dev"

        def whoami(self) -> dict[str, str]:
            return {"authority": "a"}

        def check_transcripts(self, sha256: list[str]) -> list[str]:
            return sha256

        def push_transcript(self, *_: object, **__: object) -> dict[str, int]:
            return {"messages_indexed": 1}

    transcript = tmp_path / "s.jsonl"
    transcript.write_text(SAMPLE)
    assert TranscriptPusher(Client(), Path("~/.dovecote/recall-push.json")).push(transcript).status == "pushed"
    assert mode(state) == 0o600 and "http://user:pw@dev" in state.read_text()


def test_a_directory_the_user_named_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    log_line(shared / "push.log", "line")
    assert mode(shared) == 0o755 and mode(shared / "push.log") == 0o600
