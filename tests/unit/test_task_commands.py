"""The command gates (dovecote.tasks.commands) and the pydantic models that describe the same inputs
for OpenAPI (functions/tasks_api/models.py) agree: every bound, enum and pattern the document
declares is the gate's own constant, the patterns accept exactly what the gates accept, a body valid
for a model passes its gate, and the gates keep the check order (the role among the fields)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dovecote.platform.errors import DomainError, InvalidArgument
from dovecote.platform.ids import ID_SCHEMA_PATTERN, check_id
from dovecote.platform.principal import Principal
from dovecote.platform.schema import MAX_UTF8_BYTES
from dovecote.tasks import commands
from dovecote.tasks import model as task_model
from dovecote.tasks.commands import (
    DIGEST,
    MAX_CLAIM_WAIT,
    REVISION_CHARS,
    SHA256_HEX,
    WORKER_EVENT_KINDS,
    CommandGate,
    gate_digest,
    gate_revision,
)
from functions.tasks_api import models
from tests.conftest import examples

CALLER = Principal("acme", "caller")
WORKER = Principal("acme", "worker", "w1")
GATE = CommandGate(artifact_max=task_model.ARTIFACT_HARD_MAX, stage_upload=lambda authority, sha, limit: 7)


def field(model: Any, name: str) -> dict[str, Any]:
    """A field's JSON schema as the OpenAPI document publishes it."""
    schema = model.model_json_schema()
    return dict(schema["properties"][name])


def anchored(pattern: str) -> str:
    return f"^{pattern}$"


def schema_match(pattern: str, value: str) -> bool:
    """A JSON Schema pattern as ECMA-262 reads it: `$` is the end of the input (Python's `$` also
    matches before a final newline, which no schema validator in another language does)."""
    assert pattern.endswith("$")
    return re.search(pattern[:-1] + r"\Z", value) is not None


# ---- the document declares the gates' constants -----------------------------------------------------


def test_bounds_and_enums_are_the_gates_constants() -> None:
    assert field(models.CreateTaskIn, "lease_timeout_seconds")["maximum"] == task_model.MAX_LEASE_TIMEOUT
    assert field(models.ClaimIn, "wait_seconds")["maximum"] == MAX_CLAIM_WAIT
    assert field(models.MessageIn, "parts")["maxItems"] == task_model.MAX_PARTS
    assert field(models.WorkerEventIn, "kind")["enum"] == list(WORKER_EVENT_KINDS)
    assert field(models.ReceiptIn, "decision")["enum"] == list(task_model.DECISIONS)
    # The document declares this deployment's maximum (settings), never above the hard maximum.
    from dovecote.platform.settings import get_settings

    declared = field(models.ArtifactUploadIn, "size")["maximum"]
    assert declared == get_settings().artifact_max_bytes <= task_model.ARTIFACT_HARD_MAX
    # Byte limits are declared as such (x-max-utf8-bytes), beside a character bound no tighter.
    for name, limit in (
        ("base_revision", task_model.MAX_REVISION_BYTES),
        ("code", task_model.MAX_RECEIPT_CODE_BYTES),
        ("message", task_model.MAX_RECEIPT_MESSAGE_BYTES),
    ):
        assert field(models.ReceiptIn, name)[MAX_UTF8_BYTES] == limit
        assert field(models.ReceiptIn, name)["maxLength"] == limit


