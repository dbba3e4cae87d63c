"""The transcript parsers against every sample in tests/data/transcripts (third-party fixtures
kept with their licenses): message counts, kinds, envelopes, human turns, sidechain linkage, stable uuids, and the
malformed-line rule. The expected figures were read off the files by hand (see SOURCES.md)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from dovecote.recall.formats import parse, parse_claude, parse_codex, parse_generic
from dovecote.recall.model import (
    TEXT_CAP,
    TOOL_INPUT_CAP,
    TOOL_RESULT_CAP,
    TRUNCATION_MARKER,
    Session,
    canonical_uuid,
    gate_ingest,
)
from tests.conftest import DATA

SAMPLES = DATA / "transcripts"
CLAUDE = SAMPLES / "claude-code"
CODEX = SAMPLES / "codex"


def read(path: Path) -> bytes:
    return path.read_bytes()


def kinds(session: Session) -> Counter[str]:
    return Counter(m.kind for m in session.messages)


def only(sessions: list[Session]) -> Session:
    assert len(sessions) == 1, [s.session_id for s in sessions]
    return sessions[0]


def test_every_sample_is_covered_below() -> None:
    # A new sample dropped into the folder must get its own expectations here.
    names = sorted(p.name for p in [*CLAUDE.glob("*.jsonl"), *CODEX.glob("*.jsonl")])
    assert len(names) == 12


# ---- Claude Code ------------------------------------------------------------------------------------


def test_claude_session_thinking_tools_and_envelopes() -> None:
    result = parse_claude(read(CLAUDE / "lanegrid-agtrace__claude_session.jsonl"))
    session = only(result.sessions)
    assert session.session_id == "7f2abd2d-7cfc-4447-9ddd-3ca8d14e02e9"
    assert session.source == "claude-code" and session.project == "agent-sample"
    assert session.cwd == "/Users/test_user/agent-sample"
    # 22 message lines; one tool_result is empty and is not indexed.
    assert len(session.messages) == 21
    assert kinds(session) == {"text": 8, "thinking": 6, "tool": 7}
    assert result.skipped == 4 and result.malformed == 0  # four file-history-snapshot lines
    envelopes = [m.text[:20] for m in session.messages if m.envelope]
    assert envelopes == ["Caveat: The messages", "<command-name>/exit<", "<local-command-stdou"]
    assert [m.text[:12] for m in session.messages if m.human] == ["add myapp di", "cd to myapp "]
    assert session.messages[0].uuid == "f370ce0f-84e8-42ab-a6c9-c5d925abd271"  # its own uuids are kept
    assert session.messages[1].parent_uuid == session.messages[0].uuid
    assert all(m.timestamp.endswith("Z") for m in session.messages)
    errors = [m.text for m in session.messages if m.text.startswith("[error]")]
    assert errors == ["[error] error: target shim binary not found"]


def test_claude_subagent_file_is_its_own_session_linked_to_the_parent() -> None:
    session = only(parse_claude(read(CLAUDE / "lanegrid-agtrace__claude_agent.jsonl")).sessions)
    assert session.session_id == "7f2abd2d-7cfc-4447-9ddd-3ca8d14e02e9/0c4c3cf8"
    assert session.parent_session == "7f2abd2d-7cfc-4447-9ddd-3ca8d14e02e9" and session.agent == "0c4c3cf8"
    assert [m.role for m in session.messages] == ["user", "assistant"]
    assert not any(m.human for m in session.messages)  # the parent agent wrote "Warmup", not a person


def test_claude_inline_sidechain_lines_split_into_a_thread() -> None:
    data = read(CLAUDE / "lanegrid-agtrace__claude_session.jsonl") + read(
        CLAUDE / "lanegrid-agtrace__claude_agent.jsonl"
    )
    result = parse_claude(data)
    assert [s.session_id for s in result.sessions] == [
        "7f2abd2d-7cfc-4447-9ddd-3ca8d14e02e9",
        "7f2abd2d-7cfc-4447-9ddd-3ca8d14e02e9/0c4c3cf8",
    ]
    assert [len(s.messages) for s in result.sessions] == [21, 2]


def test_claude_tiny_conversation_mcp_tool() -> None:
    session = only(parse_claude(read(CLAUDE / "obra-episodic-memory__tiny-conversation.jsonl")).sessions)
    assert len(session.messages) == 7 and kinds(session) == {"text": 5, "tool": 2}
    assert session.project == "streaming"
    tool_call = next(m for m in session.messages if m.kind == "tool" and m.role == "assistant")
    assert tool_call.text.startswith("mcp__private-journal__process_thoughts {")
    assert next(m for m in session.messages if m.kind == "tool" and m.role == "user").text == (
        "Thoughts recorded successfully."
    )
    assert sum(m.human for m in session.messages) == 2


def test_claude_leading_summary_is_attached() -> None:
    session = only(parse_claude(read(CLAUDE / "obra-episodic-memory__short-conversation.jsonl")).sessions)
    assert len(session.messages) == 2
    assert session.summary.startswith("Prerequisites Checking")


def test_claude_skill_injection_is_an_envelope() -> None:
    session = only(parse_claude(read(CLAUDE / "obra-episodic-memory__skill-invocation-conversation.jsonl")).sessions)
    assert len(session.messages) == 8 and kinds(session) == {"text": 6, "tool": 2}
    meta = [m.text[:25] for m in session.messages if m.envelope]
    assert meta == ["Base directory for this s", "Continue from where you l"]
    assert [m.text for m in session.messages if m.human] == ["register as summarizer in agent-chat"]
    # every uuid starts with b0000000: printed refs must lengthen (tested on the index)
    assert {m.uuid[:8] for m in session.messages} == {"b0000000"}


def test_claude_older_shape_with_non_uuid_ids_gets_stable_uuids() -> None:
    data = read(CLAUDE / "daaain-claude-code-log__representative_messages.jsonl")
    first, second = parse_claude(data), parse_claude(data)
    session = only(first.sessions)
    assert session.session_id == "test_session" and session.project == "tmp"
    assert len(session.messages) == 11 and kinds(session) == {"text": 7, "tool": 4}
    assert all(canonical_uuid(m.uuid) == m.uuid for m in session.messages)  # msg_001 … became uuids
    assert [m.uuid for m in session.messages] == [m.uuid for m in only(second.sessions).messages]
    assert session.summary.startswith("User learned about Python decorators")


# ---- Codex ------------------------------------------------------------------------------------------


def test_codex_envelope_session() -> None:
    result = parse_codex(read(CODEX / "lanegrid-agtrace__codex_session.jsonl"))
    session = only(result.sessions)
    assert session.session_id == "019b04ae-b1c6-7c72-a134-a4c2de66058c"
    assert session.source == "codex" and session.project == "agent-sample"
    assert len(session.messages) == 21
    assert kinds(session) == {"text": 5, "thinking": 6, "tool": 10}
    assert [m.text[:21] for m in session.messages if m.envelope] == ["<environment_context>"]
    assert sum(m.human for m in session.messages) == 2
    # event_msg copies of user/agent messages and reasoning are not indexed twice
    texts = [m.text for m in session.messages if m.kind == "text"]
    assert len(texts) == len(set(texts))


def test_codex_synthetic_covers_reasoning_tools_and_unknown_records() -> None:
    path = (
        CODEX
        / "daaain-claude-code-log__rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.synthetic.jsonl"
    )
    result = parse_codex(read(path))
    session = only(result.sessions)
    assert session.project == "synthetic-project"
    assert kinds(session) == {"text": 2, "thinking": 1, "tool": 6}
    assert next(m for m in session.messages if m.kind == "thinking").text == "I will inspect the synthetic directory."
    assert not any("SYNTHETIC_ENCRYPTED" in m.text for m in session.messages)  # encrypted reasoning is unreadable
    tools = [m.text.split(" ", 1)[0] for m in session.messages if m.kind == "tool" and m.role == "assistant"]
    assert tools == ["exec_command", "apply_patch", "mcp__synthetic__lookup"]
    assert result.skipped >= 1  # future_synthetic_record, turn_context
    assert result.malformed == 0


def test_codex_legacy_direct_shape() -> None:
    session = only(
        parse_codex(read(CODEX / "daaain-claude-code-log__rollout-44444444-legacy.synthetic.jsonl")).sessions
    )
    assert session.session_id == "44444444-4444-4444-8444-444444444444"
    assert [(m.role, m.text) for m in session.messages] == [
        ("user", "Open the synthetic legacy session."),
        ("assistant", "The synthetic legacy session is open."),
    ]
    assert {m.timestamp for m in session.messages} == {"2026-01-04T05:06:07.000Z"}  # the session's own time


def test_codex_review_subagent_links_to_its_parent_by_spawn_instant() -> None:
    parent = only(parse_codex(read(CODEX / "lanegrid-agtrace__rollout-parent-019b88e0.jsonl")).sessions)
    child = only(parse_codex(read(CODEX / "lanegrid-agtrace__rollout-subagent-019b88e5.jsonl")).sessions)
    assert [m.text for m in parent.messages] == ["ls"]  # the event alone carries the user's turn
    assert child.agent == "review"
    assert child.spawn_key is not None and child.spawn_key in parent.spawn_keys
    assert [m.text for m in child.messages] == ["Review the code changes"]


def test_codex_redacted_desktop_rollout() -> None:
    path = CODEX / "madshn-localpush__rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"
    result = parse_codex(read(path))
    session = only(result.sessions)
    # 29 response items carry messages; the 13 event copies do not count twice.
    assert len(session.messages) == 29
    assert kinds(session) == {"text": 13, "thinking": 6, "tool": 10}
    developer = [m for m in session.messages if m.role == "system"]
    assert len(developer) == 4 and all(m.envelope for m in developer)
    assert not any(m.text.startswith("[REDACTED_MESSAGE") for m in session.messages)


def test_codex_uuids_derive_from_session_and_line() -> None:
    data = read(CODEX / "lanegrid-agtrace__codex_session.jsonl")
    first = [m.uuid for m in only(parse_codex(data).sessions).messages]
    assert first == [m.uuid for m in only(parse_codex(data).sessions).messages]
    assert len(set(first)) == len(first)


def test_codex_thread_spawn_names_the_parent() -> None:
    meta = {
        "timestamp": "2026-01-04T12:00:00Z",
        "type": "session_meta",
        "payload": {
            "id": "child-1",
            "timestamp": "2026-01-04T12:00:00Z",
            "cwd": "/w/app",
            "source": {"subagent": {"thread_spawn": {"parent_thread_id": "parent-1", "depth": 1}}},
        },
    }
    line = {
        "timestamp": "2026-01-04T12:00:01Z",
        "type": "response_item",
        "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
    }
    session = only(parse_codex((json.dumps(meta) + "\n" + json.dumps(line)).encode()).sessions)
    assert session.session_id == "parent-1/child-1" and session.parent_session == "parent-1"


# ---- robustness -------------------------------------------------------------------------------------


def test_malformed_lines_are_skipped_and_counted_never_the_whole_file() -> None:
    lines = read(CLAUDE / "obra-episodic-memory__tiny-conversation.jsonl").split(b"\n")
    broken = b"\n".join([lines[0], b"{not json", lines[1], b"[1, 2]", b"\xff\xfe", *lines[2:]])
    result = parse_claude(broken)
    assert result.malformed == 3
    assert [w.line for w in result.warnings] == [2, 4, 5]
    assert len(only(result.sessions).messages) == 7


def test_codex_malformed_lines_are_counted() -> None:
    data = read(CODEX / "lanegrid-agtrace__codex_session.jsonl") + b"\n{broken\n"
    result = parse_codex(data)
    assert result.malformed == 1 and len(only(result.sessions).messages) == 21


def test_index_time_caps_and_empty_messages() -> None:
    base = {"sessionId": "s-caps", "cwd": "/w/caps", "timestamp": "2025-01-01T00:00:00Z"}
    records = [
        {**base, "type": "user", "uuid": "u1", "message": {"role": "user", "content": "x" * (TEXT_CAP + 50)}},
        {
            **base,
            "type": "assistant",
            "uuid": "u2",
            "message": {
                "role": "assistant",
                "content": [{"type": "tool_use", "name": "Bash", "input": {"c": "y" * 900}}],
            },
        },
        {
            **base,
            "type": "user",
            "uuid": "u3",
            "message": {"role": "user", "content": [{"type": "tool_result", "content": "z" * 3000}]},
        },
        {
            **base,
            "type": "assistant",
            "uuid": "u4",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "  "}]},
        },
    ]
    session = only(parse_claude("\n".join(json.dumps(r) for r in records).encode()).sessions)
    text, call, result = session.messages  # the blank message is not indexed and has no ref
    # Issue 19 item 9: reported exactly as the reference reports it: the first N characters, nothing
    # appended (an anchor capped at 8,000 used to read as 8,013 characters ending in the marker).
    assert text.text == "x" * TEXT_CAP and TRUNCATION_MARKER not in text.text
    assert call.text == "Bash " + json.dumps({"c": "y" * 900})[:TOOL_INPUT_CAP]
    assert result.text == "z" * TOOL_RESULT_CAP


def test_generic_tool_calls_are_capped_at_500_and_results_at_1000() -> None:
    """Issue 19 item 1: the generic form capped every tool message at 1,000; a term at position 566
    of a tool call was found by Dovecote and not by the reference. An assistant's tool message is
    the call (500), any other role's the result (1,000), as in the JSONL forms."""
    body = "a " * 283 + "needle566 " + "b " * 400
    assert body.index("needle566") == 566
    request = gate_ingest(
        {
            "source": "s",
            "session_id": "caps",
            "messages": [
                {"uuid": "1", "role": "assistant", "kind": "tool", "text": body, "timestamp": "2025-01-01T00:00:00Z"},
                {"uuid": "2", "role": "user", "kind": "tool", "text": body, "timestamp": "2025-01-01T00:00:01Z"},
                {"uuid": "3", "role": "assistant", "text": body * 20, "timestamp": "2025-01-01T00:00:02Z"},
            ],
        }
    )
    call, result, text = only(parse_generic(request).sessions).messages
    assert len(call.text) == TOOL_INPUT_CAP and "needle566" not in call.text
    assert len(result.text) == TOOL_RESULT_CAP and "needle566" in result.text
    assert len(text.text) == TEXT_CAP


