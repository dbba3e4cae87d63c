"""docs/design/recall.md's reads through RecallService over every SearchIndex engine (the fixtures and
helpers of test_recall_index_conformance.py, whose other half this is): refs and their prefixes,
the bounded read and its window, the outline, topics, and the rebuild from the archive. Every test
asserts invariants (orders, counts, presence), never engine scores."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from dovecote.platform.errors import AmbiguousRef, InvalidArgument, NotFound
from dovecote.platform.principal import Principal
from dovecote.recall.model import (
    NEIGHBOUR_CHARS,
    OUTLINE_TEXT_CHARS,
    TRUNCATION_MARKER,
    gate_outline,
    gate_read,
    gate_topic_label,
    gate_topics,
)
from dovecote.recall.service import RecallService
from tests.integration.test_recall_index_conformance import (  # noqa: F401 - fixtures
    ACME,
    GLOBEX,
    archive,
    codes,
    index_engine,
    ledger,
    mid,
    opensearch_pool,
    put,
    read_sample,
    recall,
    search,
    sessions_of,
    stamp,
)

# ---- refs -------------------------------------------------------------------------------------------


def test_every_printed_ref_reads_back(recall: RecallService) -> None:
    read_sample(recall, "claude-code", "obra-episodic-memory__skill-invocation-conversation.jsonl")
    put(recall, "2fa92c26-other", ["register twice"])  # a session sharing the first 8 characters
    envelope = search(recall, "register summarizer", limit=10)
    assert envelope.count == 2
    for result in envelope.results:
        read = recall.read(ACME, gate_read(result.read_ref))
        assert read.read_ref == result.read_ref and read.session_id == result.session_id
        assert read.anchor_uuid.startswith(result.read_ref.split(":")[1])
    skill = next(r for r in envelope.results if r.session_id.endswith("000000000002"))
    session_part, uuid_part = skill.read_ref.split(":")
    assert len(session_part) > 8 and len(uuid_part) > 8  # lengthened until unique


def test_a_page_of_hits_carries_each_ref_and_topic_as_the_single_reads_give_them(recall: RecallService) -> None:
    """The engine reads a page's refs and topics at once (SearchIndex.search fills SessionHit.ref
    and .topic): the same answers as printed_ref and session_topics one hit at a time, for
    lengthened session prefixes, a subagent thread, and hits before, inside and at a topic start."""
    read_sample(recall, "claude-code", "lanegrid-agtrace__claude_session.jsonl")
    read_sample(recall, "claude-code", "lanegrid-agtrace__claude_agent.jsonl")  # its thread: a nested ref
    zebra_at = [2, 3, 0, 3, 5]  # the one row of each session holding the word
    for i, at in enumerate(zebra_at):
        put(recall, f"shared-prefix-{i}", [("zebra crossing" if j == at else f"filler line {j}") for j in range(6)])
    # uuids sharing 35 characters: the uuid part of the ref is lengthened to the whole uuid
    twins = [f"aaaaaaaa-0000-4000-8000-00000000000{j}" for j in range(4)]
    put(
        recall,
        "twins",
        [{"uuid": u, "role": "user", "text": "zebra twins" if j == 2 else "other"} for j, u in enumerate(twins)],
    )
    labels = {
        1: [(1, "early"), (4, "late")],
        2: [(2, "after the hit")],
        3: [(3, "exact")],
        4: [(0, "whole"), (5, "end")],
    }
    for i, starts in labels.items():
        for at, label in starts:
            recall.label_topic(ACME, gate_topic_label(f"shared-prefix-{i}:{mid(f'shared-prefix-{i}', at)}", label))
    envelope = search(recall, "zebra OR codebase", include_subagents=True, limit=10)
    topics = {r.session_id: r.topic for r in envelope.results if r.session_id.startswith("shared-prefix-")}
    assert topics == {f"shared-prefix-{i}": t for i, t in enumerate(["", "early", "", "exact", "end"])}
    assert any("/" in r.session_id for r in envelope.results)  # the thread is on the page
    for result in envelope.results:
        anchor = recall.read(ACME, gate_read(result.read_ref)).anchor_uuid
        assert result.read_ref == recall.index.printed_ref("acme", result.session_id, anchor)
        pos = recall.index.message("acme", result.session_id, anchor).pos  # type: ignore[union-attr]
        single = [t.label for t in recall.index.session_topics("acme", result.session_id) if t.start_pos <= pos]
        assert result.topic == (single[-1] if single else "")
        if result.session_id.startswith("shared-prefix-"):
            assert result.read_ref.split(":")[0] == result.session_id  # lengthened until unique: whole
        # Each part is the shortest that resolves to exactly this message (REF_PREFIX at least).
        session_part, uuid_part = result.read_ref.split(":")
        assert recall.index.resolve_messages("acme", result.session_id, uuid_part).total == 1
        if len(uuid_part) > 8:
            assert recall.index.resolve_messages("acme", result.session_id, uuid_part[:-1]).total > 1
        if "~" not in session_part:
            assert recall.index.resolve_sessions("acme", session_part).total == 1
            if len(session_part) > 8:
                assert recall.index.resolve_sessions("acme", session_part[:-1]).total > 1
        if "/" in result.session_id:
            assert result.read_ref.startswith("7f2abd2d~0c4c3cf8:")
    assert next(r for r in envelope.results if r.session_id == "twins").read_ref == f"twins:{twins[2]}"


def test_full_dashed_uuid_and_ref_prefix(recall: RecallService) -> None:
    read_sample(recall, "claude-code", "lanegrid-agtrace__claude_session.jsonl")
    full = "ref=7f2abd2d:f370ce0f-84e8-42ab-a6c9-c5d925abd271"
    assert recall.read(ACME, gate_read(full)).anchor_uuid == "f370ce0f-84e8-42ab-a6c9-c5d925abd271"
    asked = recall.read(ACME, gate_read("7F2ABD2D:F370CE0F"))
    assert asked.read_ref == "7f2abd2d:f370ce0f" and asked.canonical_ref == "7f2abd2d:f370ce0f"


def test_read_echoes_the_ref_as_asked_beside_the_canonical_one(recall: RecallService) -> None:
    """Issue 19 item 8: the reference echoes the ref as asked (`784c95c8:2c02`); the canonical,
    shortest unique form goes beside it. The session part takes the real id's spelling."""
    read_sample(recall, "claude-code", "lanegrid-agtrace__claude_session.jsonl")
    short = recall.read(ACME, gate_read("ref=7F2ABD2D:f370"))
    assert short.read_ref == "7f2abd2d:f370" and short.canonical_ref == "7f2abd2d:f370ce0f"
    longer = recall.read(ACME, gate_read("7f2abd2d-7cfc:f370ce0f-84e8"))
    assert longer.read_ref == "7f2abd2d-7cfc:f370ce0f-84e8" and longer.canonical_ref == "7f2abd2d:f370ce0f"
    assert recall.read(ACME, gate_read(longer.canonical_ref)).anchor_uuid == longer.anchor_uuid