def test_patterns_are_the_gates_patterns() -> None:
    for model, name in (
        (models.ReceiptIn, "base_revision"),
        (models.ReceiptIn, "result_revision"),
        (models.ReceiptIn, "observed_revision"),
        (models.FreezeIn, "expected_base_revision"),
        (models.WorkerFreezeIn, "expected_base_revision"),
    ):
        assert field(model, name)["pattern"] == anchored(REVISION_CHARS), (model, name)
    assert field(models.ReceiptIn, "artifact_digest")["pattern"] == anchored(DIGEST)
    assert field(models.ArtifactUploadIn, "sha256")["pattern"] == anchored(SHA256_HEX)
    assert field(models.PayloadIn, "upload_sha256")["pattern"] == anchored(SHA256_HEX)
    ids = {
        models.CreateTaskIn: ("command_id", "workspace", "id", "context"),
        models.WorkerCommandIn: ("command_id",),
        models.CompleteIn: ("submission_id", "artifact_id"),
        models.FreezeIn: ("artifact_id",),
        models.ReceiptIn: ("command_id", "receipt_id"),
        models.WorkerDeliveryIn: ("delivery_id",),
        models.WorkerEventIn: ("event_id", "task", "submission", "artifact"),
    }
    for model, names in ids.items():
        for name in names:
            assert field(model, name)["pattern"] == ID_SCHEMA_PATTERN, (model, name)


def _gate_accepts(gate: Any, value: str) -> bool:
    try:
        gate(value)
    except InvalidArgument:
        return False
    return True


@settings(max_examples=examples(200), deadline=None)
@given(st.one_of(st.text(max_size=80), st.from_regex(REVISION_CHARS, fullmatch=True)))
@example("rev-0\n")  # Python's `$` would match before the newline; a schema validator's does not
def test_the_revision_pattern_accepts_what_the_gate_accepts(value: str) -> None:
    schema = field(models.ReceiptIn, "base_revision")
    declared = schema_match(schema["pattern"], value) and schema["minLength"] <= len(value) <= schema["maxLength"]
    # Within the declared length, the document and the gate agree exactly (the gate counts bytes
    # and allows up to 4x the characters the document promises).
    if len(value) <= schema["maxLength"]:
        assert declared == _gate_accepts(lambda v: gate_revision(v, "r"), value)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.one_of(
        st.text(alphabet="sha256:0123456789abcdefABCDEF", max_size=72),
        st.from_regex(DIGEST, fullmatch=True),
        st.from_regex(SHA256_HEX, fullmatch=True),
    )
)
def test_the_digest_patterns_accept_what_the_gates_accept(value: str) -> None:
    digest = field(models.ReceiptIn, "artifact_digest")["pattern"]
    assert schema_match(digest, value) == _gate_accepts(lambda v: gate_digest(v, "d"), value)
    upload = field(models.ArtifactUploadIn, "sha256")["pattern"]
    body = {"size": 1, "sha256": value, "fence": 1}
    accepted = _gate_accepts(lambda v: GATE.create_artifact_upload(WORKER, "t1", body), value)
    assert schema_match(upload, value) == accepted


@settings(max_examples=examples(200), deadline=None)
@given(st.one_of(st.text(max_size=140), st.from_regex(ID_SCHEMA_PATTERN)))
@example("t1\n")
def test_the_id_pattern_accepts_what_the_gate_accepts(value: str) -> None:
    assert schema_match(ID_SCHEMA_PATTERN, value) == _gate_accepts(lambda v: check_id(v, "id"), value)


# ---- a body valid for a model passes its gate -----------------------------------------------------------

