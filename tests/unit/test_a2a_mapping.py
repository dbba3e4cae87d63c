"""The A2A mapping (dovecote.a2a.mapping) and its errors (dovecote.a2a.errors): states, roles, parts
of every kind through the task gate and back, artifacts, history, the wire's JSON form."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from a2a.types import Message, Role, TaskState
from google.protobuf import json_format

from dovecote.a2a import mapping
from dovecote.a2a.errors import KINDS, A2AError, from_domain
from dovecote.platform.errors import CommitUnknown, IdempotencyConflict, InvalidArgument, NotFound
from dovecote.tasks import inputs, machine
from dovecote.tasks.artifacts import ArtifactRead
from dovecote.tasks.model import Artifact as StoredArtifact
from dovecote.tasks.model import Message as Record
from dovecote.tasks.model import Part as StoredPart
from dovecote.tasks.model import TaskView
from dovecote.tasks.reads import MessageRead
from functions.tasks_api.models import message_out


def stored(message: Message, author: str = "caller", sequence: int = 1) -> MessageRead:
    """An A2A message as Dovecote stores it and its reads answer it: through the message's rule."""
    body = mapping.message_body(message, "m-1")
    gated = inputs.message(body)
    kept = Record("t-1", gated.id, sequence, author, gated.parts, "2026-12-01T10:00:00.123456Z", gated.metadata)
    return MessageRead(kept, ("",) * len(kept.parts))


def wire(read: MessageRead) -> dict[str, Any]:
    """The message as /v1 answers it (the HTTP edge's serializer)."""
    return message_out(read).model_dump(mode="json")


# A part of each A2A kind: a text, a file (bytes, filename), a file URL and a data part with metadata.
EVERY_KIND = [
    {"text": "hello"},
    {"raw": base64.b64encode(b"\x00\x01tck").decode(), "mediaType": "application/pdf", "filename": "a.pdf"},
    {"url": "https://example.com/x.txt", "mediaType": "text/plain", "filename": "x.txt"},
    {"data": {"key": "value", "count": 42}, "metadata": {"why": "because"}},
]


def record(message_id: str, author: str, *parts: dict[str, Any], metadata: Any = None) -> MessageRead:
    """A message as the task reads answer it, from its parts as /v1 renders them (text, data_b64, a
    url, or a part kept in S3 by its sha256, size and download URL)."""
    kept = [_part(p) for p in parts]
    found = Record("t-1", message_id, 2, author, tuple(p for p, _ in kept), "2026-12-01T10:00:00Z", metadata or {})
    return MessageRead(found, tuple(url for _, url in kept))


def _part(rendered: dict[str, Any]) -> tuple[StoredPart, str]:
    media_type, name = rendered["media_type"], rendered.get("filename", "")
    if "download_url" in rendered:
        return StoredPart(media_type, b"", sha256=rendered["sha256"], size=rendered["size"], filename=name), str(
            rendered["download_url"]
        )
    if "url" in rendered:
        return StoredPart(media_type, b"", url=rendered["url"], filename=name), ""
    data = rendered["text"].encode() if "text" in rendered else base64.b64decode(rendered["data_b64"])
    return StoredPart(media_type, data, filename=name), ""


def artifact_read(payload: dict[str, Any]) -> ArtifactRead:
    """A published artifact and its payload as the task reads answer them (ARTIFACT's id)."""
    media_type = payload["media_type"]
    found = StoredArtifact("acme", "ws", ARTIFACT["id"], "t-1", "published", "r0", "r1", "sha256:x", 1, media_type, "x")
    if "download_url" in payload:
        return ArtifactRead(found, None, payload["download_url"])
    data = payload["text"].encode() if "text" in payload else base64.b64decode(payload["data_b64"])
    return ArtifactRead(found, data, None)


def a2a(json_dict: dict[str, Any]) -> Message:
    return json_format.ParseDict(json_dict, Message())


# ---- states and roles ---------------------------------------------------------------------------------


