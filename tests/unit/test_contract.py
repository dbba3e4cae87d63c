"""The contract says exactly what it checks (issue 15 item 11): what the OpenAPI document declares
is enforced, and what the gates enforce is declared. Over HTTP: tests/e2e/test_contract_http.py;
the fuzzer holding the two together for every operation and role: tests/e2e/fuzz/."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from dovecote.notes.limits import MAX_COORDINATE_BYTES
from dovecote.notes.model import NoteFilter
from dovecote.notes.service import PutNote, gate_put
from dovecote.platform.errors import InvalidArgument
from dovecote.platform.schema import MAX_UTF8_BYTES, SAFE_MAX
from functions.admin_api.handler import openapi_document

SHA = "0" * 64


def _schemas() -> dict[str, Any]:
    return dict(openapi_document()["components"]["schemas"])


def _parameter(path: str, method: str, name: str) -> dict[str, Any]:
    operation = openapi_document()["paths"][path][method]
    return next(p for p in operation["parameters"] if p["name"] == name)


def _valid(schema: dict[str, Any], value: Any) -> bool:
    resolver_doc = {"components": {"schemas": _schemas()}, **schema}
    return not list(jsonschema.Draft202012Validator(resolver_doc).iter_errors(value))


# ---- declared, now enforced ----------------------------------------------------------------------


@pytest.mark.parametrize("run", [SAFE_MAX + 1, 2**63 - 1, 2**63])
def test_a_run_past_the_declared_maximum_is_refused_everywhere(run: int) -> None:
    with pytest.raises(InvalidArgument, match=f"Note.Run must be <= {SAFE_MAX}"):
        gate_put(PutNote(key="k", run=run, name="n", text="x"))
    with pytest.raises(InvalidArgument, match=f"Filter.Run must be <= {SAFE_MAX}"):
        NoteFilter(run=run).validate()


def test_the_declared_maximum_run_is_accepted_and_documented() -> None:
    assert gate_put(PutNote(key="k", run=SAFE_MAX, name="n", text="x"))[0].run == SAFE_MAX
    NoteFilter(run=SAFE_MAX).validate()
    schemas = _schemas()
    assert schemas["PutNoteBody"]["properties"]["run"]["maximum"] == SAFE_MAX
    assert schemas["UploadBody"]["properties"]["run"]["maximum"] == SAFE_MAX
    assert _parameter("/v1/notes", "get", "run")["schema"]["maximum"] == SAFE_MAX


def test_size_belongs_to_an_upload_commit_only() -> None:
    """`size` on an inline put was ignored, whatever it said. The document says it is for an upload
    commit; the gate now agrees, and so does the schema's inline branch."""
    for body in ({"text": "abc"}, {"body_b64": "YWJj"}, {}):
        for size in (3, 4, 0):
            with pytest.raises(InvalidArgument, match="size is only for an upload commit") as refused:
                gate_put(PutNote(key="k", run=1, name="n", size=size, **body))
            assert refused.value.details["field"] == "size"
    assert gate_put(PutNote(key="k", run=1, name="n", upload=True, sha256=SHA, size=3))[2] is None
    schema = {"$ref": "#/components/schemas/PutNoteBody"}
    assert not _valid(schema, {"key": "k", "run": 1, "name": "n", "text": "abc", "size": 3})
    assert _valid(schema, {"key": "k", "run": 1, "name": "n", "text": "abc"})
    assert _valid(schema, {"key": "k", "run": 1, "name": "n", "upload": True, "sha256": SHA, "size": 3})