def test_all_digit_uuid_prefixes(recall: RecallService) -> None:
    put(
        recall,
        "digits",
        [
            {"uuid": "12345678-1234-4234-8234-123456789abc", "role": "user", "text": "numeric looking"},
            {"uuid": "abcdef01-1234-4234-8234-123456789abc", "role": "user", "text": "other"},
        ],
    )
    ref = search(recall, "numeric").results[0].read_ref
    assert ref == "digits:12345678"
    assert recall.read(ACME, gate_read(ref)).anchor_uuid.startswith("12345678")  # the reference refused it
    with pytest.raises(InvalidArgument) as caught:
        recall.read(ACME, gate_read("digits:87654321"))
    assert "old numeric ref" in caught.value.message


def test_session_prefixes_resolve_literally(recall: RecallService) -> None:
    put(recall, "a_b12345", ["underscore session"])
    put(recall, "axb12345", ["x session"])
    assert recall.outline(ACME, gate_outline("a_b")).session_id == "a_b12345"  # `_` is not a wildcard
    assert recall.outline(ACME, gate_outline("A_B1")).session_id == "a_b12345"  # case-insensitive
    for bad in ("", "a%", "%"):
        with pytest.raises(InvalidArgument):
            recall.outline(ACME, gate_outline(bad))
    with pytest.raises(NotFound):
        recall.outline(ACME, gate_outline("zzz"))


def test_ambiguity_lists_up_to_ten_candidates_with_the_total(recall: RecallService) -> None:
    for i in range(12):
        put(recall, f"deadbeef-{i:02d}", ["x"])
    with pytest.raises(AmbiguousRef) as caught:
        recall.outline(ACME, gate_outline("deadbeef"))
    assert caught.value.details["total"] == 12 and len(caught.value.details["candidates"]) == 10
    assert caught.value.details["candidates"][0] == "deadbeef-00"


