"""`dovecote recall …` against `dovecote dev`: push walks Claude Code and Codex trees incrementally
(SHA-256 state), large files go through the upload path, and the verbs print JSON, oneline and text."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dovecote.cli import app
from dovecote.cli.recall import project_folder, sniff_format
from tests.conftest import DATA

SAMPLES = DATA / "transcripts"


@pytest.fixture
def cli(dev_runtime: dict[str, Any]) -> Any:
    runner = CliRunner()
    env = {"DOVECOTE_ENDPOINT": dev_runtime["endpoint"], "DOVECOTE_TOKEN": dev_runtime["tokens"]["caller"]}

    def run(*args: str) -> Any:
        return runner.invoke(app, ["recall", *args], env=env)

    return run


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home directory with Claude Code and Codex trees (copies made at test time, in tmp)."""
    claude = tmp_path / ".claude" / "projects" / "-Users-test-user-agent-sample"
    claude.mkdir(parents=True)
    shutil.copy(SAMPLES / "claude-code" / "lanegrid-agtrace__claude_session.jsonl", claude / "7f2abd2d.jsonl")
    shutil.copy(SAMPLES / "claude-code" / "lanegrid-agtrace__claude_agent.jsonl", claude / "agent-0c4c3cf8.jsonl")
    (claude / "not-a-transcript.jsonl").write_text('{"hello": 1}\n')
    codex = tmp_path / ".codex" / "sessions" / "2026" / "01" / "02"
    codex.mkdir(parents=True)
    name = "daaain-claude-code-log__rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.synthetic.jsonl"
    shutil.copy(SAMPLES / "codex" / name, codex / "rollout-2026-01-02T03-04-05-11111111.jsonl")
    shutil.copy(
        SAMPLES / "codex" / "daaain-claude-code-log__rollout-44444444-legacy.synthetic.jsonl",
        tmp_path / ".codex" / "sessions" / "rollout-44444444.jsonl",
    )
    return tmp_path


def test_sniffing_and_project_folders(home: Path) -> None:
    claude = home / ".claude" / "projects" / "-Users-test-user-agent-sample"
    assert sniff_format(claude / "7f2abd2d.jsonl") == "claude-code-jsonl"
    assert sniff_format(claude / "not-a-transcript.jsonl") is None
    assert sniff_format(home / ".codex" / "sessions" / "rollout-44444444.jsonl") == "codex-jsonl"
    assert project_folder(claude / "7f2abd2d.jsonl") == "-Users-test-user-agent-sample"
    assert project_folder(claude / "sess" / "subagents" / "agent-1.jsonl") == "-Users-test-user-agent-sample"
    assert project_folder(home / ".codex" / "sessions" / "rollout-44444444.jsonl") == ""


@pytest.fixture
def own_cli(dev_runtime: dict[str, Any]) -> Any:
    """The CLI with a caller token of a fresh authority: the server has none of its files yet (the
    push decides what to send from what the server lacks, and other tests push the same samples)."""
    from tests.support.authorities import fresh_authority

    own = fresh_authority(dev_runtime, "push")
    env = {"DOVECOTE_ENDPOINT": own.endpoint, "DOVECOTE_TOKEN": own.token("caller")}
    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(app, ["recall", *args], env=env)

    return run


def test_push_is_incremental(own_cli: Any, home: Path) -> None:
    cli = own_cli
    state = str(home / "state.json")
    trees = [str(home / ".claude" / "projects"), str(home / ".codex" / "sessions")]
    first = cli("push", *trees, "--state", state, "--json")
    assert first.exit_code == 0, first.output
    summary = json.loads(first.stdout)
    assert (summary["files"], summary["pushed"], summary["skipped"], summary["failed"]) == (5, 4, 1, 0)
    assert summary["messages"] == 21 + 2 + 9 + 2
    again = json.loads(cli("push", *trees, "--state", state, "--json").stdout)
    assert (again["pushed"], again["unchanged"]) == (0, 4)
    legacy = home / ".codex" / "sessions" / "rollout-44444444.jsonl"
    legacy.write_text(
        legacy.read_text().rstrip("\n")
        + "\n"
        + json.dumps({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "one more line"}]})
        + "\n"
    )
    changed = json.loads(cli("push", *trees, "--state", state, "--json").stdout)
    assert (changed["pushed"], changed["unchanged"], changed["messages"]) == (1, 3, 3)