MESSAGE = {"id": "m1", "parts": [{"media_type": "text/plain", "text": "hi"}]}
WORKER_BODY = {"command_id": "c1", "expected_revision": 2, "fence": 1}
PAYLOAD = {"media_type": "text/plain", "text": "patch"}
DIGEST_VALUE = "sha256:" + "a" * 64
RECEIPT = {
    "command_id": "c1",
    "receipt_id": "r1",
    "artifact_digest": DIGEST_VALUE,
    "base_revision": "rev-0",
    "result_revision": "rev-1",
    "decision": "success",
    "observed_revision": "rev-1",
    "code": "ok",
    "message": "applied",
}
EVENT = {"event_id": "e1", "kind": "complete_task", "task": "t1", "fence": 1, "expected_revision": 2}
CASES: list[tuple[Any, str, Principal, tuple[str, ...], dict[str, Any], type]] = [
    (
        models.CreateTaskIn,
        "create",
        CALLER,
        (),
        {"command_id": "c1", "workspace": "ws", "id": "t1", "context": "x", "message": MESSAGE},
        commands.CreateTask,
    ),
    (
        models.ReplyIn,
        "reply",
        CALLER,
        ("t1",),
        {"command_id": "c1", "expected_revision": 2, "message": MESSAGE},
        commands.Reply,
    ),
    (models.CallerCommandIn, "cancel", CALLER, ("t1",), {"command_id": "c1", "expected_revision": 2}, commands.Cancel),
    (models.WorkerCommandIn, "accept", WORKER, ("t1",), WORKER_BODY, commands.Accept),
    (models.WorkerCommandIn, "reject", WORKER, ("t1",), WORKER_BODY, commands.Reject),
    (models.WorkerCommandIn, "fail", WORKER, ("t1",), WORKER_BODY, commands.Fail),
    (
        models.RequestInputIn,
        "request_input",
        WORKER,
        ("t1",),
        {**WORKER_BODY, "message": MESSAGE},
        commands.RequestInput,
    ),
    (
        models.CompleteIn,
        "complete",
        WORKER,
        ("t1",),
        {**WORKER_BODY, "message": MESSAGE, "submission_id": "s1", "artifact_id": "a1"},
        commands.Complete,
    ),
    (
        models.FreezeIn,
        "freeze",
        WORKER,
        ("t1",),
        {**WORKER_BODY, "artifact_id": "a1", "expected_base_revision": "rev-0", "payload": PAYLOAD},
        commands.Freeze,
    ),
    (models.CommandIn, "acquire", WORKER, ("t1",), {"command_id": "c1"}, commands.Acquire),
    (models.ClaimIn, "claim", WORKER, (), {"command_id": "c1", "wait_seconds": MAX_CLAIM_WAIT}, commands.Claim),
    (models.FenceIn, "fence", WORKER, ("t1",), {"command_id": "c1", "fence": 1}, commands.Fence),
    (models.HeartbeatIn, "heartbeat", WORKER, ("t1",), {"fence": 1}, commands.Heartbeat),
    (
        models.ArtifactUploadIn,
        "create_artifact_upload",
        WORKER,
        ("t1",),
        {"size": 7, "sha256": "a" * 64, "fence": 1},
        commands.CreateArtifactUpload,
    ),
    (models.ReceiptIn, "record_apply_receipt", CALLER, ("ws", "a1"), RECEIPT, commands.RecordReceipt),
    (
        models.WorkerDeliveryIn,
        "worker_event",
        WORKER,
        (),
        {"delivery_id": "d1", "event": {**EVENT, "message": MESSAGE, "submission": "s1", "artifact": "a1"}},
        commands.WorkerEvent,
    ),
]


@pytest.mark.parametrize(("model", "gate", "who", "path", "body", "command"), CASES, ids=[c[1] for c in CASES])
def test_a_body_valid_for_its_model_passes_its_gate(
    model: Any, gate: str, who: Principal, path: tuple[str, ...], body: dict[str, Any], command: type
) -> None:
    validated = model.model_validate(body).model_dump(exclude_none=True)
    gated = getattr(GATE, gate)(who, *path, validated)
    assert isinstance(gated, command)
    if isinstance(gated, commands.WorkerEvent):
        assert gated.refusal is None and isinstance(gated.command, commands.Complete)


def test_every_command_route_has_a_gate() -> None:
    gates = {name for name in vars(CommandGate) if not name.startswith("_")}
    assert {case[1] for case in CASES} == gates


# ---- the order a gate checks in ------------------------------------------------------------------------


def code_of(call: Any) -> tuple[str, str]:
    try:
        call()
    except DomainError as err:
        return err.code, str(err.details.get("field", ""))
    return "ok", ""