@pytest.mark.parametrize("state", machine.STATES)
def test_every_state_has_its_a2a_state_and_back(state: str) -> None:
    a2a_state = mapping.STATES[state]
    assert TaskState.Name(a2a_state) == "TASK_STATE_" + state.upper()
    assert mapping.DOVECOTE_STATES[a2a_state] == state
    assert (state in mapping.SETTLED) == (machine.is_terminal(state) or state == "input_required")


def test_roles_are_user_and_agent() -> None:
    assert mapping.ROLES == {"caller": Role.ROLE_USER, "agent": Role.ROLE_AGENT}


# ---- messages -------------------------------------------------------------------------------------------


def test_a_message_of_every_part_kind_comes_back_as_it_was_sent() -> None:
    # Given a user message with a text, a file (bytes, filename), a file URL and a data part, part
    # metadata, message metadata, extensions and referenced tasks
    sent = a2a(
        {
            "messageId": "tck-complete-task-1",
            "role": "ROLE_USER",
            "parts": EVERY_KIND,
            "metadata": {"traceId": "abc", "nested": {"deep": [1, 2]}},
            "extensions": ["urn:x:y"],
            "referenceTaskIds": ["t-0"],
        }
    )
    # When it is stored as a Dovecote message and read back
    record = stored(sent)
    back = mapping.message(record, "t-1", "ctx-1")
    # Then it is the same message, in the task and context it belongs to
    expected = Message()
    expected.CopyFrom(sent)
    expected.task_id, expected.context_id = "t-1", "ctx-1"
    assert back == expected
    # And Dovecote kept its own message id: the A2A one is metadata (TCK messageIds repeat)
    assert record.message.id == "m-1" and record.message.metadata["a2a"]["messageId"] == "tck-complete-task-1"


def test_a_url_a_filename_and_json_are_the_dovecote_parts_own() -> None:
    # Given a file by URL with its filename and type, a raw file with its filename, a data part
    sent = a2a(
        {
            "messageId": "m",
            "role": "ROLE_USER",
            "parts": [
                {"url": "https://example.com/x.pdf", "mediaType": "application/pdf", "filename": "x.pdf"},
                {"raw": base64.b64encode(b"\x00\x01").decode(), "mediaType": "image/png", "filename": "a.png"},
                {"raw": base64.b64encode(b"csv,bytes").decode(), "mediaType": "text/csv", "filename": "t.csv"},
                {"data": {"key": "value"}},
                {"text": "plain"},
            ],
        }
    )
    # When it becomes a Dovecote message
    record = stored(sent)
    # Then the URL and the filenames are the parts' own, and the data part is its JSON
    assert wire(record)["parts"] == [
        {"media_type": "application/pdf", "url": "https://example.com/x.pdf", "filename": "x.pdf"},
        {"media_type": "image/png", "data_b64": "AAE=", "filename": "a.png"},
        {"media_type": "text/csv", "text": "csv,bytes", "filename": "t.csv"},
        {"media_type": "application/json", "text": '{"key":"value"}'},
        {"media_type": "text/plain", "text": "plain"},
    ]
    # And the metadata keeps only what those parts cannot say: a kind the stored part does not
    # imply (raw bytes of a textual type, JSON data), and a media type A2A did not give
    assert record.message.metadata["a2a"]["parts"] == [
        {},
        {},
        {"kind": "raw"},
        {"kind": "data", "mediaType": ""},
        {"mediaType": ""},
    ]
    assert record.message.metadata["a2a"]["partsVersion"] == mapping.PARTS_VERSION
    back = mapping.message(record, "t-1", "c-1")
    assert list(back.parts) == list(sent.parts)