@pytest.mark.parametrize("field", ["key", "name", "author"])
def test_a_list_filter_longer_than_any_coordinate_is_refused(field: str) -> None:
    """The query declares the coordinates' limit; a filter over it matched nothing and was a 200."""
    NoteFilter(**{field: "é" * (MAX_COORDINATE_BYTES // 2)}).validate()
    with pytest.raises(InvalidArgument, match="the limit is 1024") as refused:
        NoteFilter(**{field: "é" * (MAX_COORDINATE_BYTES // 2) + "x"}).validate()
    assert refused.value.details["field"] == field
    assert _parameter("/v1/notes", "get", field)["schema"][MAX_UTF8_BYTES] == MAX_COORDINATE_BYTES


@pytest.mark.parametrize("model", ["TranscriptUploadBody", "TranscriptBody"])
@pytest.mark.parametrize("field", ["project", "project_folder"])
def test_control_characters_in_a_project_are_refused_as_declared(model: str, field: str) -> None:
    from pydantic import ValidationError

    from functions.recall_api import models

    cls = getattr(models, model)
    base = {"format": "claude-code-jsonl"} | ({"jsonl": "{}"} if model == "TranscriptBody" else {})
    declared = _schemas()[model]["properties"][field]
    for bad in ("a\nb", "a\rb", "\x00", "a\x1bb", "x\x1f"):
        with pytest.raises(ValidationError, match="control characters"):
            cls.model_validate({**base, field: bad})
        assert not _valid(declared, bad)
    for good in ("acme/widget", "a\tb", "é 日本"):
        assert getattr(cls.model_validate({**base, field: good}), field) == good
        assert _valid(declared, good)


# ---- enforced, now declared ----------------------------------------------------------------------


@pytest.mark.parametrize(("path", "count"), [("messages", "message_count"), ("events", "event_count")])
def test_after_past_the_end_of_a_stream_is_declared(path: str, count: str) -> None:
    operation = openapi_document()["paths"][f"/v1/tasks/{{task_id}}/{path}"]["get"]
    after = next(p for p in operation["parameters"] if p["name"] == "after")
    assert count in after["description"] and "400" in after["description"]
    assert "past the end" in operation["responses"]["400"]["description"]


def test_updated_since_declares_what_it_accepts() -> None:
    """`default: ""` with a pattern that refused "": the empty string (no filter) is now declared."""
    schema = _parameter("/v1/tasks", "get", "updated_since")["schema"]
    assert schema.get("default") == ""
    for good in ("", "2026-01-02T03:04:05Z", "2024-02-29T00:00:00.123456+14:00"):
        assert _valid(schema, good), good
    for bad in (" ", "2026-02-30T00:00:00Z", "2026-01-02", "0001-01-01T00:00:00Z"):
        assert not _valid(schema, bad), bad


def test_memory_content_declares_the_limit_it_enforces() -> None:
    from dovecote.memory.model import MAX_CONTENT_BYTES

    content = _schemas()["SubmitIn"]["properties"]["content"]
    assert MAX_CONTENT_BYTES == 8 * 1024
    assert content["maxLength"] == content[MAX_UTF8_BYTES] == MAX_CONTENT_BYTES


def test_some_visible_character_is_declared_as_the_gate_reads_it() -> None:
    """The memory gate wants `content.strip()` non-empty: the pattern's space class is Python's."""
    import re

    pattern = re.compile(_schemas()["SubmitIn"]["properties"]["content"]["pattern"])
    for code in range(1, 0x3001):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue
        assert bool(pattern.match(char)) == bool(char.strip()), hex(code)


def _text_fields(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("type") == "string" or MAX_UTF8_BYTES in node:
            yield node
        for value in node.values():
            yield from _text_fields(value)
    elif isinstance(node, list):
        for value in node:
            yield from _text_fields(value)


def test_every_byte_limit_is_declared_as_its_own_length() -> None:
    """A byte limit is declared as maxLength = the byte count, never a fraction of it: a string the
    schema refuses must be one the server refuses (the fuzzer's negative_data_rejection)."""
    declared = [f for f in _text_fields(openapi_document()) if MAX_UTF8_BYTES in f]
    assert len(declared) >= 10
    for field in declared:
        assert field["maxLength"] == field[MAX_UTF8_BYTES]


@pytest.fixture
def fresh_document(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    from dovecote.platform.settings import get_settings

    get_settings.cache_clear()
    openapi_document.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    get_settings.cache_clear()
    openapi_document.cache_clear()


@pytest.mark.parametrize("setting", [None, "1048576", str(64 * 1024 * 1024)])
def test_the_artifact_upload_maximum_is_the_deployments_own(
    fresh_document: pytest.MonkeyPatch, setting: str | None
) -> None:
    """It declared the 64 MiB hard maximum while the deployment enforces its setting (16 MiB by
    default); the deployment builds and serves the document, so it states its own figure."""
    if setting is None:
        fresh_document.delenv("DOVECOTE_ARTIFACT_MAX_BYTES", raising=False)
    else:
        fresh_document.setenv("DOVECOTE_ARTIFACT_MAX_BYTES", setting)
    size = openapi_document()["components"]["schemas"]["ArtifactUploadIn"]["properties"]["size"]
    assert size["maximum"] == (16 * 1024 * 1024 if setting is None else int(setting))
    assert size["minimum"] == 1


def test_the_admin_function_receives_the_setting_its_document_states() -> None:
    from infra.routes import FUNCTIONS

    assert "artifact_max_bytes" in FUNCTIONS["admin_api"].settings
    assert "artifact_max_bytes" in FUNCTIONS["tasks_api"].settings


def test_every_parameter_default_is_a_value_its_schema_accepts() -> None:
    """`GET /v1/tasks` declared `default: ""` for `context` and `state` while their schemas refused
    "" (which the server takes as "no filter"): the fuzzer sent `?context=` as invalid data and the
    server accepted it."""
    doc = openapi_document()
    wrong = []
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters") or []:
                schema = parameter.get("schema") or {}
                if "default" in schema and not _valid(schema, schema["default"]):
                    wrong.append(f"{method.upper()} {path} {parameter['name']}={schema['default']!r}")
    assert wrong == []


def test_an_inline_put_takes_no_sha256() -> None:
    """The fuzzer's find: `{"sha256": ""}` on an inline put was ignored, a 200. Like `size`, the
    digest belongs to an upload commit (docs/services/notes.md#routes); an inline body's is computed."""
    for sha in ("", SHA, "not hex"):
        with pytest.raises(InvalidArgument, match="sha256 is only for an upload commit") as refused:
            gate_put(PutNote(key="k", run=1, name="n", text="x", sha256=sha))
        assert refused.value.details["field"] == "sha256"
    assert not _valid({"$ref": "#/components/schemas/PutNoteBody"}, {"key": "k", "run": 1, "name": "n", "sha256": SHA})


def test_an_empty_content_type_is_not_a_media_type() -> None:
    """Absent means the default; "" was read as absent on inline puts and upload requests, while the
    document (and an upload commit) refused it."""
    from dovecote.notes.memory import InMemoryNoteStore
    from dovecote.notes.service import NotesService
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.principal import Principal

    with pytest.raises(InvalidArgument, match="not a media type"):
        gate_put(PutNote(key="k", run=1, name="n", text="x", content_type=""))
    with pytest.raises(InvalidArgument, match="not a media type"):
        gate_put(PutNote(key="k", run=1, name="n", body_b64="eA==", content_type=""))
    with pytest.raises(InvalidArgument, match="not a media type"):
        gate_put(PutNote(key="k", run=1, name="n", upload=True, sha256=SHA, content_type=""))
    assert gate_put(PutNote(key="k", run=1, name="n", text="x"))[1] == "text/plain; charset=utf-8"
    assert gate_put(PutNote(key="k", run=1, name="n", body_b64="eA=="))[1] == "application/octet-stream"
    service = NotesService(InMemoryNoteStore(), CursorSigner(b"k" * 32))
    caller = Principal(authority="acme", role="caller")
    with pytest.raises(InvalidArgument, match="not a media type"):
        service.create_upload(caller, PutNote(key="k", run=1, name="n", size=1, sha256=SHA, content_type=""))


def test_what_json_schema_can_state_about_receipts_and_tags_is_declared() -> None:
    """Left to words (and excluded from the fuzzer's acceptance check) only where JSON Schema has no
    way to say it: a success observing exactly its result revision, tags distinct case-insensitively."""
    receipt = {
        "command_id": "c1",
        "receipt_id": "r1",
        "artifact_digest": "sha256:" + SHA,
        "base_revision": "a",
        "result_revision": "b",
    }
    schema = {"$ref": "#/components/schemas/ReceiptIn"}
    assert not _valid(schema, {**receipt, "decision": "conflict"})
    assert not _valid(schema, {**receipt, "decision": "success"})
    assert _valid(schema, {**receipt, "decision": "conflict", "observed_revision": "c"})
    assert _valid(schema, {**receipt, "decision": "rejected"})
    write = {"id": "w1", "scope": "project:acme", "content": "x"}
    schema = {"$ref": "#/components/schemas/SubmitIn"}
    assert _valid(schema, {**write, "tags": ["Subject:a", "deploy"]})
    assert not _valid(schema, {**write, "tags": ["subject:a", "SUBJECT:b"]})
    assert not _valid(schema, {**write, "tags": ["Subject:"]})