def test_the_role_is_checked_where_it_always_was() -> None:
    bad_message = {**WORKER_BODY, "message": {"id": "m1", "parts": []}}
    # request_input and complete gate their message (and submission) before the role...
    assert code_of(lambda: GATE.request_input(CALLER, "t1", bad_message)) == ("invalid_argument", "message.parts")
    bad_submission = {**WORKER_BODY, "message": MESSAGE, "submission_id": "bad id"}
    assert code_of(lambda: GATE.complete(CALLER, "t1", bad_submission)) == ("invalid_argument", "submission_id")
    # ...every other command checks the role first.
    assert code_of(lambda: GATE.accept(CALLER, "t1", {**WORKER_BODY, "command_id": "bad id"})) == ("forbidden", "")
    assert code_of(lambda: GATE.reply(WORKER, "t1", {"message": {}})) == ("forbidden", "")
    assert code_of(lambda: GATE.create(WORKER, {})) == ("forbidden", "")
    # Within a command: message before the task id and the command id (reply), fence last.
    assert code_of(lambda: GATE.reply(CALLER, "bad id", {"command_id": "bad id"})) == ("invalid_argument", "message")
    assert code_of(lambda: GATE.accept(WORKER, "t1", {"command_id": "c1", "expected_revision": 0, "fence": 0})) == (
        "invalid_argument",
        "expected_revision",
    )


def test_a_freeze_stages_its_upload_after_the_payload_and_before_the_command_fields() -> None:
    staged: list[str] = []

    def stage(authority: str, sha256: str, limit: int) -> int:
        staged.append(sha256)
        return 42

    gate = CommandGate(artifact_max=100, stage_upload=stage)
    body = {
        "command_id": "c1",
        "expected_revision": 2,
        "fence": 1,
        "artifact_id": "a1",
        "expected_base_revision": "rev-0",
        "payload": {"media_type": "text/plain", "upload_sha256": "b" * 64},
    }
    freeze = gate.freeze(WORKER, "t1", body)
    assert (freeze.size, freeze.payload.upload_sha256, staged) == (42, "b" * 64, ["b" * 64])
    assert code_of(lambda: gate.freeze(WORKER, "t1", {**body, "fence": 0})) == ("invalid_argument", "fence")
    assert len(staged) == 2  # staged before the fence was looked at, as the service always did
    assert code_of(lambda: gate.freeze(WORKER, "t1", {**body, "artifact_id": "bad id"}))[0] == "invalid_argument"
    assert len(staged) == 2  # never for a bad artifact id


def test_a_refused_worker_event_is_data_and_a_malformed_delivery_raises() -> None:
    refused = GATE.worker_event(WORKER, {"delivery_id": "d1", "event": {**EVENT, "kind": "nope"}})
    assert refused.command is None and refused.refusal is not None and refused.refusal.code == "invalid_argument"
    admin = GATE.worker_event(Principal("acme", "admin", "w1"), {"delivery_id": "d1", "event": EVENT})
    assert admin.refusal is not None and admin.refusal.code == "forbidden"
    with pytest.raises(InvalidArgument):
        GATE.worker_event(WORKER, {"delivery_id": "bad id", "event": EVENT})
    with pytest.raises(InvalidArgument):
        GATE.worker_event(WORKER, {"delivery_id": "d1", "event": []})
    # The digest is the event's as delivered: the same event is the same delivery.
    one = GATE.worker_event(WORKER, {"delivery_id": "d1", "event": {**EVENT, "kind": "accept_task"}})
    two = GATE.worker_event(WORKER, {"delivery_id": "d2", "event": {**EVENT, "kind": "accept_task"}})
    assert one.digest == two.digest and isinstance(one.command, commands.Accept)