def test_rows_the_reference_hides_are_flagged_hidden() -> None:
    """Issue 19 item 4: system rows and `[Request interrupted by user]` markers are hidden (flagged
    as envelopes: shown only with include_tools), and an interruption does not open a turn."""
    base = {"sessionId": "s-hide", "cwd": "/w", "timestamp": "2025-01-01T00:00:00Z"}
    records = [
        {**base, "type": "user", "uuid": "u1", "message": {"role": "user", "content": "real question"}},
        {**base, "type": "user", "uuid": "u2", "message": {"role": "user", "content": "[Request interrupted by user]"}},
        {
            **base,
            "type": "user",
            "uuid": "u3",
            "message": {
                "role": "user",
                "content": [{"type": "text", "text": "[Request interrupted by user for tool use]"}],
            },
        },
        {**base, "type": "system", "uuid": "u4", "content": "Conversation compacted"},
    ]
    asked, interrupted, for_tool, system = only(
        parse_claude("\n".join(json.dumps(r) for r in records).encode()).sessions
    ).messages
    assert not asked.envelope and asked.human
    assert interrupted.envelope and not interrupted.human
    assert for_tool.envelope and not for_tool.human
    assert system.envelope and system.role == "system"
    generic = gate_ingest(
        {
            "source": "s",
            "session_id": "g",
            "messages": [{"uuid": "1", "role": "system", "text": "be terse", "timestamp": "2025-01-01T00:00:00Z"}],
        }
    )
    assert only(parse_generic(generic).sessions).messages[0].envelope


