"""The memory write gate, the queue message shape and the digests that key SQS."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dovecote.memory.model import QueueMessage, WriteInput, digest, gate_write, relation_id
from dovecote.platform.schema import validated
from functions.memory_api.models import SubmitIn


def test_the_gate_keeps_what_was_sent() -> None:
    body = {"id": "w-1", "scope": "team/proj", "content": "x is 1", "tags": ["Subject:DB", "t"]}
    write = gate_write(validated(SubmitIn, body).input())
    assert write == WriteInput("w-1", "team/proj", "x is 1", ("Subject:DB", "t"))
    assert write.subject == "db"
    assert gate_write(validated(SubmitIn, {"id": "w", "scope": "s", "content": "c"}).input()).tags == ()


def test_the_intent_digest_covers_scope_content_and_tags_but_not_the_id() -> None:
    a = WriteInput("a", "s", "c", ("t",))
    assert a.digest == WriteInput("b", "s", "c", ("t",)).digest
    assert (
        len(
            {
                a.digest,
                WriteInput("a", "s2", "c", ("t",)).digest,
                WriteInput("a", "s", "c2", ("t",)).digest,
                WriteInput("a", "s", "c", ()).digest,
            }
        )
        == 4
    )


@given(st.text(), st.text(), st.text(), st.text())
def test_digests_are_injective_over_their_parts(a: str, b: str, c: str, d: str) -> None:
    if (a, b) != (c, d):
        assert digest(a, b) != digest(c, d)


def test_queue_messages_round_trip_and_name_their_group_and_deduplication_id() -> None:
    message = QueueMessage("acme", "w1", "s", 2)
    assert QueueMessage.from_body(message.to_body()) == message
    assert message.group_id == QueueMessage("acme", "w2", "s").group_id  # one group per scope
    assert message.group_id != QueueMessage("acme", "w1", "t").group_id
    assert message.group_id != QueueMessage("other", "w1", "s").group_id
    # A redriven write (next generation) is not a duplicate of its first send.
    assert message.deduplication_id != QueueMessage("acme", "w1", "s", 3).deduplication_id
    assert len(message.group_id) <= 128 and len(message.deduplication_id) <= 128


@pytest.mark.parametrize(
    "body",
    [
        "",
        "null",
        "[]",
        '{"v": 2, "authority": "a", "id": "w", "scope": "s", "generation": 0}',
        '{"v": 1, "authority": "a#b", "id": "w", "scope": "s", "generation": 0}',
        '{"v": 1, "authority": "a", "id": "w\\n", "scope": "s", "generation": 0}',
        '{"v": 1, "authority": "a", "id": "w", "scope": "s", "generation": -1}',
        '{"v": 1, "authority": "a", "id": "w", "scope": "s", "generation": true}',
        '{"v": 1, "authority": "a", "id": "w", "scope": 5, "generation": 0}',
    ],
)
def test_unreadable_messages_are_refused(body: str) -> None:
    with pytest.raises(ValueError):
        QueueMessage.from_body(body)


def test_relation_ids_are_deterministic_and_distinct_per_verb() -> None:
    assert relation_id("a", "b", "related") == relation_id("a", "b", "related")
    assert relation_id("a", "b", "related") != relation_id("a", "b", "supersedes")
    assert relation_id("a", "b", "related") != relation_id("b", "a", "related")