def test_message_metadata_is_an_optional_bounded_object() -> None:
    # A message may carry metadata (a JSON object, kept as given); the model accepts what the gate does
    body = {**MESSAGE, "metadata": {"a2a": {"messageId": "tck-complete-task-1", "parts": [{"kind": "text"}]}}}
    assert models.MessageIn.model_validate(body).metadata == body["metadata"]
    assert commands.gate_message(body).metadata == body["metadata"]
    assert commands.gate_message(MESSAGE).metadata == {}
    # Its intent (what the command digest covers) carries it, and leaves it out when empty
    assert commands.gate_message(body).to_json()["metadata"] == body["metadata"]
    assert "metadata" not in commands.gate_message(MESSAGE).to_json()
    # Not an object, or longer than the limit as JSON: invalid_argument naming the field
    for bad in ([1], "x", 3):
        with pytest.raises(InvalidArgument) as info:
            commands.gate_message({**MESSAGE, "metadata": bad})
        assert info.value.details["field"] == "message.metadata"
    big = {"k": "x" * task_model.MAX_METADATA_BYTES}
    with pytest.raises(InvalidArgument) as info:
        commands.gate_message({**MESSAGE, "metadata": big})
    assert info.value.details["limit"] == task_model.MAX_METADATA_BYTES


# ---- message parts: filename, url, data ---------------------------------------------------------------


def test_the_part_patterns_are_the_gates_patterns() -> None:
    filename = field(models.PartIn, "filename")
    assert filename["pattern"] == anchored(commands.FILENAME_CHARS)
    assert filename["not"] == {"enum": list(commands.NOT_FILENAMES)}
    assert (filename["minLength"], filename["maxLength"]) == (1, task_model.MAX_FILENAME_CHARS)
    url = field(models.PartIn, "url")
    assert url["pattern"] == anchored(commands.URL_CHARS) and url["not"] == {"pattern": f"^{commands.HOST_MISSING}"}
    assert url["maxLength"] == task_model.MAX_URL_CHARS


def _filename_declared(value: str) -> bool:
    schema = field(models.PartIn, "filename")
    return (
        schema_match(schema["pattern"], value)
        and value not in schema["not"]["enum"]
        and schema["minLength"] <= len(value) <= schema["maxLength"]
    )


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=20), st.from_regex(commands.FILENAME_CHARS, fullmatch=True), st.just("x" * 256)))
@example("a.txt\n")
@example("..")
def test_the_filename_schema_accepts_what_the_gate_accepts(value: str) -> None:
    assert _filename_declared(value) == _gate_accepts(lambda v: commands.gate_filename(v, "f"), value)


def _url_declared(value: str) -> bool:
    schema = field(models.PartIn, "url")
    return (
        schema_match(schema["pattern"], value)
        and re.search(schema["not"]["pattern"], value) is None
        and len(value) <= schema["maxLength"]
    )


def _urllib_refuses(value: str) -> bool:
    from urllib.parse import urlsplit

    try:
        urlsplit(value)
        return False
    except ValueError:
        return True


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=30),
        st.from_regex(commands.URL_CHARS, fullmatch=True),
        st.builds(lambda s, rest: s + rest, st.sampled_from(["http:", "HTTPS:", "https://", "mailto:"]), st.text()),
    )
)
@example("https://x.y/\n")
@example("http://")
@example("https:///x")
@example("https://[::1]:8080/x")
def test_the_url_schema_accepts_what_the_gate_accepts(value: str) -> None:
    # Beyond the schema, the gate refuses what urllib.parse cannot split (an unclosed IPv6 host, a
    # host that NFKC-normalizes into a delimiter): the document says so in words.
    accepted = _gate_accepts(lambda v: commands.gate_url(v, "u"), value)
    assert accepted == (_url_declared(value) and not _urllib_refuses(value))