def test_lone_surrogates_become_replacement_characters() -> None:
    line = (
        '{"type":"user","sessionId":"s1","uuid":"u1","timestamp":"2025-01-01T00:00:00Z",'
        '"message":{"role":"user","content":"bad \\ud800 text"}}'
    )
    session = only(parse_claude(line.encode()).sessions)
    assert session.messages[0].text == "bad \ufffd text"
    session.messages[0].text.encode("utf-8")  # storable anywhere


@pytest.mark.parametrize(
    "stamp, expected",
    [
        ("2025-03-01T01:30:00+02:00", "2025-02-28T23:30:00.000Z"),
        ("2025-03-01T01:30:00Z", "2025-03-01T01:30:00.000Z"),
        ("2025-03-01T01:30:00.123456Z", "2025-03-01T01:30:00.123Z"),
    ],
)
def test_timestamps_are_utc_instants(stamp: str, expected: str) -> None:
    line = json.dumps(
        {
            "type": "user",
            "sessionId": "s1",
            "uuid": "u1",
            "timestamp": stamp,
            "message": {"role": "user", "content": "hi"},
        }
    )
    assert only(parse_claude(line.encode()).sessions).messages[0].timestamp == expected


def test_generic_form_with_a_subagent_thread() -> None:
    request = gate_ingest(
        {
            "source": "my-agent",
            "project": "demo",
            "session_id": "s-generic",
            "messages": [
                {"uuid": "m1", "role": "user", "text": "plan the migration", "timestamp": "2025-01-01T00:00:00Z"},
                {
                    "uuid": "m2",
                    "role": "assistant",
                    "text": "checking the schema",
                    "timestamp": "2025-01-01T00:00:01Z",
                    "subagent": "explorer",
                },
                {
                    "uuid": "m3",
                    "role": "assistant",
                    "text": "thinking",
                    "kind": "thinking",
                    "timestamp": "2025-01-01T00:00:02Z",
                },
            ],
        }
    )
    result = parse(request)
    assert [s.session_id for s in result.sessions] == ["s-generic", "s-generic/explorer"]
    main, thread = result.sessions
    assert main.project == "demo" and main.source == "my-agent"
    assert [m.kind for m in main.messages] == ["text", "thinking"]
    assert thread.parent_session == "s-generic" and thread.agent == "explorer"