def test_a_large_file_goes_through_the_upload_path(cli: Any, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dovecote.client.recall as sdk

    monkeypatch.setattr(sdk, "INLINE_TRANSCRIPT_BYTES", 100)
    marker = "w" + uuid.uuid4().hex[:10]
    path = home / "big.jsonl"
    path.write_text(
        json.dumps({"id": str(uuid.uuid4()), "timestamp": "2026-01-04T05:06:07.000Z"})
        + "\n"
        + json.dumps({"type": "message", "role": "user", "content": [{"type": "input_text", "text": marker}]})
        + "\n"
    )
    result = cli("push", str(path), "--state", str(home / "state.json"), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["queued"] == 1
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = json.loads(cli("search", marker, "--json").stdout)
        if found["count"]:
            break
        time.sleep(0.3)
    assert found["count"] == 1


def test_search_read_outline_topics(cli: Any, home: Path) -> None:
    cli("push", str(home / ".claude" / "projects"), "--state", str(home / "state.json"))
    envelope = json.loads(cli("search", "hoge python3", "--json").stdout)
    assert envelope["count"] >= 1 and envelope["results"][0]["read_ref"]
    ref = envelope["results"][0]["read_ref"]
    oneline = cli("search", "hoge python3", "--oneline")
    assert oneline.exit_code == 0 and oneline.stdout.split("\t")[0] == ref
    read = json.loads(cli("read", ref, "--budget", "200", "--json").stdout)
    assert read["read_ref"] == ref and sum(len(m["text"]) for m in read["messages"]) <= 200
    text = cli("read", ref)
    assert text.exit_code == 0 and "▶" in text.stdout
    outline = json.loads(cli("outline", "7f2abd2d", "--subagents", "--json").stdout)
    assert outline["subagents"][0]["session_id"].endswith("/0c4c3cf8")
    labelled = cli("topics", "--ref", ref, "--label", "python3 fallback", "--json")
    assert labelled.exit_code == 0, labelled.output
    listed = cli("topics", "fallback")
    assert "python3 fallback" in listed.stdout
    bad = cli("read", "not-a-ref")
    assert bad.exit_code == 1 and "expected <session8>:<uuid8>" in bad.output


def test_the_search_table_prints_refs_whole(cli: Any, home: Path) -> None:
    """A ref the table prints works in `recall read` (it used to be cut: `7f2abd2d~0c4c3cf8…`)."""
    cli("push", str(home / ".claude" / "projects"), "--state", str(home / "state.json"))
    envelope = json.loads(cli("search", "hoge python3", "--json").stdout)
    table = cli("search", "hoge python3")
    assert table.exit_code == 0, table.output
    refs = [hit["read_ref"] for hit in envelope["results"]]
    assert refs and all(ref in table.stdout for ref in refs)
    assert "…" not in table.stdout.split("\n")[1]
    longest = max(refs, key=len)
    assert cli("read", longest, "--budget", "200").exit_code == 0


def test_the_empty_topics_hint_names_the_options(dev_runtime: dict[str, Any]) -> None:
    from tests.support.authorities import fresh_authority

    own = fresh_authority(dev_runtime, "topics")
    env = {"DOVECOTE_ENDPOINT": own.endpoint, "DOVECOTE_TOKEN": own.token("caller")}
    empty = CliRunner().invoke(app, ["recall", "topics"], env=env)
    assert empty.exit_code == 0, empty.output
    assert "recall topics --ref REF --label TEXT" in empty.stderr and "/v1/recall/topics" not in empty.output


def test_push_sends_again_what_another_authority_lacks(dev_runtime: dict[str, Any], home: Path) -> None:
    """The state remembers what was pushed, but the server decides: the same files pushed with another
    authority's token are sent again, not reported unchanged (and search finds them there)."""
    from tests.support.authorities import fresh_authority

    state = str(home / "state.json")
    trees = [str(home / ".claude" / "projects")]
    runner = CliRunner()
    for name in ("pusha", "pushb"):
        own = fresh_authority(dev_runtime, name)
        env = {"DOVECOTE_ENDPOINT": own.endpoint, "DOVECOTE_TOKEN": own.token("caller")}
        first = json.loads(runner.invoke(app, ["recall", "push", *trees, "--state", state, "--json"], env=env).stdout)
        assert (first["pushed"], first["unchanged"]) == (2, 0), first
        again = json.loads(runner.invoke(app, ["recall", "push", *trees, "--state", state, "--json"], env=env).stdout)
        assert (again["pushed"], again["unchanged"]) == (0, 2), again
        found = json.loads(runner.invoke(app, ["recall", "search", "hoge python3", "--json"], env=env).stdout)
        assert found["count"] >= 1


def test_push_sends_a_generic_conversation(own_cli: Any, tmp_path: Path) -> None:
    """A conversation of any other tool, `{"role", "content"}` per line, is pushed in the generic form
    (sniffed, or with --format generic), found by search, and not sent again while unchanged; a bad
    line fails that file with its line number and sends nothing of it."""
    marker = "gen" + uuid.uuid4().hex[:10]
    chat = tmp_path / "chat.jsonl"
    chat.write_text(
        json.dumps({"role": "user", "content": f"where is the {marker} config?"})
        + "\n"
        + json.dumps({"role": "assistant", "content": "in etc, next to the others"})
        + "\n"
    )
    state = str(tmp_path / "state.json")
    first = own_cli("push", str(chat), "--state", state, "--json")
    assert first.exit_code == 0, first.output
    assert (json.loads(first.stdout)["pushed"], json.loads(first.stdout)["messages"]) == (1, 2)
    found = json.loads(own_cli("search", marker, "--source", "generic", "--json").stdout)
    assert found["count"] == 1 and found["results"][0]["session_id"].startswith("chat-")
    again = json.loads(own_cli("push", str(chat), "--state", state, "--format", "generic", "--json").stdout)
    assert (again["pushed"], again["unchanged"]) == (0, 1)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"role": "user", "content": "a"}) + "\n" + json.dumps({"role": "bot", "content": "b"}))
    refused = own_cli("push", str(bad), "--state", state, "--json")
    assert refused.exit_code == 1
    assert json.loads(refused.stdout)["failures"][0]["error"].startswith("not the generic form: line 2: role")