def test_an_old_shaped_message_keeps_its_intent_digest() -> None:
    # Pinned before parts had filenames and URLs: a retry of a command sent then still replays
    message = commands.gate_message(
        {
            "id": "m-1",
            "parts": [
                {"media_type": "text/plain", "text": "hello"},
                {"media_type": "application/octet-stream", "data_b64": "AAEC"},
            ],
            "metadata": {"a2a": {"messageId": "x"}},
        }
    )
    digest = task_model.intent_digest("reply_task", {"message": message.to_json()})
    assert digest == "sha256:a97e42b024ae7c36c9719898c84939e06d901a139a840134153fb07865f49a0b"
    json_part = commands.gate_message({"id": "m-2", "parts": [{"media_type": "application/json", "text": '{"a":1}'}]})
    create = {
        "id": "t-1",
        "workspace": "ws",
        "context": "c",
        "message": json_part.to_json(),
        "lease_timeout_seconds": 0,
    }
    digest = task_model.intent_digest("create_task", create)
    assert digest == "sha256:0e8976ba07e4a43daab7cde3f241106e87a14035d43d3b069b3522e93f4f4a75"
    # The `data` form is the same bytes as its compact JSON text: the same intent
    as_data = commands.gate_message({"id": "m-2", "parts": [{"data": {"a": 1}}]})
    assert as_data.to_json() == json_part.to_json()


def test_the_new_part_keys_enter_the_intent_only_when_set() -> None:
    plain = commands.gate_message({"id": "m", "parts": [{"media_type": "text/plain", "text": "x"}]})
    named = commands.gate_message({"id": "m", "parts": [{"media_type": "text/plain", "text": "x", "filename": "x"}]})
    ref = commands.gate_message({"id": "m", "parts": [{"media_type": "text/plain", "url": "https://x.y"}]})
    assert plain.to_json()["parts"] == [{"media_type": "text/plain", "data_b64": "eA=="}]
    assert named.to_json()["parts"] == [{"media_type": "text/plain", "data_b64": "eA==", "filename": "x"}]
    assert ref.to_json()["parts"] == [{"media_type": "text/plain", "url": "https://x.y"}]
    assert ref.parts[0].data == b""


def test_a_part_model_accepts_what_its_gate_accepts() -> None:
    from pydantic import ValidationError

    for part in (
        {"data": {"a": 1}},
        {"data": [1], "media_type": "text/csv", "filename": "a.csv"},
        {"data": False},
        {"url": "HTTPS://example.com/isbn/0451450523", "media_type": "text/plain"},
    ):
        body = {"id": "m", "parts": [part]}
        models.MessageIn.model_validate(body)
        commands.gate_message(body)
    # null is no JSON value here: the edge cannot tell it from a form left out, so both refuse it
    with pytest.raises(ValidationError):
        models.MessageIn.model_validate({"id": "m", "parts": [{"data": None}]})
    with pytest.raises(InvalidArgument):
        commands.gate_message({"id": "m", "parts": [{"data": None}]})


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "JavaScript://example.com/%0Aalert(1)",
        "file:///etc/passwd",
        "data:text/html,<script>alert(1)</script>",
        "urn:isbn:0451450523",
        "ftp://example.com/x",
        "mailto:a@example.com",
    ],
)
def test_a_url_part_is_http_or_https_only(url: str) -> None:
    # Any other scheme is one a reader (a browser, an agent) could be made to open: refused by the
    # one gate every binding's message goes through, and the edge's schema says the same.
    with pytest.raises(InvalidArgument) as info:
        commands.gate_message({"id": "m", "parts": [{"url": url, "media_type": "text/plain"}]})
    assert info.value.details["field"] == "message.parts[0].url"
    assert not _url_declared(url)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 10**400, [1, {"k": 10**309}]])
def test_message_values_every_binding_can_carry(value: Any) -> None:
    # A2A serves messages as protobuf JSON (numbers are doubles): what it cannot hold is refused at
    # the write, in metadata and in a data part alike, so no read meets it afterwards.
    with pytest.raises(InvalidArgument) as info:
        commands.gate_message({**MESSAGE, "metadata": {"k": value}})
    assert info.value.details["field"] == "message.metadata"
    with pytest.raises(InvalidArgument) as info:
        commands.gate_message({"id": "m", "parts": [{"data": {"k": value}}]})
    assert info.value.details["field"] == "message.parts[0].data"
    # The largest doubles are fine
    commands.gate_message({"id": "m", "parts": [{"data": [10**308, 1.5e308, -(2**1023)]}], "metadata": {"k": 10**300}})