def test_an_ambiguous_uuid_prefix_lists_its_candidates(recall: RecallService) -> None:
    read_sample(recall, "claude-code", "obra-episodic-memory__skill-invocation-conversation.jsonl")
    with pytest.raises(AmbiguousRef) as caught:
        recall.read(ACME, gate_read("2fa92c26:b0000000"))
    assert caught.value.details["total"] == 8 and len(caught.value.details["candidates"]) == 8


def test_unknown_session_and_message_are_not_found(recall: RecallService) -> None:
    put(recall, "known123", ["x"])
    with pytest.raises(NotFound):
        recall.read(ACME, gate_read("unknown1:abcdef01"))
    with pytest.raises(NotFound):
        recall.read(ACME, gate_read("known123:abcdef01"))


# ---- read -------------------------------------------------------------------------------------------


def thirty(recall: RecallService, session: str = "long") -> None:
    put(recall, session, [f"message number {i} talks about topic{i}" for i in range(30)])


def test_read_window_is_plus_minus_eight(recall: RecallService) -> None:
    thirty(recall)
    read = recall.read(ACME, gate_read(f"long:{mid('long', 15)[:8]}"))
    assert [m.text.split()[2] for m in read.messages] == [str(i) for i in range(7, 24)]
    assert (read.before, read.after) == (7, 6) and read.anchor_uuid == mid("long", 15)
    assert not read.truncated


def test_more_ladder_and_around(recall: RecallService) -> None:
    thirty(recall)
    ref = f"long:{mid('long', 15)[:8]}"
    wider = recall.read(ACME, gate_read(ref, more=1))
    assert len(wider.messages) == 30 and wider.window == 16  # radius (1 + 1) × 8, clipped to the session
    moved = recall.read(ACME, gate_read(ref, around=10, window=2))
    assert [m.text.split()[2] for m in moved.messages] == ["23", "24", "25", "26", "27"]
    back = recall.read(ACME, gate_read(ref, around=-15, window=1))
    assert [m.text.split()[2] for m in back.messages] == ["0", "1"]


def test_the_window_counts_displayed_rows(recall: RecallService) -> None:
    rows: list[Any] = []
    for i in range(20):
        rows.append(("user", f"visible {i}"))
        rows.append(("assistant", f"Bash tool call {i}", "tool"))
    put(recall, "mixed", rows)
    read = recall.read(ACME, gate_read(f"mixed:{mid('mixed', 20)[:8]}"))  # "visible 10"
    assert [m.text for m in read.messages] == [f"visible {i}" for i in range(2, 19)]  # 8 text rows each side
    with_tools = recall.read(ACME, gate_read(f"mixed:{mid('mixed', 20)[:8]}", include_tools=True))
    assert len(with_tools.messages) == 17 and {m.kind for m in with_tools.messages} == {"text", "tool"}


def test_neighbours_are_cut_and_the_anchor_is_whole(recall: RecallService) -> None:
    put(recall, "wide", ["n" * 500, "ANCHOR " + "a" * 900, "m" * 500])
    read = recall.read(ACME, gate_read(f"wide:{mid('wide', 1)[:8]}"))
    before, anchor, after = read.messages
    assert len(anchor.text) == 907 and len(before.text) == NEIGHBOUR_CHARS and len(after.text) == NEIGHBOUR_CHARS
    assert not read.truncated  # the preview cut is not a budget trim


def test_budget_keeps_the_anchor_and_reports_the_trim(recall: RecallService) -> None:
    thirty(recall)
    ref = f"long:{mid('long', 15)[:8]}"
    whole = recall.read(ACME, gate_read(ref))
    total = sum(len(m.text) for m in whole.messages)
    read = recall.read(ACME, gate_read(ref, budget=120))
    assert sum(len(m.text) for m in read.messages) <= 120
    assert read.anchor_uuid in [m.uuid for m in read.messages]
    assert read.truncated and read.trimmed_msgs == 17 - sum(
        1 for m in read.messages if not m.text.endswith(TRUNCATION_MARKER)
    )
    assert read.trimmed_chars == total - sum(len(m.text.removesuffix(TRUNCATION_MARKER)) for m in read.messages)
    assert f"--budget {total}" in read.next_command and ref in read.next_command


