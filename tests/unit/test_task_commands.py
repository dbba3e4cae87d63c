"""The edge models (dovecote/tasks/bodies.py), the rules they validate with (tasks/inputs.py), the
error codes they answer and the command gates (tasks/commands.py) agree: every bound, enum and
pattern the document declares is the rule's own constant and accepts exactly what the rule accepts;
every field with a rule refuses a well-typed value that breaks it with the rule's stable code,
message and `field`, while a value of the wrong type is a type error as the API words it; a body
valid for its model passes its gate; and the gates keep the check order (the role among the fields),
pinned pair by pair."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from dovecote.a2a.mapping import MessageBody, PartBody
from dovecote.platform.errors import DomainError, InvalidArgument
from dovecote.platform.ids import ID_SCHEMA_PATTERN, check_id
from dovecote.platform.principal import Principal
from dovecote.platform.schema import MAX_UTF8_BYTES, RequestModel, refusal_of, validated
from dovecote.tasks import bodies as models
from dovecote.tasks import commands, inputs
from dovecote.tasks import limits as task_model
from dovecote.tasks.commands import CommandGate
from dovecote.tasks.limits import DIGEST, MAX_CLAIM_WAIT, REVISION_CHARS, SHA256_HEX, WORKER_EVENT_KINDS
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
    for model, name in ((models.FailIn, "reason"), (models.WorkerEventIn, "reason")):
        assert field(model, name)[MAX_UTF8_BYTES] == field(model, name)["maxLength"] == task_model.MAX_FAIL_REASON_BYTES


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
        assert declared == _gate_accepts(lambda v: inputs.revision(v, "r"), value)


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
    assert schema_match(digest, value) == _gate_accepts(lambda v: inputs.digest(v, "d"), value)
    upload = field(models.ArtifactUploadIn, "sha256")["pattern"]
    body = models.ArtifactUploadIn.model_validate({"size": 1, "sha256": value, "fence": 1})
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
    (models.FailIn, "fail", WORKER, ("t1",), {**WORKER_BODY, "reason": "disk full"}, commands.Fail),
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
    gated = getattr(GATE, gate)(who, *path, model.model_validate(body))
    assert isinstance(gated, command)
    if isinstance(gated, commands.WorkerEvent):
        assert gated.refusal is None and isinstance(gated.command, commands.Complete)


def test_every_command_route_has_a_gate() -> None:
    gates = {name for name in vars(CommandGate) if not name.startswith("_")}
    assert {case[1] for case in CASES} == gates


# ---- every rule refuses with its stable code; a wrong type is a type error --------------------------------

# A well-typed value that breaks each field's rule, and the `field` its refusal names.
BREAKS: dict[str, tuple[Any, str]] = {
    "command_id": ("bad id", "command_id"),
    "id": ("-leading", "id"),
    "workspace": ("x" * 129, "workspace"),
    "context": ("", "context"),
    "expected_revision": (0, "expected_revision"),
    "message": ({"id": "m1", "parts": []}, "message.parts"),
    "lease_timeout_seconds": (-1, "lease_timeout_seconds"),
    "accept_timeout_seconds": (task_model.MAX_ACCEPT_TIMEOUT + 1, "accept_timeout_seconds"),
    "submission_id": ("bad id", "submission_id"),
    "artifact_id": ("a/b", "artifact_id"),
    "fence": (0, "fence"),
    "expected_base_revision": ("", "expected_base_revision"),
    "payload": ({"media_type": "bad type", "text": "x"}, "payload.media_type"),
    "wait_seconds": (MAX_CLAIM_WAIT + 1, "wait_seconds"),
    "size": (0, "size"),
    "sha256": ("A" * 64, "sha256"),
    "receipt_id": ("bad id", "receipt_id"),
    "artifact_digest": ("sha256:" + "A" * 64, "artifact_digest"),
    "base_revision": ("", "base_revision"),
    "result_revision": ("rev\x01", "result_revision"),
    "decision": ("maybe", "decision"),
    "observed_revision": ("x" * 513, "observed_revision"),
    "code": ("é" * 65, "code"),
    "delivery_id": ("bad id", "delivery_id"),
    "reason": ("é" * 1025, "reason"),  # 1,025 characters, 2,050 bytes
}
# A value of the wrong type for every field above: never a refusal, always a type error.
WRONG_TYPE = {"payload": [], "expected_revision": "1", "lease_timeout_seconds": True}
CREATE_BREAKS = {"expected_revision": (1, "expected_revision")}  # a create expects 0, nothing else
RECEIPT_BREAKS = {"message": ("é" * 2049, "message")}  # a receipt's message is text


def breaks_for(model: Any) -> dict[str, tuple[Any, str]]:
    own = {models.CreateTaskIn: CREATE_BREAKS, models.ReceiptIn: RECEIPT_BREAKS}.get(model, {})
    return {**BREAKS, **own}


# The rules that need the deployment's maximum, which only the service knows: the gate applies them.
GATE_RULES = {"payload", "size"}


def _held_refusal(model: type[RequestModel], body: dict[str, Any], name: str) -> DomainError | None:
    held = validated(model, body)
    try:
        getattr(held, name)
    except DomainError as exc:
        return exc
    return None


def _gate_refusal(gate: str, who: Principal, path: tuple[str, ...], model: Any, body: dict[str, Any]) -> DomainError:
    try:
        getattr(GATE, gate)(who, *path, validated(model, body))
    except DomainError as exc:
        return exc
    raise AssertionError("the gate took a body that breaks a rule")


@pytest.mark.parametrize(("model", "gate", "who", "path", "body", "command"), CASES, ids=[c[1] for c in CASES])
def test_every_rule_refuses_with_its_code_and_a_wrong_type_is_a_type_error(
    model: Any, gate: str, who: Principal, path: tuple[str, ...], body: dict[str, Any], command: type
) -> None:
    breaks = breaks_for(model)
    checked = [name for name in model.model_fields if name in breaks and name in body]
    assert checked or model is models.HeartbeatIn or model is models.WorkerDeliveryIn
    for name in checked:
        value, named = breaks[name]
        broken = {**body, name: value}
        held = _held_refusal(model, broken, name)
        through_gate = _gate_refusal(gate, who, path, model, broken)
        if name in GATE_RULES:
            assert held is None  # the model checks its type only; the gate applies the rule
        else:
            # The field's own rule, held by the model: its stable code, the input it names, and the
            # same refusal where the gate reads the field.
            assert held is not None
            assert (held.code, held.details.get("field"), held.status) == ("invalid_argument", named, 400)
            assert (through_gate.code, through_gate.message, through_gate.details) == (
                held.code,
                held.message,
                held.details,
            )
        assert (through_gate.code, through_gate.details.get("field")) == ("invalid_argument", named)
        wrong = WRONG_TYPE.get(name, 5 if isinstance(body[name], str) else "5")
        with pytest.raises(InvalidArgument) as typed:
            validated(model, {**body, name: wrong})
        problems = typed.value.details["problems"]
        assert problems and problems[0]["field"].split(".")[0] == name, problems
        assert typed.value.message.startswith(name) and "field" not in typed.value.details


def test_a_refused_field_raises_only_when_read_and_types_come_first() -> None:
    body = {"command_id": "bad id", "workspace": "ws", "id": "t1", "context": "x", "message": MESSAGE}
    held = models.CreateTaskIn.model_validate(body)
    assert held.workspace == "ws" and held.message.id == "m1"  # every other field is its value
    with pytest.raises(InvalidArgument, match="command_id must match"):
        held.command_id  # noqa: B018
    # A type error anywhere wins over every broken rule, and is the only thing reported.
    with pytest.raises(ValidationError) as caught:
        models.CreateTaskIn.model_validate({**body, "id": 5})
    typed = [e for e in caught.value.errors() if refusal_of(e) is None]
    assert [e["loc"] for e in typed] == [("id",)]
    assert validated.__name__ and pytest.raises(InvalidArgument, validated, models.CreateTaskIn, {**body, "id": 5})
    with pytest.raises(InvalidArgument) as refused:
        validated(models.CreateTaskIn, {**body, "id": 5})
    assert refused.value.details == {"problems": [{"field": "id", "problem": "Input should be a valid string"}]}
    # null and unknown fields are type errors too
    for bad in ({**body, "context": None}, {**body, "extra": 1}):
        with pytest.raises(InvalidArgument) as refused:
            validated(models.CreateTaskIn, bad)
        assert "problems" in refused.value.details


# ---- the order a gate checks in ------------------------------------------------------------------------

ROLE, PATH = "<role>", "<path>"
# Each command's checks in the order its gate makes them (docs/design/tasks.md#the-check-order): the
# role among the fields, the path's ids, then the body's. Pinned: the order is observable.
WRONG_ROLE = {CALLER: WORKER, WORKER: CALLER}
ORDER: dict[str, list[str]] = {
    "create": [
        ROLE,
        "command_id",
        "id",
        "workspace",
        "context",
        "expected_revision",
        "message",
        "lease_timeout_seconds",
        "accept_timeout_seconds",
    ],
    "reply": [ROLE, "message", PATH, "command_id", "expected_revision"],
    "cancel": [ROLE, PATH, "command_id", "expected_revision"],
    "accept": [ROLE, PATH, "command_id", "expected_revision", "fence"],
    "reject": [ROLE, PATH, "command_id", "expected_revision", "fence"],
    "fail": [ROLE, PATH, "command_id", "expected_revision", "fence", "reason"],
    "request_input": ["message", ROLE, PATH, "command_id", "expected_revision", "fence"],
    "complete": ["submission_id", "message", "artifact_id", ROLE, PATH, "command_id", "expected_revision", "fence"],
    "freeze": [
        ROLE,
        PATH,
        "artifact_id",
        "expected_base_revision",
        "payload",
        "command_id",
        "expected_revision",
        "fence",
    ],
    "acquire": [ROLE, PATH, "command_id"],
    "claim": [ROLE, "command_id", "wait_seconds"],
    "fence": [ROLE, PATH, "command_id", "fence"],
    "heartbeat": [ROLE, PATH, "fence"],
    "create_artifact_upload": [ROLE, PATH, "size", "sha256", "fence"],
    "record_apply_receipt": [
        ROLE,
        PATH,
        "command_id",
        "receipt_id",
        "artifact_digest",
        "base_revision",
        "result_revision",
        "decision",
        "observed_revision",
        "code",
        "message",
    ],
    "worker_event": [ROLE, "delivery_id"],
}


def _broken(case: tuple[Any, ...], steps: tuple[str, ...]) -> tuple[DomainError | None, tuple[str, ...]]:
    model, gate, who, path, body, _ = case
    breaks = breaks_for(model)
    for step in steps:
        if step == ROLE:
            who = WRONG_ROLE[who]
        elif step == PATH:
            path = tuple("bad id" for _ in path)
        else:
            body = {**body, step: breaks[step][0]}
    try:
        getattr(GATE, gate)(who, *path, validated(model, body))
    except DomainError as exc:
        return exc, steps
    return None, steps


def _named(step: str, model: Any) -> tuple[str, str]:
    if step == ROLE:
        return "forbidden", ""
    if step == PATH:
        return "invalid_argument", "workspace" if model is models.ReceiptIn else "task"
    breaks = breaks_for(model)
    return "invalid_argument", breaks[step][1]


@pytest.mark.parametrize("case", CASES, ids=[c[1] for c in CASES])
def test_the_first_refusal_in_the_check_order_wins(case: tuple[Any, ...]) -> None:
    order = ORDER[case[1]]
    for first, later in itertools.combinations(order, 2):
        found, _ = _broken(case, (later, first))
        assert found is not None
        want = _named(first, case[0])
        assert (found.code, str(found.details.get("field", ""))) == want, (case[1], first, later, found)


def test_the_order_table_names_every_checked_field() -> None:
    for case in CASES:
        model, gate, _, _, body, _ = case
        checked = {name for name in body if name in BREAKS and name != "event"}
        assert checked <= set(ORDER[gate]), (gate, checked - set(ORDER[gate]))


def test_a_receipts_rule_between_fields_comes_after_its_fields_and_before_the_code() -> None:
    model = models.ReceiptIn

    def answer(drop: str = "", **patch: Any) -> tuple[str, str]:
        body = {k: v for k, v in {**RECEIPT, **patch}.items() if k != drop}
        try:
            GATE.record_apply_receipt(CALLER, "ws", "a1", validated(model, body))
        except DomainError as exc:
            return exc.code, exc.message
        return "ok", ""

    assert answer(observed_revision="rev-9") == ("invalid_argument", "a success must observe the result revision")
    assert answer(observed_revision="rev-9", code="é" * 65)[1] == "a success must observe the result revision"
    assert answer(observed_revision="", code="é" * 65)[1] == "observed_revision must be a non-empty string"
    assert answer("observed_revision", decision="conflict") == (
        "invalid_argument",
        "a conflict must name the observed revision",
    )
    assert answer(decision="rejected", observed_revision="rev-9") == ("ok", "")


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

    def freeze(patch: dict[str, Any]) -> Any:
        return gate.freeze(WORKER, "t1", validated(models.FreezeIn, {**body, **patch}))

    done = freeze({})
    assert (done.size, done.payload.upload_sha256, staged) == (42, "b" * 64, ["b" * 64])
    assert code_of(lambda: freeze({"fence": 0})) == ("invalid_argument", "fence")
    assert len(staged) == 2  # staged before the fence was looked at, as the service always did
    assert code_of(lambda: freeze({"artifact_id": "bad id"}))[0] == "invalid_argument"
    assert len(staged) == 2  # never for a bad artifact id
    # The payload's size against the deployment's maximum: the gate's rule (the service's setting).
    assert code_of(lambda: freeze({"payload": {"media_type": "text/plain", "text": "x" * 101}}))[0] == (
        "payload_too_large"
    )


def code_of(call: Any) -> tuple[str, str]:
    try:
        call()
    except DomainError as err:
        return err.code, str(err.details.get("field", ""))
    return "ok", ""


def deliver(event: dict[str, Any], who: Principal = WORKER, delivery_id: str = "d1") -> commands.WorkerEvent:
    return GATE.worker_event(who, validated(models.WorkerDeliveryIn, {"delivery_id": delivery_id, "event": event}))


def test_a_refused_worker_event_is_data_and_a_malformed_delivery_raises() -> None:
    refused = deliver({**EVENT, "kind": "nope"})
    assert refused.command is None and refused.refusal is not None and refused.refusal.code == "invalid_argument"
    admin = deliver(EVENT, who=Principal("acme", "admin", "w1"))
    assert admin.refusal is not None and admin.refusal.code == "forbidden"
    with pytest.raises(InvalidArgument):
        deliver(EVENT, delivery_id="bad id")
    with pytest.raises(InvalidArgument):
        GATE.worker_event(WORKER, validated(models.WorkerDeliveryIn, {"delivery_id": "d1", "event": []}))
    # The digest is the event's as delivered: the same event is the same delivery, 2.0 being 2.
    one = deliver({**EVENT, "kind": "accept_task"})
    two = deliver({**EVENT, "kind": "accept_task", "fence": 1.0}, delivery_id="d2")
    assert one.digest == two.digest and isinstance(one.command, commands.Accept)


@pytest.mark.parametrize(
    ("event", "field"),
    [
        # the kind, then what the kind must not carry, then what it must, then the task...
        ({"kind": "nope", "task": "bad id"}, "event.kind"),
        ({"kind": "accept_task", "message": MESSAGE, "task": "bad id"}, "event.message"),
        ({"kind": "accept_task", "artifact": "bad id", "task": "bad id"}, "event.artifact"),
        ({"kind": "complete_task", "task": "bad id"}, "event.message"),
        ({"kind": "complete_task", "message": MESSAGE, "submission": "", "task": "bad id"}, "event.submission"),
        ({"kind": "request_input", "message": {"id": "bad id", "parts": []}, "task": "bad id"}, "event.task"),
        # ...then, for complete, the artifact, the message, the submission, and the command's fields
        (
            {"kind": "complete_task", "message": {"id": "bad id", "parts": []}, "submission": "s", "artifact": "x y"},
            "event.artifact",
        ),
        ({"kind": "complete_task", "message": {"id": "bad id", "parts": []}, "submission": "s y"}, "message.id"),
        ({"kind": "complete_task", "message": MESSAGE, "submission": "s y", "event_id": "e y"}, "submission"),
        (
            {"kind": "complete_task", "message": MESSAGE, "submission": "s", "artifact": "", "event_id": "e y"},
            "command_id",
        ),
        ({"kind": "accept_task", "expected_revision": 0, "fence": 0}, "expected_revision"),
        ({"kind": "fail_task", "fence": 0}, "fence"),
    ],
)
def test_a_worker_event_is_checked_in_its_order_and_refused_as_data(event: dict[str, Any], field: str) -> None:
    base = {"event_id": "e1", "task": "t1", "fence": 1, "expected_revision": 2}
    found = deliver({**base, **event})
    assert found.refusal is not None and found.command is None
    assert (found.refusal.code, found.refusal.details.get("field")) == ("invalid_argument", field)


# ---- messages ---------------------------------------------------------------------------------------------


def message_of(raw: Any) -> Any:
    """A message as the edge reads one: MessageIn's types, then the message's rule (its refusal raised)."""
    held = validated(models.ReplyIn, {"command_id": "c1", "expected_revision": 1, "message": raw})
    return held.message


def test_message_metadata_is_an_optional_bounded_object() -> None:
    # A message may carry metadata (a JSON object, kept as given); the model accepts what the rule does
    body = {**MESSAGE, "metadata": {"a2a": {"messageId": "tck-complete-task-1", "parts": [{"kind": "text"}]}}}
    assert message_of(body).metadata == body["metadata"]
    assert message_of(MESSAGE).metadata == {}
    # Its intent (what the command digest covers) carries it, and leaves it out when empty
    assert message_of(body).to_json()["metadata"] == body["metadata"]
    assert "metadata" not in message_of(MESSAGE).to_json()
    # Not an object: a type error; longer than the limit as JSON: the rule's refusal naming the field
    for bad in ([1], "x", 3):
        with pytest.raises(InvalidArgument) as info:
            message_of({**MESSAGE, "metadata": bad})
        assert info.value.details["problems"][0]["field"] == "message.metadata"
    big = {"k": "x" * task_model.MAX_METADATA_BYTES}
    with pytest.raises(InvalidArgument) as info:
        message_of({**MESSAGE, "metadata": big})
    assert info.value.details["limit"] == task_model.MAX_METADATA_BYTES
    assert info.value.details["field"] == "message.metadata"


# ---- message parts: filename, url, data ---------------------------------------------------------------


def test_the_part_patterns_are_the_gates_patterns() -> None:
    filename = field(models.PartIn, "filename")
    assert filename["pattern"] == anchored(task_model.FILENAME_CHARS)
    assert filename["not"] == {"enum": list(task_model.NOT_FILENAMES)}
    assert (filename["minLength"], filename["maxLength"]) == (1, task_model.MAX_FILENAME_CHARS)
    url = field(models.PartIn, "url")
    assert url["pattern"] == anchored(task_model.URL_CHARS)
    assert url["not"] == {"pattern": f"^{task_model.HOST_MISSING}"}
    assert url["maxLength"] == task_model.MAX_URL_CHARS


def _filename_declared(value: str) -> bool:
    schema = field(models.PartIn, "filename")
    return (
        schema_match(schema["pattern"], value)
        and value not in schema["not"]["enum"]
        and schema["minLength"] <= len(value) <= schema["maxLength"]
    )


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=20), st.from_regex(task_model.FILENAME_CHARS, fullmatch=True), st.just("x" * 256)))
@example("a.txt\n")
@example("..")
def test_the_filename_schema_accepts_what_the_gate_accepts(value: str) -> None:
    assert _filename_declared(value) == _gate_accepts(lambda v: inputs.filename(v, "f"), value)


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
        st.from_regex(task_model.URL_CHARS, fullmatch=True),
        st.builds(lambda s, rest: s + rest, st.sampled_from(["http:", "HTTPS:", "https://", "mailto:"]), st.text()),
    )
)
@example("https://x.y/\n")
@example("http://")
@example("https:///x")
@example("https://[::1]:8080/x")
def test_the_url_schema_accepts_what_the_gate_accepts(value: str) -> None:
    # Beyond the schema, the rule refuses what urllib.parse cannot split (an unclosed IPv6 host, a
    # host that NFKC-normalizes into a delimiter): the document says so in words.
    accepted = _gate_accepts(lambda v: inputs.url(v, "u"), value)
    assert accepted == (_url_declared(value) and not _urllib_refuses(value))


def test_an_old_shaped_message_keeps_its_intent_digest() -> None:
    # Pinned before parts had filenames and URLs: a retry of a command sent then still replays
    message = message_of(
        {
            "id": "m-1",
            "parts": [
                {"media_type": "text/plain", "text": "hello"},
                {"media_type": "application/octet-stream", "data_b64": "AAEC"},
            ],
            "metadata": {"a2a": {"messageId": "x"}},
        }
    )
    digest = task_model_digest("reply_task", {"message": message.to_json()})
    assert digest == "sha256:a97e42b024ae7c36c9719898c84939e06d901a139a840134153fb07865f49a0b"
    json_part = message_of({"id": "m-2", "parts": [{"media_type": "application/json", "text": '{"a":1}'}]})
    create = {
        "id": "t-1",
        "workspace": "ws",
        "context": "c",
        "message": json_part.to_json(),
        "lease_timeout_seconds": 0,
    }
    digest = task_model_digest("create_task", create)
    assert digest == "sha256:0e8976ba07e4a43daab7cde3f241106e87a14035d43d3b069b3522e93f4f4a75"
    # The `data` form is the same bytes as its compact JSON text: the same intent
    as_data = message_of({"id": "m-2", "parts": [{"data": {"a": 1}}]})
    assert as_data.to_json() == json_part.to_json()


def task_model_digest(kind: str, command: dict[str, Any]) -> str:
    from dovecote.tasks.model import intent_digest

    return intent_digest(kind, command)


def test_the_new_part_keys_enter_the_intent_only_when_set() -> None:
    plain = message_of({"id": "m", "parts": [{"media_type": "text/plain", "text": "x"}]})
    named = message_of({"id": "m", "parts": [{"media_type": "text/plain", "text": "x", "filename": "x"}]})
    ref = message_of({"id": "m", "parts": [{"media_type": "text/plain", "url": "https://x.y"}]})
    assert plain.to_json()["parts"] == [{"media_type": "text/plain", "data_b64": "eA=="}]
    assert named.to_json()["parts"] == [{"media_type": "text/plain", "data_b64": "eA==", "filename": "x"}]
    assert ref.to_json()["parts"] == [{"media_type": "text/plain", "url": "https://x.y"}]
    assert ref.parts[0].data == b""


def test_a_part_model_accepts_what_its_rule_accepts() -> None:
    for part in (
        {"data": {"a": 1}},
        {"data": [1], "media_type": "text/csv", "filename": "a.csv"},
        {"data": False},
        {"url": "HTTPS://example.com/isbn/0451450523", "media_type": "text/plain"},
    ):
        body = {"id": "m", "parts": [part]}
        models.MessageIn.model_validate(body)
        message_of(body)
        inputs.message(MessageBody("m", (PartBody(**part),)))
    # null is no JSON value here: the edge cannot tell it from a form left out, so it is a type error
    with pytest.raises(ValidationError):
        models.MessageIn.model_validate({"id": "m", "parts": [{"data": None}]})
    # and a binding that builds a part without any form is refused by the rule
    with pytest.raises(InvalidArgument):
        inputs.message(MessageBody("m", (PartBody(media_type="text/plain"),)))


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
    # one rule every binding's message goes through, and the edge's schema says the same.
    with pytest.raises(InvalidArgument) as info:
        message_of({"id": "m", "parts": [{"url": url, "media_type": "text/plain"}]})
    assert info.value.details["field"] == "message.parts[0].url"
    with pytest.raises(InvalidArgument):
        inputs.message(MessageBody("m", (PartBody("text/plain", url=url),)))
    assert not _url_declared(url)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 10**400, [1, {"k": 10**309}]])
def test_message_values_every_binding_can_carry(value: Any) -> None:
    # A2A serves messages as protobuf JSON (numbers are doubles): what it cannot hold is refused at
    # the write, in metadata and in a data part alike, so no read meets it afterwards.
    with pytest.raises(InvalidArgument) as info:
        message_of({**MESSAGE, "metadata": {"k": value}})
    assert info.value.details["field"] == "message.metadata"
    with pytest.raises(InvalidArgument) as info:
        message_of({"id": "m", "parts": [{"data": {"k": value}}]})
    assert info.value.details["field"] == "message.parts[0].data"
    # The largest doubles are fine
    message_of({"id": "m", "parts": [{"data": [10**308, 1.5e308, -(2**1023)]}], "metadata": {"k": 10**300}})
