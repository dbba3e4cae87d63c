"""The generic transcript form as `recall push` reads it from a file (dovecote.client.generic): chat
lines of any tool (`{"role", "content"}`), with or without a header line, or the request body as one
JSON document; what is left out is filled in the same way at every push; a bad line is refused by the
server's own gate, named by its line number; and sniffing tells it from Claude Code and Codex."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dovecote.client.capture import sniff_format
from dovecote.client.generic import GenericFormError, body_digest, read_generic
from dovecote.recall.model import gate_ingest
from tests.conftest import DATA, ROOT

CHAT = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}]


def lines(path: Path, *records: dict[str, object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_chat_lines_become_a_generic_body(tmp_path: Path) -> None:
    path = lines(tmp_path / "chat.jsonl", *CHAT)
    body = read_generic(path, path.read_bytes(), mtime=0)
    assert body["source"] == "generic" and body["project"] == ""
    assert body["session_id"].startswith("chat-") and len(body["session_id"]) == len("chat-") + 8
    assert [(m["role"], m["text"]) for m in body["messages"]] == [("user", "hello"), ("assistant", "hi")]
    assert {m["timestamp"] for m in body["messages"]} == {"1970-01-01T00:00:00.000Z"}  # the file's mtime
    assert gate_ingest(body).format == "generic"
    # The same file, pushed again, is the same body (the same session, the same digest).
    again = read_generic(path, path.read_bytes(), mtime=0)
    assert again == body and body_digest(again) == body_digest(body)
    # Two files of one name in two folders are two sessions.
    (tmp_path / "other").mkdir()
    elsewhere = lines(tmp_path / "other" / "chat.jsonl", *CHAT)
    assert read_generic(elsewhere, elsewhere.read_bytes(), mtime=0)["session_id"] != body["session_id"]


def test_a_header_line_and_the_document_form(tmp_path: Path) -> None:
    header = {"session_id": "standup-42", "source": "my-bot", "project": "ops"}
    path = lines(tmp_path / "s.jsonl", header, {"role": "user", "text": "hi", "timestamp": "2026-01-01T10:00:00Z"})
    body = read_generic(path, path.read_bytes())
    assert (body["session_id"], body["source"], body["project"]) == ("standup-42", "my-bot", "ops")
    assert read_generic(path, path.read_bytes(), project="mine")["project"] == "mine"  # --project wins
    document = tmp_path / "s.json"
    message = {"uuid": "m1", "role": "user", "text": "hi", "timestamp": "2026-01-01T10:00:00Z"}
    document.write_text(json.dumps({"session_id": "doc-1", "source": "x", "messages": [message]}, indent=2))
    assert read_generic(document, document.read_bytes())["messages"] == [message]
    assert sniff_format(document) == "generic"


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        (({"role": "user", "content": "a"}, {"role": "robot", "content": "b"}), "line 2: role must be one of"),
        (({"role": "user", "content": "a"}, {"role": "user", "content": 3}), "line 2: content must be a string"),
        (({"role": "user", "text": "a", "timestamp": "yesterday"},), "line 1: timestamp must be an RFC 3339"),
        (({"role": "user", "content": "a", "mood": "x"},), "line 1: mood is not a message field"),
        (({"session_id": "has space"}, {"role": "user", "content": "a"}), "session_id must be 1 to"),
        (({"session_id": "s"},), "the file holds no message"),
        (({"type": "user", "sessionId": "s", "message": {}},), "line 1 is a Claude Code or Codex record"),
    ],
    ids=["role", "content", "timestamp", "unknown field", "session id", "no message", "claude code"],
)
def test_a_bad_line_is_named(tmp_path: Path, records: tuple[dict[str, object], ...], expected: str) -> None:
    path = lines(tmp_path / "bad.jsonl", *records)
    with pytest.raises(GenericFormError) as caught:
        read_generic(path, path.read_bytes())
    assert str(caught.value).startswith(expected), str(caught.value)


def test_sniffing_tells_the_generic_form_from_claude_code_and_codex(tmp_path: Path) -> None:
    assert sniff_format(lines(tmp_path / "chat.jsonl", *CHAT)) == "generic"
    assert sniff_format(lines(tmp_path / "h.jsonl", {"session_id": "s"}, CHAT[0])) == "generic"
    assert sniff_format(lines(tmp_path / "n.jsonl", {"hello": 1})) is None
    codex_message = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}
    assert sniff_format(lines(tmp_path / "c.jsonl", codex_message)) is None
    assert sniff_format(DATA / "transcripts" / "claude-code" / "lanegrid-agtrace__claude_session.jsonl") == (
        "claude-code-jsonl"
    )
    assert sniff_format(ROOT / "examples" / "generic" / "chat.jsonl") == "generic"