def test_thinking_in_a_read_only_when_asked(recall: RecallService) -> None:
    put(recall, "t", [("user", "hello"), ("assistant", "hmm", "thinking"), ("assistant", "hi")])
    plain = recall.read(ACME, gate_read(f"t:{mid('t', 0)[:8]}"))
    assert [m.kind for m in plain.messages] == ["text", "text"]
    thinking = recall.read(ACME, gate_read(f"t:{mid('t', 0)[:8]}", include_thinking=True))
    assert [m.kind for m in thinking.messages] == ["text", "thinking", "text"]


# ---- outline ----------------------------------------------------------------------------------------


def test_outline_bookends(recall: RecallService) -> None:
    put(recall, "arc", [f"{'x' * 400} step {i}" for i in range(12)], base=datetime(2025, 5, 1, 1, 30, tzinfo=UTC))
    outline = recall.outline(ACME, gate_outline("arc"))
    assert [m.uuid for m in outline.start] == [mid("arc", i) for i in range(4)]
    assert [m.uuid for m in outline.end] == [mid("arc", i) for i in range(8, 12)]
    assert outline.mid_count == 4 and outline.message_count == 12
    assert all(len(m.text) == OUTLINE_TEXT_CHARS for m in outline.start + outline.end)
    assert outline.iso == "2025-05-01T01:41:00.000Z" and outline.started_at == "2025-05-01T01:30:00.000Z"
    short = put(recall, "short", ["a", "b", "c", "d", "e"])
    assert short.messages_indexed == 5
    small = recall.outline(ACME, gate_outline("short"))
    assert len(small.start) == 4 and len(small.end) == 1 and small.mid_count == 0  # no overlap


def test_outline_bookends_are_looked_for_among_forty_rows(recall: RecallService) -> None:
    rows: list[Any] = [("assistant", f"tool {i}", "tool") for i in range(45)]
    rows += [("user", "late text")]
    rows += [("assistant", f"tool tail {i}", "tool") for i in range(45)]
    put(recall, "toolheavy", rows)
    outline = recall.outline(ACME, gate_outline("toolheavy"))
    # No bookend either side: mid_count is every row of the session, as the reference counts it.
    assert outline.start == [] and outline.end == [] and outline.mid_count == 91
    # Issue 19 item 7: bookends are the conversation; include_tools does not put tool rows there.
    assert recall.outline(ACME, gate_outline("toolheavy", include_tools=True)).start == []


def test_outline_mid_count_is_the_rows_between_the_bookends(recall: RecallService) -> None:
    """Issue 19 item 7: mid_count counted displayed rows (56 where the reference said 32); the
    reference counts every row strictly between the last start bookend and the first end one."""
    rows: list[Any] = []
    for i in range(10):
        rows += [("user", f"ask {i}"), ("assistant", f"call {i}", "tool"), ("assistant", f"answer {i}")]
    put(recall, "mixed", rows)
    outline = recall.outline(ACME, gate_outline("mixed"))
    assert [m.text for m in outline.start] == ["ask 0", "answer 0", "ask 1", "answer 1"]
    assert [m.text for m in outline.end] == ["ask 8", "answer 8", "ask 9", "answer 9"]
    assert outline.mid_count == 18  # rows 6..23, tool rows included, as the reference counts them
    with_tools = recall.outline(ACME, gate_outline("mixed", include_tools=True))
    assert all(m.kind != "tool" for m in with_tools.start + with_tools.end)
    assert with_tools.mid_count == outline.mid_count


def test_subagent_threads(recall: RecallService) -> None:
    read_sample(recall, "claude-code", "lanegrid-agtrace__claude_session.jsonl")
    read_sample(recall, "claude-code", "lanegrid-agtrace__claude_agent.jsonl")
    outline = recall.outline(ACME, gate_outline("7f2abd2d"))
    assert outline.session_id == "7f2abd2d-7cfc-4447-9ddd-3ca8d14e02e9"  # the parent, not its thread
    assert outline.subagents == []  # issue 19 item 7: listed only when asked for, as in the reference
    listed = recall.outline(ACME, gate_outline("7f2abd2d", include_subagents=True))
    assert [(s.session_id, s.message_count) for s in listed.subagents] == [
        ("7f2abd2d-7cfc-4447-9ddd-3ca8d14e02e9/0c4c3cf8", 2)
    ]
    # Issue 19 item 5: a thread is found only when asked for.
    assert all("/" not in r.session_id for r in search(recall, "codebase").results)
    thread = search(recall, "codebase", include_subagents=True)
    assert thread.results[0].read_ref.startswith("7f2abd2d~0c4c3cf8:")  # `~`: safe in a URL path
    assert recall.read(ACME, gate_read(thread.results[0].read_ref)).session_id.endswith("/0c4c3cf8")
    child = recall.outline(ACME, gate_outline("7f2abd2d~0c4c"))
    assert recall.outline(ACME, gate_outline("7f2abd2d/0c4c")).session_id == child.session_id
    assert child.parent_session == "7f2abd2d-7cfc-4447-9ddd-3ca8d14e02e9"
    read_sample(recall, "codex", "lanegrid-agtrace__rollout-parent-019b88e0.jsonl")
    read_sample(recall, "codex", "lanegrid-agtrace__rollout-subagent-019b88e5.jsonl")
    codex = recall.outline(ACME, gate_outline("019b88e0", include_subagents=True))
    assert [(s.session_id, s.title) for s in codex.subagents] == [("019b88e5-a2e4-7b90-8953-38fce393c653", "review")]


