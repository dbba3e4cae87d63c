"""docs/design/tasks.md#artifacts-and-apply-receipts and #worker-events: every scenario once per
TaskStore (the fake, then DynamoDB on moto sealing with KMS data keys). What only DynamoDB has
(protection at rest, faults at botocore level, round trips) is in test_task_artifacts_dynamo.py."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest

from dovecote.platform import aws
from dovecote.platform.cursors import CursorSigner
from dovecote.platform.errors import DomainError
from dovecote.platform.principal import Principal
from dovecote.platform.protection import Protector
from dovecote.tasks.model import canonical_digest
from tests.support.tasks import (
    CALLER,
    OTHER_WORKER,
    WORKER,
    Edge,
    Flow,
    code_of,
    dynamo_store,
    edge,
    force_task,
    freeze,
    freeze_body,
    message,
    put_upload,
    receipt_body,
    store_of,
    uid,
)

KEY = b"task-artifacts-key-0123456789abcd"


def sealed_store(env: dict[str, Any], *, plaintext: bool = False, allow_plaintext_reads: bool = False) -> Any:
    """The DynamoDB store, sealing with KMS data keys on moto (`plaintext`: no protector at all)."""
    if plaintext:
        return dynamo_store(env)
    kms = Protector(aws.client("kms"), env["settings"].data_key_id, allow_plaintext_reads=allow_plaintext_reads)
    return dynamo_store(env, protector=kms)


@pytest.fixture(params=["memory", "dynamo"])
def service(request: pytest.FixtureRequest) -> Edge:
    return edge(store_of(request, sealed_store), CursorSigner(KEY))


def working(service: Edge, workspace: str = "ws") -> Flow:
    flow = Flow(service, workspace=workspace)
    return flow.to_state("working")


def published(service: Edge, workspace: str = "ws", base: str = "rev-0", text: str = "patch") -> dict[str, Any]:
    flow = working(service, workspace)
    art = freeze(flow, base=base, text=text).body["artifact"]
    flow.worker_cmd("complete", artifact_id=art["id"])
    return service.get_artifact(CALLER, workspace, art["id"])["artifact"]


# ---- freeze -----------------------------------------------------------------------------------------


def test_freeze_records_digests_result_revision_and_an_event(service: Edge) -> None:
    flow = working(service)
    before = flow.revision
    out = freeze(flow, artifact_id="a1", base="rev-0", text="diff --git")
    task, art = out.body["task"], out.body["artifact"]
    assert task["revision"] == before + 1 and task["event_count"] == before + 1
    assert task["artifact"] == "a1" and task["state"] == "working"
    payload_digest = "sha256:" + hashlib.sha256(b"diff --git").hexdigest()
    assert art["payload_digest"] == payload_digest and art["payload_size"] == len(b"diff --git")
    assert art["state"] == "frozen" and art["media_type"] == "text/x-diff"
    # docs/design/tasks.md#artifacts-and-apply-receipts: sha256 of the canonical
    # {base, surface "agent", artifact, payload}.
    expected = canonical_digest({"base": "rev-0", "surface": "agent", "artifact": "a1", "payload": payload_digest})
    assert art["result_revision"] == expected
    assert art["digest"].startswith("sha256:") and len(art["digest"]) == 71
    last = service.events(CALLER, flow.task_id, None, None)["items"][-1]
    assert (last["type"], last["artifact"], last["revision"]) == ("artifact_frozen", "a1", before + 1)
    # The first freeze in a workspace creates its head at the expected base.
    assert service.get_head(CALLER, "ws")["confirmed_revision"] == "rev-0"


def test_freeze_replays_and_its_command_id_is_bound_to_the_payload(service: Edge) -> None:
    flow = working(service)
    body = freeze_body(flow, artifact_id="a1")
    first = service.freeze(WORKER, flow.task_id, body)
    again = service.freeze(WORKER, flow.task_id, body)
    assert again.body == first.body and again.replayed
    other = {**body, "payload": {"media_type": "text/x-diff", "text": "something else"}}
    assert code_of(lambda: service.freeze(WORKER, flow.task_id, other)) == "idempotency_conflict"


def test_freeze_twice_is_artifact_conflict(service: Edge) -> None:
    flow = working(service)
    freeze(flow)
    assert code_of(lambda: freeze(flow)) == "artifact_conflict"


def test_an_artifact_id_is_unique_in_its_workspace(service: Edge) -> None:
    freeze(working(service), artifact_id="same")
    assert code_of(lambda: freeze(working(service), artifact_id="same")) == "artifact_conflict"
    # Another workspace has its own ids.
    assert freeze(working(service, "ws2"), artifact_id="same").body["artifact"]["id"] == "same"


def test_freeze_only_while_working(service: Edge) -> None:
    flow = Flow(service).to_state("input_required")
    assert code_of(lambda: freeze(flow)) == "invalid_transition"
    done = Flow(service).to_state("completed")
    assert code_of(lambda: freeze(done)) == "stale_lease"  # a terminal task holds no lease
    submitted = Flow(service)
    submitted.create()
    submitted.acquire()
    assert code_of(lambda: freeze(submitted)) == "invalid_transition"
    assert code_of(lambda: service.get_head(CALLER, "ws")) == "not_found"  # nothing froze


def test_a_rejected_freeze_writes_no_artifact_and_no_head(service: Edge) -> None:
    flow = working(service)
    body = freeze_body(flow, artifact_id="a1")
    body["expected_revision"] = flow.revision + 5
    assert code_of(lambda: service.freeze(WORKER, flow.task_id, body)) == "revision_conflict"
    assert code_of(lambda: service.get_artifact(CALLER, "ws", "a1")) == "not_found"
    assert code_of(lambda: service.get_head(CALLER, "ws")) == "not_found"


def test_freeze_payload_forms_and_limits(service: Edge) -> None:
    flow = working(service)
    data = bytes(range(256))
    body = freeze_body(flow)
    body["payload"] = {"media_type": "application/octet-stream", "data_b64": base64.b64encode(data).decode()}
    art = service.freeze(WORKER, flow.task_id, body).body["artifact"]
    got = service.get_artifact(CALLER, "ws", art["id"])["payload"]
    assert base64.b64decode(got["data_b64"]) == data
    for bad in (
        {"media_type": "text/plain"},
        {"media_type": "text/plain", "text": "a", "data_b64": "YQ=="},
        {"media_type": "not a type", "text": "a"},
        {"media_type": "text/plain", "data_b64": "!!"},
        {"media_type": "text/plain", "upload_sha256": "ABC"},
        {"media_type": "text/plain", "text": "a", "extra": 1},
    ):
        other = working(service)
        body = freeze_body(other) | {"payload": bad}
        assert code_of(lambda o=other, b=body: service.freeze(WORKER, o.task_id, b)) == "invalid_argument", bad
    small = edge(service.store, CursorSigner(KEY), artifact_max_bytes=8)
    tiny = working(small)
    assert code_of(lambda: freeze(tiny, text="123456789")) == "payload_too_large"


def test_freeze_by_upload(service: Edge) -> None:
    flow = working(service)
    data = b"x" * 100_000
    sha = put_upload(service, data)
    up = service.create_artifact_upload(WORKER, flow.task_id, {"size": len(data), "sha256": sha, "fence": flow.fence})
    assert up["upload_url"] and up["expires_at"]
    body = freeze_body(flow)
    body["payload"] = {"media_type": "application/octet-stream", "upload_sha256": sha}
    art = service.freeze(WORKER, flow.task_id, body).body["artifact"]
    assert art["payload_size"] == len(data) and art["payload_digest"] == "sha256:" + sha
    missing = working(service)
    body = freeze_body(missing)
    body["payload"] = {"media_type": "text/plain", "upload_sha256": "0" * 64}
    assert code_of(lambda: service.freeze(WORKER, missing.task_id, body)) == "not_found"
    declared = {"size": 1, "sha256": sha, "fence": flow.fence}
    assert code_of(lambda: service.create_artifact_upload(WORKER, flow.task_id, {**declared, "size": 0})) == (
        "invalid_argument"
    )
    assert code_of(lambda: service.create_artifact_upload(CALLER, flow.task_id, declared)) == "forbidden"


def test_an_upload_url_goes_only_to_the_holder_of_the_current_lease(service: Edge) -> None:
    """Issue 15 item 6: the task must exist in the caller's authority (404) and the caller must hold
    its current lease (409 stale_lease) before a URL is presigned; the fence is in the body."""
    flow = working(service)
    sha = hashlib.sha256(b"payload").hexdigest()

    def upload(who: Principal, task_id: str, **changes: Any) -> Any:
        return service.create_artifact_upload(who, task_id, {"size": 7, "sha256": sha, "fence": flow.fence, **changes})

    assert code_of(lambda: upload(WORKER, "no-such-task")) == "not_found"
    assert code_of(lambda: upload(Principal("globex", "worker", "w1"), flow.task_id)) == "not_found"
    assert code_of(lambda: upload(WORKER, flow.task_id, fence=flow.fence + 1)) == "stale_lease"
    assert code_of(lambda: upload(OTHER_WORKER, flow.task_id)) == "stale_lease"
    without = {"size": 7, "sha256": sha}
    assert code_of(lambda: service.create_artifact_upload(WORKER, flow.task_id, without)) == "invalid_argument"
    unleased = Flow(service)
    unleased.create()
    assert code_of(lambda: upload(WORKER, unleased.task_id, fence=1)) == "stale_lease"
    assert upload(WORKER, flow.task_id)["upload_url"]
    # A fenced lease is no longer current: its holder gets no URL either.
    service.fence(WORKER, flow.task_id, {"command_id": uid("c"), "fence": flow.fence})
    with pytest.raises(DomainError) as caught:
        upload(WORKER, flow.task_id)
    assert caught.value.code == "stale_lease" and caught.value.details == {"fence": flow.fence, "current_fence": None}


# ---- complete, cancel, fail -------------------------------------------------------------------------


def test_complete_publishes_the_frozen_artifact_in_the_same_commit(service: Edge) -> None:
    flow = working(service)
    art = freeze(flow, artifact_id="a1").body["artifact"]
    out = flow.worker_cmd("complete", artifact_id="a1", submission_id="sub-1")
    assert out.body["state"] == "completed" and out.body["submission"]["id"] == "sub-1"
    got = service.get_artifact(CALLER, "ws", "a1")
    assert got["artifact"]["state"] == "published" and got["artifact"]["published_at"]
    assert got["artifact"]["digest"] == art["digest"]
    assert got["payload"] == {"media_type": "text/x-diff", "text": "the patch"}
    last = service.events(CALLER, flow.task_id, None, None)["items"][-1]
    assert (last["type"], last["artifact"], last["submission"]) == ("task_completed", "a1", "sub-1")


def test_complete_must_name_exactly_the_frozen_artifact(service: Edge) -> None:
    flow = working(service)
    freeze(flow, artifact_id="a1")
    assert code_of(lambda: flow.worker_cmd("complete", artifact_id="a2")) == "artifact_state"
    assert code_of(lambda: flow.worker_cmd("complete")) == "artifact_state"  # none named, one frozen
    bare = working(service)
    assert code_of(lambda: bare.worker_cmd("complete", artifact_id="a1")) == "artifact_state"
    assert bare.worker_cmd("complete").body["state"] == "completed"  # none frozen, none named
    assert service.get_artifact(CALLER, "ws", "a1")["artifact"]["state"] == "frozen"


@pytest.mark.parametrize("how", ["cancel", "fail"])
def test_cancel_and_fail_discard_the_frozen_artifact(service: Edge, how: str) -> None:
    flow = working(service)
    freeze(flow, artifact_id="a1")
    if how == "cancel":
        flow.caller_cmd("cancel")
    else:
        flow.worker_cmd("fail")
    art = service.get_artifact(CALLER, "ws", "a1")["artifact"]
    assert art["state"] == "discarded" and art["discarded_at"]
    assert code_of(lambda: service.record_apply_receipt(CALLER, "ws", "a1", receipt_body(art))) == "artifact_state"


def test_a_submission_id_is_unique_in_the_authority(service: Edge) -> None:
    Flow(service).to_state("working").worker_cmd("complete", submission_id="s-same")
    flow = working(service)
    freeze(flow, artifact_id="a1")
    assert code_of(lambda: flow.worker_cmd("complete", submission_id="s-same", artifact_id="a1")) == (
        "submission_conflict"
    )
    # Rolled back whole: the artifact is still frozen, the task still working.
    assert service.get_artifact(CALLER, "ws", "a1")["artifact"]["state"] == "frozen"
    assert service.get(CALLER, flow.task_id)["task"]["state"] == "working"


# ---- workspace head ---------------------------------------------------------------------------------


def test_the_workspace_head_across_two_tasks(service: Edge) -> None:
    first, second = working(service), working(service)
    freeze(first, base="rev-0")
    assert code_of(lambda: freeze(second, base="rev-stale")) == "workspace_conflict"
    assert "artifact" not in service.get(CALLER, second.task_id)["task"]  # nothing committed
    assert freeze(second, base="rev-0").body["artifact"]["base_revision"] == "rev-0"


def test_a_success_receipt_advances_the_head_and_a_stale_freeze_then_conflicts(service: Edge) -> None:
    art = published(service)
    receipt = service.record_apply_receipt(CALLER, "ws", art["id"], receipt_body(art)).body["receipt"]
    assert receipt["decision"] == "success" and receipt["observed_revision"] == art["result_revision"]
    head = service.get_head(CALLER, "ws")
    assert head["confirmed_revision"] == art["result_revision"]
    late = working(service)
    assert code_of(lambda: freeze(late, base="rev-0")) == "workspace_conflict"
    assert freeze(late, base=art["result_revision"]).body["artifact"]["base_revision"] == art["result_revision"]


# ---- apply receipts ---------------------------------------------------------------------------------


def test_receipt_repeats_and_conflicts(service: Edge) -> None:
    art = published(service)
    body = receipt_body(art, "rejected", code="tests_failed", message="3 tests failed")
    first = service.record_apply_receipt(CALLER, "ws", art["id"], body)
    # The same command again replays; the same receipt under a new command id returns the stored one.
    assert service.record_apply_receipt(CALLER, "ws", art["id"], body).body == first.body
    again = service.record_apply_receipt(CALLER, "ws", art["id"], {**body, "command_id": uid("c")})
    assert again.body == first.body
    different = {**body, "command_id": uid("c"), "message": "4 tests failed"}
    assert code_of(lambda: service.record_apply_receipt(CALLER, "ws", art["id"], different)) == "receipt_conflict"
    assert service.get_apply_receipt(CALLER, "ws", art["id"]) == first.body
    # A rejected receipt leaves the head where it was.
    assert service.get_head(CALLER, "ws")["confirmed_revision"] == "rev-0"


def test_receipt_checks(service: Edge) -> None:
    flow = working(service)
    frozen = freeze(flow).body["artifact"]
    assert code_of(lambda: service.record_apply_receipt(CALLER, "ws", frozen["id"], receipt_body(frozen))) == (
        "artifact_state"
    )
    assert code_of(lambda: service.record_apply_receipt(CALLER, "ws", "nope", receipt_body(frozen))) == "not_found"
    art = published(service)
    record = lambda body: service.record_apply_receipt(CALLER, "ws", art["id"], body)  # noqa: E731
    assert code_of(lambda: record(receipt_body(art, artifact_digest="sha256:" + "0" * 64))) == "receipt_conflict"
    assert code_of(lambda: record(receipt_body(art, base_revision="rev-9"))) == "receipt_conflict"
    assert code_of(lambda: record(receipt_body(art, "rejected", result_revision="rev-9"))) == "receipt_conflict"
    assert code_of(lambda: record(receipt_body(art, observed_revision="rev-9"))) == "invalid_argument"
    assert code_of(lambda: record(receipt_body(art, "conflict"))) == "invalid_argument"
    assert code_of(lambda: record(receipt_body(art, "maybe"))) == "invalid_argument"
    assert code_of(lambda: record(receipt_body(art, "rejected", code="x" * 129))) == "invalid_argument"
    assert code_of(lambda: record(receipt_body(art, "rejected", message="é" * 2049))) == "invalid_argument"
    assert code_of(lambda: record(receipt_body(art, artifact_digest="sha256:ABC"))) == "invalid_argument"
    assert code_of(lambda: service.record_apply_receipt(WORKER, "ws", art["id"], receipt_body(art))) == "forbidden"
    # None of those stored anything.
    assert code_of(lambda: service.get_apply_receipt(CALLER, "ws", art["id"])) == "not_found"
    for decision, extra in (("conflict", {"observed_revision": "rev-x"}), ("indeterminate", {})):
        other = published(service)
        out = service.record_apply_receipt(CALLER, "ws", other["id"], receipt_body(other, decision, **extra))
        assert out.body["receipt"]["decision"] == decision


def test_a_success_that_misses_the_head_is_workspace_conflict(service: Edge) -> None:
    # Two artifacts on the same base: the first success moves the head, the second cannot.
    one, two = published(service, text="one"), published(service, text="two")
    service.record_apply_receipt(CALLER, "ws", one["id"], receipt_body(one))
    assert code_of(lambda: service.record_apply_receipt(CALLER, "ws", two["id"], receipt_body(two))) == (
        "workspace_conflict"
    )
    assert code_of(lambda: service.get_apply_receipt(CALLER, "ws", two["id"])) == "not_found"
    # The caller records what really happened instead.
    out = service.record_apply_receipt(
        CALLER, "ws", two["id"], receipt_body(two, "conflict", observed_revision=one["result_revision"])
    )
    assert out.body["receipt"]["decision"] == "conflict"


# ---- worker events ----------------------------------------------------------------------------------


def event(flow: Flow, kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "event_id": uid("e"),
        "kind": kind,
        "task": flow.task_id,
        "fence": flow.fence,
        "expected_revision": flow.revision,
        **fields,
    }


def deliver(service: Edge, ev: dict[str, Any], delivery_id: str | None = None, who: Principal = WORKER) -> Any:
    return service.worker_event(who, {"delivery_id": delivery_id or uid("d"), "event": ev})


def test_every_worker_event_kind_acks(service: Edge) -> None:
    flow = Flow(service)
    flow.create()
    flow.acquire()
    for kind, fields, state in (
        ("accept_task", {}, "working"),
        ("request_input", {"message": message("which branch?")}, "input_required"),
    ):
        out = deliver(service, event(flow, kind, **fields))
        assert out["decision"] == "ack", out
        task = service.get(CALLER, flow.task_id)["task"]
        assert task["state"] == state
        flow.revision = task["revision"]
    flow.caller_cmd("reply")
    freeze_fields = {
        "freeze": {
            "artifact": "a-ev",
            "expected_base_revision": "rev-0",
            "payload": {"media_type": "text/plain", "text": "p"},
        }
    }
    assert deliver(service, event(flow, "freeze_artifact", **freeze_fields))["decision"] == "ack"
    flow.revision = service.get(CALLER, flow.task_id)["task"]["revision"]
    done = event(flow, "complete_task", message=message("done"), submission="sub-ev", artifact="a-ev")
    assert deliver(service, done)["decision"] == "ack"
    assert service.get(CALLER, flow.task_id)["task"]["state"] == "completed"
    assert service.get_artifact(CALLER, "ws", "a-ev")["artifact"]["state"] == "published"
    for kind, state in (("reject_task", "rejected"), ("fail_task", "failed")):
        other = Flow(service)
        other.create()
        other.acquire()
        if kind == "fail_task":
            other.worker_cmd("accept")
        assert deliver(service, event(other, kind))["decision"] == "ack"
        assert service.get(CALLER, other.task_id)["task"]["state"] == state


def test_a_fail_event_carries_its_reason_and_only_a_fail_may(service: Edge) -> None:
    flow = Flow(service).to_state("working")
    # A reason on another kind is a field that kind does not use: a NACK, nothing stored.
    refused = deliver(service, event(flow, "request_input", message=message("?"), reason="why"))
    assert (refused["decision"], refused["code"]) == ("nack", "invalid")
    too_long = deliver(service, event(flow, "fail_task", reason="x" * 2049))
    assert (too_long["decision"], too_long["code"]) == ("nack", "invalid")
    assert service.get(CALLER, flow.task_id)["task"]["state"] == "working"
    assert deliver(service, event(flow, "fail_task", reason="disk full"))["decision"] == "ack"
    last = service.events(CALLER, flow.task_id, 0, None)["items"][-1]
    assert (last["type"], last["reason"]) == ("task_failed", "disk full")


def test_each_nack_code(service: Edge) -> None:
    flow = Flow(service)
    flow.create()
    flow.acquire()
    admin_worker = Principal("acme", "admin", "w1")
    cases = {
        "invalid": event(flow, "accept_task", message=message("not for accept")),
        "forbidden": (event(flow, "accept_task"), admin_worker),
        "not_found": event(flow, "accept_task", task="no-such-task"),
        "stale_lease": event(flow, "accept_task", fence=flow.fence + 1),
        "revision_conflict": event(flow, "accept_task", expected_revision=flow.revision + 3),
        "state_conflict": event(flow, "fail_task"),  # submitted → failed is not a transition
    }
    for code, case in cases.items():
        ev, who = case if isinstance(case, tuple) else (case, WORKER)
        out = deliver(service, ev, who=who)
        assert (out["decision"], out["code"]) == ("nack", code), (code, out)
        assert out["message"]
    # command_conflict: an event id (the command id) already used for a different command.
    accepted = event(flow, "accept_task")
    assert deliver(service, accepted)["decision"] == "ack"
    flow.revision += 1
    reused = {**event(flow, "fail_task"), "event_id": accepted["event_id"]}
    assert deliver(service, reused)["code"] == "command_conflict"
    # Nothing NACKed changed the task: only the accept moved it.
    task = service.get(CALLER, flow.task_id)["task"]
    assert (task["state"], task["revision"]) == ("working", 2)


def test_fence_exhausted_is_state_conflict(service: Edge) -> None:
    from dovecote.tasks.limits import MAX_FENCE

    flow = Flow(service)
    flow.create()
    flow.acquire()
    force_task(service, flow.task_id, fence=MAX_FENCE)
    flow.fence = MAX_FENCE
    flow.service.fence(WORKER, flow.task_id, {"command_id": uid("c"), "fence": MAX_FENCE})
    # The lease is gone and cannot be granted again: the event's fence is stale first.
    out = deliver(service, event(flow, "accept_task"))
    assert out["decision"] == "nack" and out["code"] in ("stale_lease", "state_conflict")
    assert code_of(lambda: flow.acquire()) == "lease_fence_exhausted"


def test_exact_retry_returns_the_same_receipt_and_a_reused_delivery_id_is_refused(service: Edge) -> None:
    flow = Flow(service)
    flow.create()
    flow.acquire()
    ev = event(flow, "accept_task")
    first = deliver(service, ev, "d-1")
    assert deliver(service, ev, "d-1") == first
    flow.revision += 1
    other = event(flow, "fail_task")
    out = deliver(service, other, "d-1")
    assert (out["decision"], out["code"]) == ("nack", "command_conflict")
    assert service.get(CALLER, flow.task_id)["task"]["state"] == "working"  # the fail never ran
    # A NACK is settled too: its exact retry answers the same NACK, even once the cause is gone.
    bad = event(flow, "accept_task", expected_revision=99)
    nack = deliver(service, bad, "d-2")
    assert nack["code"] == "revision_conflict"
    assert deliver(service, bad, "d-2") == nack
    # The same event under a new delivery id after it committed is an exact replay: ACK.
    assert deliver(service, ev, "d-3")["decision"] == "ack"


def test_worker_event_identity_comes_from_the_token(service: Edge) -> None:
    flow = Flow(service)
    flow.create()
    flow.acquire()
    assert code_of(lambda: deliver(service, event(flow, "accept_task"), who=CALLER)) == "forbidden"
    ev = event(flow, "accept_task", worker="w1")
    # No worker field to trust: an unknown field refuses the delivery, as the edge refuses it.
    assert code_of(lambda: deliver(service, ev)) == "invalid_argument"
    stranger = Principal("acme", "worker", "w2")
    assert deliver(service, event(flow, "accept_task"), who=stranger)["code"] == "stale_lease"
