"""The capture rules without a server: the server says which files it lacks (a reset server or another
authority gets them again), the local state (per endpoint and authority) serves a server without the
check route, a refused token fails every file with its reason, a watched file is pushed only once it
holds still, a failure is retried, and the log stays bounded."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from dovecote.client import DovecoteError
from dovecote.client.capture import MAX_LOG_BYTES, TranscriptPusher, Watcher, hook_files, log_line
from tests.conftest import DATA

SAMPLE = (DATA / "transcripts" / "claude-code" / "obra-episodic-memory__tiny-conversation.jsonl").read_text()


class RecordingClient:
    """Stands in for the SDK against one server (not for AWS): the digests each authority ingested,
    whoami, the check route (or none: `has_check`), failures on demand."""

    def __init__(self, endpoint: str = "http://dev", authority: str = "a", server: dict[str, set[str]] | None = None):
        self.endpoint = endpoint
        self.authority = authority
        self.server = server if server is not None else {}
        self.pushed: list[tuple[str, bytes]] = []
        self.fail = False
        self.refused = False
        self.has_check = True

    def whoami(self) -> dict[str, Any]:
        if self.refused:
            raise DovecoteError(403, "forbidden", "Forbidden")
        return {"authority": self.authority, "role": "caller"}

    def check_transcripts(self, sha256: list[str]) -> list[str]:
        if not self.has_check:
            raise DovecoteError(404, "not_found", "Not Found")
        known = self.server.get(self.authority, set())
        return [d for d in sha256 if d not in known]

    def push_transcript(self, path: Path, fmt: str, *, data: bytes, **_: Any) -> dict[str, Any]:
        if self.fail:
            raise DovecoteError(503, "unavailable", "Dovecote is not reachable")
        self.pushed.append((path.name, data))
        self.server.setdefault(self.authority, set()).add(hashlib.sha256(data).hexdigest())
        return {"messages_indexed": data.count(b"\n")}


def test_the_server_says_what_it_lacks(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(SAMPLE)
    state = tmp_path / "state.json"
    server: dict[str, set[str]] = {}
    client = RecordingClient(server=server)
    assert TranscriptPusher(client, state).push(path).status == "pushed"
    assert TranscriptPusher(client, state).push(path).status == "unchanged"
    # Another authority on the same endpoint lacks it: sent again, whatever the state file says.
    other = RecordingClient(authority="b", server=server)
    assert TranscriptPusher(other, state).push(path).status == "pushed"
    # A server started --fresh lacks everything: sent again.
    server.clear()
    assert TranscriptPusher(client, state).push(path).status == "pushed"
    path.write_text(SAMPLE + SAMPLE.splitlines()[0] + "\n")
    pusher = TranscriptPusher(client, state)
    pusher.check([path])
    assert pusher.push(path).status == "pushed"
    assert len(client.pushed) == 3
    assert set(json.loads(state.read_text())) == {"http://dev#a", "http://dev#b"}


def test_without_the_check_route_the_state_of_endpoint_and_authority_decides(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(SAMPLE)
    state = tmp_path / "state.json"
    client = RecordingClient()
    client.has_check = False
    assert TranscriptPusher(client, state).push(path).status == "pushed"
    assert TranscriptPusher(client, state).push(path).status == "unchanged"  # a new process reads the state
    other = RecordingClient(authority="b")
    other.has_check = False
    assert TranscriptPusher(other, state).push(path).status == "pushed"
    elsewhere = RecordingClient("http://elsewhere")
    elsewhere.has_check = False
    assert TranscriptPusher(elsewhere, state).push(path).status == "pushed"
    assert set(json.loads(state.read_text())) == {"http://dev#a", "http://dev#b", "http://elsewhere#a"}


def test_a_refused_token_fails_every_file_with_its_reason(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(SAMPLE)
    state = tmp_path / "state.json"
    client = RecordingClient()
    assert TranscriptPusher(client, state).push(path).status == "pushed"
    client.refused = True
    refused = TranscriptPusher(client, state).push(path)
    assert (refused.status, refused.reason) == ("failed", "403 forbidden: Forbidden")
    assert len(client.pushed) == 1


def test_a_failed_push_is_not_remembered(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(SAMPLE)
    client = RecordingClient()
    client.fail = True
    outcome = TranscriptPusher(client, tmp_path / "state.json").push(path)
    assert (outcome.status, outcome.reason) == ("failed", "503 unavailable: Dovecote is not reachable")
    client.fail = False
    assert TranscriptPusher(client, tmp_path / "state.json").push(path).status == "pushed"


def test_not_a_transcript_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"hello": 1}\n')
    assert TranscriptPusher(RecordingClient(), tmp_path / "s.json").push(path).status == "skipped"


def test_watch_pushes_a_file_once_it_holds_still_and_retries_failures(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    client = RecordingClient()
    watcher = Watcher(TranscriptPusher(client, tmp_path / "state.json"), [tree])
    path = tree / "a.jsonl"
    path.write_text(SAMPLE)
    assert watcher.poll() == []  # new: wait one poll
    client.fail = True
    assert [o.status for o in watcher.poll()] == ["failed"]
    client.fail = False
    assert [o.status for o in watcher.poll()] == ["pushed"]
    assert watcher.poll() == []  # settled
    with path.open("a") as handle:
        handle.write(SAMPLE.splitlines()[1] + "\n")
    os.utime(path, ns=(1, 1))  # a distinct mtime even on a coarse clock
    assert watcher.poll() == []  # changed: wait for it to hold still
    assert [o.status for o in watcher.poll()] == ["pushed"]
    assert len(client.pushed) == 2


def test_hook_files_include_subagents(tmp_path: Path) -> None:
    session = tmp_path / "abc.jsonl"
    session.write_text(SAMPLE)
    (tmp_path / "abc" / "subagents").mkdir(parents=True)
    (tmp_path / "abc" / "subagents" / "agent-2.jsonl").write_text(SAMPLE)
    (tmp_path / "abc" / "subagents" / "agent-1.jsonl").write_text(SAMPLE)
    assert [p.name for p in hook_files(session)] == ["abc.jsonl", "agent-1.jsonl", "agent-2.jsonl"]


def test_the_log_stays_bounded(tmp_path: Path) -> None:
    log = tmp_path / "push.log"
    line = "x" * 1000
    for _ in range(MAX_LOG_BYTES // 1000 + 50):
        log_line(log, line)
    size = log.stat().st_size
    assert size <= MAX_LOG_BYTES + 1001
    assert all(len(entry) == 1000 for entry in log.read_text().splitlines())
    log_line(tmp_path / "file-not-dir" / "x.log", "ok")  # parent creatable: written
    (tmp_path / "blocked").write_text("a file where a directory should be")
    log_line(tmp_path / "blocked" / "x.log", "never raises")