# ---- topics -----------------------------------------------------------------------------------------


def test_topics_rank_globally_with_one_limit(recall: RecallService) -> None:
    note = recall.topics(ACME, gate_topics(q="anything"))
    assert note.hits == [] and "no topics tagged yet" in note.note
    for i, project in enumerate(["web", "api", "web", "ops"]):
        put(recall, f"topic{i}", ["start here", "more"], project=project)
    labels = ["database migration plan", "migration rollback", "css grid layout", "database backup"]
    for i, label in enumerate(labels):
        hit = recall.label_topic(ACME, gate_topic_label(f"topic{i}:{mid(f'topic{i}', 0)[:8]}", label))
        assert hit.topic == label
    found = recall.topics(ACME, gate_topics(q="database migration"))
    assert found.hits[0].topic == "database migration plan"  # both words
    assert {h.topic for h in found.hits} == {"database migration plan", "migration rollback", "database backup"}
    assert found.note == ""
    assert len(recall.topics(ACME, gate_topics(q="database migration", limit=2)).hits) == 2  # one global limit
    scoped = recall.topics(ACME, gate_topics(q="css", project="api"))
    assert scoped.hits == [] and scoped.note == ""  # something is tagged elsewhere: no "none yet" note
    assert recall.outline(ACME, gate_outline("topic0")).topics == ["database migration plan"]
    assert recall.topics(GLOBEX, gate_topics(q="database")).hits == []
    with_topic = search(recall, "start", project="api")
    assert with_topic.results[0].topic == "migration rollback"


def test_topics_survive_reingest_and_rebuild(recall: RecallService) -> None:
    put(recall, "keep", ["first words", "second words"])
    recall.label_topic(ACME, gate_topic_label(f"keep:{mid('keep', 1)[:8]}", "the second part"))
    put(recall, "keep", ["first words", "second words", "third words"])
    assert recall.outline(ACME, gate_outline("keep")).topics == ["the second part"]
    put(recall, "keep", ["only one now"])
    assert recall.outline(ACME, gate_outline("keep")).topics == []


# ---- rebuild ----------------------------------------------------------------------------------------


def test_rebuild_recreates_the_index_from_the_archive(recall: RecallService) -> None:
    read_sample(recall, "claude-code", "lanegrid-agtrace__claude_session.jsonl")
    read_sample(recall, "codex", "lanegrid-agtrace__codex_session.jsonl")
    put(recall, "generic-1", ["rebuild me please"])
    recall.label_topic(ACME, gate_topic_label(f"generic-1:{mid('generic-1', 0)[:8]}", "rebuild topic"))
    put(recall, "globex-1", ["rebuild me please"], who=GLOBEX)
    # The same hits, compared as a set: Lucene's bm25 counts deleted documents until their segments
    # merge (an update, such as a message's vector, deletes the old version), so on OpenSearch a
    # rebuilt index's scores depend on a different history than the old one's, and two close sessions
    # may swap places under a score-summing ranker (`passage`). SQLite's statistics have no history.
    before = sorted((r.read_ref, r.iso) for r in search(recall, "python OR rebuild", limit=20).results)
    report = recall.rebuild(Principal("acme", "admin"))
    assert report.transcripts == 3 and report.sessions == 3 and report.topics == 1 and report.failed == []
    assert sorted((r.read_ref, r.iso) for r in search(recall, "python OR rebuild", limit=20).results) == before
    assert len(before) == 3
    assert recall.topics(ACME, gate_topics(q="rebuild")).hits[0].topic == "rebuild topic"
    assert search(recall, "rebuild", who=GLOBEX).count == 1  # another authority is untouched