def test_a_message_whose_parts_need_no_hint_has_none() -> None:
    sent = a2a({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi", "mediaType": "text/plain"}]})
    assert stored(sent).message.metadata == {"a2a": {"messageId": "m"}}


def test_a_worker_url_part_is_an_a2a_file_by_url() -> None:
    by_url = {"media_type": "image/png", "url": "https://example.com/p.png", "filename": "p.png"}
    worker = record("m-2", "agent", by_url)
    part = mapping.message(worker, "t-1", "c-1").parts[0]
    assert (part.url, part.media_type, part.filename) == ("https://example.com/p.png", "image/png", "p.png")


def test_a_message_stored_under_the_first_convention_reads_back_as_it_did() -> None:
    # Stored before parts had filenames and URLs: every part's kind, filename and mediaType in the
    # metadata, the URL as a text/uri-list part, the JSON spaced
    first = record(
        "m-1",
        "caller",
        {"media_type": "text/plain", "text": "hello"},
        {"media_type": "application/pdf", "data_b64": base64.b64encode(b"\x00\x01tck").decode()},
        {"media_type": "text/uri-list", "text": "https://example.com/x.txt"},
        {"media_type": "application/json", "text": '{"key": "value", "count": 42}'},
        metadata={
            "a2a": {
                "messageId": "tck-1",
                "parts": [
                    {"kind": "text"},
                    {"kind": "raw", "filename": "a.pdf"},
                    {"kind": "url", "filename": "x.txt", "mediaType": "text/plain"},
                    {"kind": "data", "metadata": {"why": "because"}},
                ],
            }
        },
    )
    back = mapping.message(first, "t-1", "ctx-1")
    expected = a2a(
        {
            "messageId": "tck-1",
            "contextId": "ctx-1",
            "taskId": "t-1",
            "role": "ROLE_USER",
            "parts": EVERY_KIND,
        }
    )
    assert back == expected


def test_a_filename_or_url_dovecote_refuses_is_refused() -> None:
    for part in ({"raw": "dGNr", "filename": "../etc/passwd"}, {"url": "not a url"}):
        with pytest.raises(InvalidArgument):
            stored(a2a({"messageId": "m", "role": "ROLE_USER", "parts": [part]}))


def test_a_part_without_a2a_kinds_is_text_when_textual_and_bytes_otherwise() -> None:
    # A message a Dovecote worker wrote without A2A metadata
    plain = record(
        "m-2",
        "agent",
        {"media_type": "text/plain", "text": "done"},
        {"media_type": "image/png", "data_b64": base64.b64encode(b"\x89PNG").decode()},
        {"media_type": "text/plain", "sha256": "a" * 64, "size": 9000, "download_url": "https://s3/x"},
    )
    back = mapping.message(plain, "t-1", "c-1")
    assert back.message_id == "m-2" and back.role == Role.ROLE_AGENT
    assert back.parts[0].text == "done"
    assert back.parts[1].raw == b"\x89PNG" and back.parts[1].media_type == "image/png"
    assert back.parts[2].url == "https://s3/x"  # a part kept in S3: its presigned URL


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (
            {
                "messageId": "m",
                "role": "ROLE_USER",
                "parts": [{"raw": "dGNr", "mediaType": "application/x-unsupported"}],
            },
            "CONTENT_TYPE_NOT_SUPPORTED",
        ),
        (
            {"messageId": "m", "role": "ROLE_USER", "parts": [{"url": "https://x", "mediaType": "video/x-nope"}]},
            "CONTENT_TYPE_NOT_SUPPORTED",
        ),
        ({"role": "ROLE_USER", "parts": [{"text": "no id"}]}, "INVALID_PARAMS"),
        ({"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "not the client's"}]}, "INVALID_PARAMS"),
        ({"messageId": "m", "role": "ROLE_USER", "parts": []}, "INVALID_PARAMS"),
        ({"messageId": "m", "role": "ROLE_USER", "parts": [{"filename": "no content"}]}, "INVALID_PARAMS"),
    ],
)
def test_what_cannot_be_kept_faithfully_is_refused(message: dict[str, Any], reason: str) -> None:
    with pytest.raises(A2AError) as info:
        mapping.message_body(a2a(message), "m-1")
    assert info.value.reason == reason


def test_media_types_are_compared_by_essence() -> None:
    body = mapping.message_body(
        a2a(
            {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x", "mediaType": "Text/Plain; charset=utf-8"}]}
        ),
        "m-1",
    )
    assert body.parts[0].media_type == "Text/Plain; charset=utf-8"


# ---- artifacts ------------------------------------------------------------------------------------------

ARTIFACT = {"id": "a2a-t-1", "media_type": "text/plain"}


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        ({"media_type": "text/plain", "text": "Generated text content"}, "text"),
        ({"media_type": "application/json", "text": '{"key": "value", "count": 42}'}, "data"),
        ({"media_type": "application/octet-stream", "data_b64": base64.b64encode(b"\x00").decode()}, "raw"),
        ({"media_type": "text/plain", "download_url": "https://s3/big"}, "url"),
    ],
)
def test_a_published_payload_is_one_part_by_its_media_type(payload: dict[str, Any], kind: str) -> None:
    artifact = mapping.artifact(artifact_read(payload))
    assert artifact.artifact_id == "a2a-t-1" and len(artifact.parts) == 1
    assert artifact.parts[0].WhichOneof("content") == kind
    if kind == "data":
        assert json_format.MessageToDict(artifact.parts[0].data) == {"key": "value", "count": 42}


def test_an_a2a_artifact_payload_is_the_artifact_itself() -> None:
    held = {"parts": [{"url": "https://example.com/output.txt", "mediaType": "text/plain", "filename": "output.txt"}]}
    artifact = mapping.artifact(artifact_read({"media_type": mapping.ARTIFACT_MEDIA_TYPE, "text": json.dumps(held)}))
    assert artifact.artifact_id == "a2a-t-1"
    part = artifact.parts[0]
    assert (part.url, part.media_type, part.filename) == ("https://example.com/output.txt", "text/plain", "output.txt")
    # A payload that is no A2A Artifact is its bytes, the artifact marked: never a failed read
    broken = mapping.artifact(artifact_read({"media_type": mapping.ARTIFACT_MEDIA_TYPE, "text": "{not json"}))
    assert broken.artifact_id == "a2a-t-1" and broken.parts[0].raw == b"{not json"
    assert "not an A2A Artifact" in broken.metadata[mapping.UNREPRESENTABLE]


# ---- tasks ----------------------------------------------------------------------------------------------

# The task as the service answers it: input required, its question the agent's latest message.
TASK = TaskView.from_json(
    dict(id="t-1", workspace="ws", context="c-1", state="input_required", revision=3, message_count=2)
    | dict(event_count=3, created_at="2026-12-01T10:00:00.000000Z", updated_at="2026-12-01T10:00:01.250000Z")
)


def conversation() -> list[MessageRead]:
    asked = stored(a2a({"messageId": "tck-input-required-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}))
    question = record("m-2", "agent", {"media_type": "text/plain", "text": "more?"})
    return [asked, question]


@pytest.mark.parametrize(("history", "shown"), [(None, 2), (0, 0), (1, 1), (5, 2)])
def test_history_length_shows_the_latest_messages(history: int | None, shown: int) -> None:
    task = mapping.task(TASK, conversation(), [], history_length=history)
    assert len(task.history) == shown
    if shown == 1:
        assert task.history[0].message_id == "m-2"  # the latest, not the first


def test_a_task_on_the_wire_is_camel_case_with_enum_names_and_utc_times() -> None:
    wire = mapping.as_json(mapping.task(TASK, conversation(), [], history_length=None))
    assert wire["contextId"] == "c-1"
    assert wire["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert wire["status"]["timestamp"].endswith("Z")
    assert wire["status"]["message"]["parts"][0]["text"] == "more?"  # the agent's question goes with the state
    assert [m["role"] for m in wire["history"]] == ["ROLE_USER", "ROLE_AGENT"]
    assert wire["history"][0]["messageId"] == "tck-input-required-1"
    assert "artifacts" not in mapping.as_json(mapping.task(TASK, [], [], history_length=0, with_artifacts=False))


def test_a_message_response_is_the_workers_final_message_when_it_asks() -> None:
    direct = {"media_type": "text/plain", "text": "Direct message response"}
    final = record("m-2", "agent", direct, metadata={"a2a": {"messageResponse": True}})
    assert mapping.answers_with_message([conversation()[0], final], "completed")
    assert not mapping.answers_with_message([conversation()[0], final], "input_required")
    assert not mapping.answers_with_message(conversation(), "completed")


# ---- errors ---------------------------------------------------------------------------------------------


def test_errors_carry_the_specs_codes_and_an_error_info() -> None:
    found = from_domain(NotFound("task not found", task="t-9"))
    assert found.jsonrpc()["code"] == -32001
    info = found.jsonrpc()["data"][0]
    assert info == {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "TASK_NOT_FOUND",
        "domain": "a2a-protocol.org",
        "metadata": {"task": "t-9"},
    }
    status, body = found.http()
    assert status == 404 and body["error"]["status"] == "NOT_FOUND" and body["error"]["details"] == [info]
    assert from_domain(InvalidArgument("bad", field="x")).jsonrpc()["code"] == -32602
    assert {k: (v.jsonrpc, v.http) for k, v in KINDS.items() if k.startswith("TASK_NOT")} == {
        "TASK_NOT_FOUND": (-32001, 404),
        "TASK_NOT_CANCELABLE": (-32002, 409),
    }


def test_a_dovecote_error_without_an_a2a_type_keeps_its_code_and_status() -> None:
    conflict = from_domain(IdempotencyConflict("this command id was used for another command"))
    assert conflict.http()[0] == 409 and conflict.jsonrpc()["code"] == -32600
    assert conflict.error_info()["domain"] == "dovecote" and conflict.reason == "IDEMPOTENCY_CONFLICT"
    unknown = from_domain(CommitUnknown("retry the exact command", table="secret-table"))
    assert unknown.http()[0] == 503 and unknown.jsonrpc()["code"] == -32603
    assert "metadata" not in unknown.error_info()  # a server-side failure's facts stay in the log


# ---- stored values protobuf JSON cannot hold (issue 29): served, marked, never a failed read ----------

BIG = "1" + "0" * 400


@pytest.mark.parametrize("text", ["NaN", "[1, Infinity]", '{"n": 1e999}', BIG])
def test_a_data_part_protobuf_cannot_hold_is_its_bytes_marked(text: str) -> None:
    stored_part = {"media_type": "application/json", "text": text}
    for hints in ({"partsVersion": 2, "parts": [{"kind": "data"}]}, {"parts": [{"kind": "data"}]}):  # both conventions
        back = mapping.message(record("m-9", "agent", stored_part, metadata={"a2a": hints}), "t-1", "c-1")
        wire = mapping.as_json(back)  # serializes: no ValueError
        assert back.parts[0].raw == text.encode() and "raw" in wire["parts"][0]
        assert "double" in back.parts[0].metadata[mapping.UNREPRESENTABLE]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 10**400])
def test_metadata_protobuf_cannot_hold_is_left_out_and_marked(value: Any) -> None:
    metadata = {"a2a": {"metadata": {"k": value}, "partsVersion": 2, "parts": [{"metadata": {"p": value}}]}}
    back = mapping.message(
        record("m-9", "agent", {"media_type": "text/plain", "text": "hi"}, metadata=metadata), "t", "c"
    )
    wire = mapping.as_json(back)
    assert wire["parts"][0]["text"] == "hi"  # the rest is served
    assert list(wire["metadata"]) == [mapping.UNREPRESENTABLE]
    assert list(wire["parts"][0]["metadata"]) == [mapping.UNREPRESENTABLE]


def test_an_artifact_protobuf_cannot_hold_is_its_bytes_marked() -> None:
    for payload in (
        {"media_type": mapping.ARTIFACT_MEDIA_TYPE, "text": '{"parts": [{"data": NaN}]}'},
        {"media_type": mapping.ARTIFACT_MEDIA_TYPE, "text": '{"metadata": {"n": ' + BIG + "}}"},
        {"media_type": "application/json", "text": "[1e999]"},
    ):
        artifact = mapping.artifact(artifact_read(payload))
        wire = mapping.as_json(artifact)
        assert base64.b64decode(wire["parts"][0]["raw"]) == payload["text"].encode()
        marks = {**wire.get("metadata", {}), **wire["parts"][0].get("metadata", {})}
        assert mapping.UNREPRESENTABLE in marks
