"""The task machine's conformance suite: every scenario runs once per TaskStore (the fake, then
DynamoDB on moto; the `service` fixture is parametrised over both, so a new scenario runs on the
real adapter without being listed anywhere). Every (command × state) pair, the check order, the
two-round conversation, replay and idempotency, leases, claims, paging
(docs/design/tasks.md#the-state-machine).
tests/unit/test_conformance_suites.py holds every test here to taking that fixture."""

from __future__ import annotations

from datetime import UTC
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dovecote.platform.errors import DomainError
from dovecote.tasks import machine
from dovecote.tasks.limits import MAX_FENCE
from dovecote.tasks.storage import CLAIM_SHARDS, FLEET_CLAIM_SHARDS, claim_shard
from tests.conftest import examples
from tests.support.tasks import (
    CALLER,
    OTHER_WORKER,
    WORKER,
    Edge,
    Flow,
    ShardOrder,
    code_of,
    create_body,
    field_of,
    force_task,
    ids_in_distinct_shards,
    message,
    service_fixture,
    uid,
)

KEY = b"task-conformance-key-0123456789ab"
service = service_fixture(KEY)


COMMANDS = {
    "accept_task": ("worker", "accept"),
    "reject_task": ("worker", "reject"),
    "request_input": ("worker", "request_input"),
    "reply_task": ("caller", "reply"),
    "cancel_task": ("caller", "cancel"),
    "fail_task": ("worker", "fail"),
    "complete_task": ("worker", "complete"),
}
NON_CREATE_STATES = [s for s in machine.STATES]


def expected_for(kind: str, state: str) -> str:
    by = machine.TRANSITIONS[kind].by
    if machine.is_terminal(state):
        # Terminal states clear the lease, so a worker command is stale before its state is looked at.
        return "stale_lease" if by == "worker" else "terminal_task"
    return "ok" if state in machine.TRANSITIONS[kind].allowed_from else "invalid_transition"


@pytest.mark.parametrize("state", NON_CREATE_STATES)
@pytest.mark.parametrize("kind", list(COMMANDS))
def test_every_command_in_every_state(service: Edge, kind: str, state: str) -> None:
    flow = Flow(service).to_state(state)
    if state == "submitted" and COMMANDS[kind][0] == "worker":
        flow.acquire()
    before = service.get(CALLER, flow.task_id)["task"]
    by, method = COMMANDS[kind]
    call = (lambda: flow.worker_cmd(method)) if by == "worker" else (lambda: flow.caller_cmd(method))
    assert code_of(call) == expected_for(kind, state)
    after = service.get(CALLER, flow.task_id)["task"]
    if expected_for(kind, state) == "ok":
        assert after["state"] == machine.TRANSITIONS[kind].to
        assert after["revision"] == before["revision"] + 1 == after["event_count"]
    else:
        assert after == before  # a refused command changes nothing


def test_create_gives_revision_1_with_one_message_and_event(service: Edge) -> None:
    out = Flow(service).create()
    assert out.status == 201
    task = out.body
    assert (task["state"], task["revision"], task["message_count"], task["event_count"]) == ("submitted", 1, 1, 1)


def test_two_round_conversation(service: Edge) -> None:
    flow = Flow(service)
    flow.create()
    flow.acquire()
    flow.worker_cmd("accept")
    for _ in range(2):
        flow.worker_cmd("request_input")
        flow.caller_cmd("reply")
    done = flow.worker_cmd("complete").body
    assert (done["state"], done["revision"], done["message_count"], done["event_count"]) == ("completed", 7, 6, 7)
    messages = service.messages(CALLER, flow.task_id, None, None)
    assert [m["author"] for m in messages["items"]] == ["caller", "agent"] * 3
    assert [m["sequence"] for m in messages["items"]] == [1, 2, 3, 4, 5, 6]
    events = service.events(CALLER, flow.task_id, None, None)["items"]
    assert [e["type"] for e in events] == [
        "task_submitted",
        "task_accepted",
        "input_required",
        "caller_replied",
        "input_required",
        "caller_replied",
        "task_completed",
    ]
    assert [e["revision"] for e in events] == list(range(1, 8))
    assert done["submission"]["final_message"] == messages["items"][-1]["id"]
    # Terminal: the lease is gone, the fence kept.
    assert code_of(lambda: service.get_lease(WORKER, flow.task_id)) == "not_found"


def test_late_worker_command_after_completion_is_stale_lease(service: Edge) -> None:
    flow = Flow(service).to_state("working")
    flow.worker_cmd("complete")
    flow.revision = 3
    assert code_of(lambda: flow.worker_cmd("fail")) == "stale_lease"


def test_wrong_revision_is_reported_before_a_bad_state(service: Edge) -> None:
    flow = Flow(service).to_state("submitted")
    flow.acquire()
    flow.revision = 5  # wrong, and request_input is also not allowed from submitted
    with pytest.raises(DomainError) as caught:
        flow.worker_cmd("request_input")
    assert caught.value.code == "revision_conflict"
    assert caught.value.details == {"expected": 5, "actual": 1}


def test_request_input_from_submitted_is_invalid_and_changes_nothing(service: Edge) -> None:
    flow = Flow(service).to_state("submitted")
    flow.acquire()
    assert code_of(lambda: flow.worker_cmd("request_input")) == "invalid_transition"
    assert service.get(CALLER, flow.task_id)["task"]["revision"] == 1


def test_exact_replay_returns_the_original_result_after_the_task_moved_on(service: Edge) -> None:
    flow = Flow(service).to_state("submitted")
    flow.acquire()
    body = {"command_id": "accept-1", "expected_revision": 1, "fence": flow.fence}
    first = service.accept(WORKER, flow.task_id, body)
    flow.revision = first.body["revision"]
    flow.worker_cmd("complete")
    replay = service.accept(WORKER, flow.task_id, body)
    assert replay.body == first.body and replay.body["state"] == "working"


def test_replay_after_a_fence(service: Edge) -> None:
    flow = Flow(service).to_state("submitted")
    flow.acquire()
    body = {"command_id": "accept-2", "expected_revision": 1, "fence": flow.fence}
    first = service.accept(WORKER, flow.task_id, body)
    service.fence(WORKER, flow.task_id, {"command_id": uid("c"), "fence": flow.fence})
    assert service.accept(WORKER, flow.task_id, body).body == first.body


def test_same_id_different_intent_is_an_idempotency_conflict(service: Edge) -> None:
    flow = Flow(service).to_state("submitted")
    flow.caller_cmd("cancel", command_id="shared-id")
    other = Flow(service).to_state("submitted")
    assert code_of(lambda: other.caller_cmd("cancel", command_id="shared-id")) == "idempotency_conflict"


def test_a_fail_keeps_its_reason_on_its_event_and_a_changed_reason_is_another_intent(service: Edge) -> None:
    # Given a working task
    flow = Flow(service).to_state("working")
    reason = "the build server is down \u2014 try again tomorrow"
    body = {"command_id": uid("c"), "expected_revision": flow.revision, "fence": flow.fence, "reason": reason}
    # When its worker fails it, saying why
    failed = service.fail(WORKER, flow.task_id, body)
    # Then the task_failed event carries the reason (read back from the store), and only it does
    events = service.events(CALLER, flow.task_id, 0, None)["items"]
    assert [e.get("reason") for e in events] == [None] * (len(events) - 1) + [reason]
    assert events[-1]["type"] == "task_failed" and failed.body["state"] == "failed"
    # An exact retry replays; the same command id with another reason is another intent
    assert service.fail(WORKER, flow.task_id, body).body == failed.body
    changed = {**body, "reason": "another reason"}
    assert code_of(lambda: service.fail(WORKER, flow.task_id, changed)) == "idempotency_conflict"


def test_a_fail_without_a_reason_keeps_the_event_it_always_had(service: Edge) -> None:
    flow = Flow(service).to_state("working")
    flow.worker_cmd("fail")
    last = service.events(CALLER, flow.task_id, 0, None)["items"][-1]
    assert last["type"] == "task_failed" and "reason" not in last


@pytest.mark.parametrize(
    ("reason", "why"),
    [
        ("x" * 2049, "longer than 2048 bytes"),
        ("\u00e9" * 1025, "longer than 2048 bytes"),  # 1,025 characters, 2,050 bytes
        (12, "should be a valid string"),  # a type error, in pydantic's words like every other
        ("\ud800", "valid Unicode"),
    ],
)
def test_a_bad_fail_reason_is_refused_and_stores_nothing(service: Edge, reason: Any, why: str) -> None:
    flow = Flow(service).to_state("working")
    body = {"command_id": uid("c"), "expected_revision": flow.revision, "fence": flow.fence, "reason": reason}
    with pytest.raises(DomainError) as refused:
        service.fail(WORKER, flow.task_id, body)
    assert refused.value.code == "invalid_argument" and why in str(refused.value)
    assert service.get(CALLER, flow.task_id)["task"]["state"] == "working"


def test_create_replay_is_200_with_the_same_task(service: Edge) -> None:
    body = {
        "command_id": "create-1",
        "workspace": "ws",
        "id": "t-replay",
        "context": "c",
        "message": message(message_id="m-r"),
    }
    first = service.create(CALLER, body)
    again = service.create(CALLER, body)
    assert (first.status, again.status) == (201, 200) and first.body == again.body
    assert code_of(lambda: service.create(CALLER, {**body, "command_id": "create-2"})) == "task_conflict"


def test_a_rejected_command_reserves_nothing(service: Edge) -> None:
    flow = Flow(service).to_state("submitted")
    with pytest.raises(DomainError):
        flow.caller_cmd("reply", command_id="retry-me")  # invalid from submitted
    flow.acquire()
    flow.worker_cmd("accept")
    flow.worker_cmd("request_input")
    assert flow.caller_cmd("reply", command_id="retry-me").body["state"] == "working"


def test_duplicate_message_id_rolls_back_the_whole_transition(service: Edge) -> None:
    flow = Flow(service).to_state("working")
    used = service.messages(CALLER, flow.task_id, None, None)["items"][0]["id"]
    assert code_of(lambda: flow.worker_cmd("request_input", message=message(message_id=used))) == "message_conflict"
    task = service.get(CALLER, flow.task_id)["task"]
    assert (task["state"], task["revision"], task["message_count"]) == ("working", 2, 1)


def test_duplicate_submission_id_rolls_back(service: Edge) -> None:
    first = Flow(service).to_state("working")
    first.worker_cmd("complete", submission_id="sub-1")
    second = Flow(service).to_state("working")
    assert code_of(lambda: second.worker_cmd("complete", submission_id="sub-1")) == "submission_conflict"
    assert service.get(CALLER, second.task_id)["task"]["state"] == "working"


def test_complete_naming_an_unfrozen_artifact_is_an_artifact_state_error(service: Edge) -> None:
    flow = Flow(service).to_state("working")
    assert code_of(lambda: flow.worker_cmd("complete", artifact_id="art-1")) == "artifact_state"


# ---- leases ----------------------------------------------------------------------------------


def test_acquire_fence_reacquire(service: Edge) -> None:
    flow = Flow(service).to_state("submitted")
    assert flow.acquire().body["assignment"]["fence"] == 1
    assert code_of(lambda: service.acquire(OTHER_WORKER, flow.task_id, {"command_id": uid("c")})) == "lease_unavailable"
    assert service.get_lease(WORKER, flow.task_id)["assignment"]["worker"] == "w1"
    service.fence(WORKER, flow.task_id, {"command_id": uid("c"), "fence": 1})
    assert code_of(lambda: service.get_lease(WORKER, flow.task_id)) == "not_found"
    assert flow.acquire().body["assignment"]["fence"] == 2
    flow.fence = 1
    assert code_of(lambda: flow.worker_cmd("accept")) == "stale_lease"  # the old generation is fenced
    assert service.get(CALLER, flow.task_id)["task"]["revision"] == 1  # leases never change the revision


def test_stale_lease_details_carry_the_current_fence(service: Edge) -> None:
    flow = Flow(service).to_state("submitted")
    flow.acquire()
    flow.fence = 7
    with pytest.raises(DomainError) as caught:
        flow.worker_cmd("accept")
    assert caught.value.details["current_fence"] == 1
    assert caught.value.message == "the lease this command carries is not current"  # someone holds it


def test_another_worker_cannot_drive_or_fence_the_lease(service: Edge) -> None:
    flow = Flow(service).to_state("submitted")
    flow.acquire()
    flow.worker = OTHER_WORKER
    assert code_of(lambda: flow.worker_cmd("accept")) == "stale_lease"
    assert (
        code_of(lambda: service.fence(OTHER_WORKER, flow.task_id, {"command_id": uid("c"), "fence": 1})) == "forbidden"
    )


def test_acquire_of_a_terminal_task_is_terminal_task(service: Edge) -> None:
    """Reference parity: create; cancel; acquire answers terminal_task (it answered
    invalid_transition before)."""
    flow = Flow(service).to_state("canceled")
    assert code_of(flow.acquire) == "terminal_task"


def test_a_fence_command_id_reused_by_another_worker_is_an_idempotency_conflict(service: Edge) -> None:
    """Reference parity: create; acquire (w1); fence c3 (w1); the same id from w2 is no replay."""
    flow = Flow(service).to_state("submitted")
    flow.acquire()
    service.fence(WORKER, flow.task_id, {"command_id": "fence-c3", "fence": flow.fence})
    replay = service.fence(WORKER, flow.task_id, {"command_id": "fence-c3", "fence": flow.fence})
    assert replay.replayed
    other = lambda: service.fence(OTHER_WORKER, flow.task_id, {"command_id": "fence-c3", "fence": flow.fence})  # noqa: E731
    assert code_of(other) == "idempotency_conflict"


def test_a_command_on_a_task_at_the_last_revision_is_a_revision_conflict(service: Edge) -> None:
    """Reference parity: the counters come before any write, and speak of the revision."""
    flow = Flow(service).to_state("submitted")
    top = 2**63 - 1
    force_task(service, flow.task_id, revision=top, event_count=top)
    flow.revision = top
    assert code_of(lambda: flow.caller_cmd("cancel")) == "revision_conflict"


def test_a_claim_whose_oldest_candidate_has_an_exhausted_fence_answers_it(service: Edge) -> None:
    """Reference parity (the reference rule: one claimable shard): the candidate is not skipped for the
    next one."""
    assert service.store.claim_shards == 1
    oldest = Flow(service).to_state("submitted")
    Flow(service).to_state("submitted")
    force_task(service, oldest.task_id, fence=MAX_FENCE)
    assert code_of(lambda: service.claim(WORKER, {"command_id": uid("c")})) == "lease_fence_exhausted"


def test_fence_exhausted(service: Edge) -> None:
    flow = Flow(service).to_state("submitted")
    force_task(service, flow.task_id, fence=MAX_FENCE)
    assert code_of(flow.acquire) == "lease_fence_exhausted"


def test_claim_takes_the_oldest_claimable(service: Edge) -> None:
    """The reference rule, and the default layout (one claimable shard): a claim takes strictly the
    oldest claimable task."""
    assert service.store.claim_shards == CLAIM_SHARDS == 1
    flows = [Flow(service).to_state("submitted") for _ in range(3)]
    Flow(service).to_state("canceled")
    claimed = [service.claim(WORKER, {"command_id": uid("c")}).body["assignment"]["task"]["id"] for _ in range(3)]
    assert claimed == [f.task_id for f in flows]
    assert code_of(lambda: service.claim(WORKER, {"command_id": uid("c")})) == "not_found"
    leases = service.list_leases(WORKER, None, None)
    assert [a["task"]["id"] for a in leases["items"]] == claimed and "cursor" not in leases or not leases["cursor"]


def test_a_sharded_claim_takes_every_claimable_task_exactly_once(service: Edge) -> None:
    """A fleet's layout (FLEET_CLAIM_SHARDS shards): tasks spread over the shards, and claims until
    "nothing claimable" take each claimable task once, from every shard, and nothing else."""
    service.store.claim_shards = FLEET_CLAIM_SHARDS  # before any task is written: the count is the layout
    created = [Flow(service, task_id=f"spread-{i:02d}").to_state("submitted").task_id for i in range(24)]
    Flow(service).to_state("canceled")
    assert len({claim_shard("acme", t, FLEET_CLAIM_SHARDS) for t in created}) >= 8
    claimed = []
    while (outcome := code_of(lambda: claimed.append(service.claim(WORKER, {"command_id": uid("c")})))) == "ok":
        pass
    assert outcome == "not_found"
    ids = [c.body["assignment"]["task"]["id"] for c in claimed]
    assert sorted(ids) == sorted(created) and len(set(ids)) == len(ids)
    assert {c.body["assignment"]["fence"] for c in claimed} == {1}


def test_a_claim_reads_every_shard_before_it_finds_nothing(service: Edge) -> None:
    """The one claimable task is in the shard a claim reads last: the claim still finds it."""
    service.store.claim_shards = FLEET_CLAIM_SHARDS
    (task_id,) = ids_in_distinct_shards(1)
    shard = claim_shard("acme", task_id, FLEET_CLAIM_SHARDS)
    Flow(service, task_id=task_id).to_state("submitted")
    others = [s for s in range(FLEET_CLAIM_SHARDS) if s != shard]
    service.leases.rng = ShardOrder(*others)
    assert service.claim(WORKER, {"command_id": uid("c")}).body["assignment"]["task"]["id"] == task_id
    assert code_of(lambda: service.claim(WORKER, {"command_id": uid("c")})) == "not_found"


def test_a_claim_takes_from_the_older_head_of_its_two_shards(service: Edge) -> None:
    """Two choices: of the two shards a claim reads, the one whose oldest task is older goes first,
    whichever was read first; the other follows once that page is used up."""
    service.store.claim_shards = FLEET_CLAIM_SHARDS
    older, newer = ids_in_distinct_shards(2)
    for task_id in (older, newer):
        Flow(service, task_id=task_id).to_state("submitted")
    shards = [claim_shard("acme", t, FLEET_CLAIM_SHARDS) for t in (newer, older)]
    service.leases.rng = ShardOrder(*shards)  # the newer task's shard is read first
    first = service.claim(WORKER, {"command_id": uid("c")}).body["assignment"]["task"]["id"]
    second = service.claim(WORKER, {"command_id": uid("c")}).body["assignment"]["task"]["id"]
    assert (first, second) == (older, newer)


def test_a_sharded_claim_answers_an_exhausted_fence_it_picks(service: Edge) -> None:
    """An exhausted fence is never skipped, in any shard: the candidate answers it."""
    service.store.claim_shards = FLEET_CLAIM_SHARDS  # before any task is written: the count is the layout
    flow = Flow(service).to_state("submitted")
    force_task(service, flow.task_id, fence=MAX_FENCE)
    assert code_of(lambda: service.claim(WORKER, {"command_id": uid("c")})) == "lease_fence_exhausted"


def test_claim_replay_returns_the_same_assignment(service: Edge) -> None:
    Flow(service).to_state("submitted")
    Flow(service).to_state("submitted")
    first = service.claim(WORKER, {"command_id": "claim-1"})
    again = service.claim(WORKER, {"command_id": "claim-1"})
    assert first.body == again.body


def test_caller_cannot_run_worker_commands(service: Edge) -> None:
    flow = Flow(service).to_state("submitted")
    assert (
        code_of(lambda: service.accept(CALLER, flow.task_id, {"command_id": "x", "expected_revision": 1, "fence": 1}))
        == "forbidden"
    )
    assert code_of(lambda: service.claim(CALLER, {"command_id": "x"})) == "forbidden"
    # The role is checked first: before a body that also breaks a rule (a type error is answered
    # before anything, as the edge words it).
    assert code_of(lambda: service.create(WORKER, {**create_body("t-x"), "id": "bad id"})) == "forbidden"


# ---- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"id": "bad id"}, "id"),
        ({"id": "-leading"}, "id"),
        ({"workspace": "x" * 129}, "workspace"),
        ({"command_id": ""}, "command_id"),
        ({"expected_revision": 1}, "expected_revision"),
        ({"message": {"id": "m", "parts": []}}, "message.parts"),
        ({"message": {"id": "m", "parts": [{"media_type": "text/plain", "text": "x"}] * 33}}, "message.parts"),
        ({"message": {"id": "m", "parts": [{"media_type": "text/plain", "text": ""}]}}, "message.parts[0]"),
        ({"message": {"id": "m", "parts": [{"media_type": "bogus", "text": "x"}]}}, "message.parts[0].media_type"),
        (
            {"message": {"id": "m", "parts": [{"media_type": "text/plain", "text": "x", "data_b64": "eA=="}]}},
            "message.parts[0]",
        ),
        (
            {"message": {"id": "m", "parts": [{"media_type": "text/plain", "data_b64": "%%%"}]}},
            "message.parts[0].data_b64",
        ),
        (
            {"message": {"id": "m", "parts": [{"media_type": "a/b", "data_b64": "A" * (3 * 1024 * 1024)}]}},
            "message.parts",
        ),
    ],
)
def test_create_validation(service: Edge, patch: dict[str, Any], field: str) -> None:
    body = {"command_id": uid("c"), "workspace": "ws", "id": uid("t"), "context": "c", "message": message(), **patch}
    with pytest.raises(DomainError) as caught:
        service.create(CALLER, body)
    assert caught.value.code == "invalid_argument" and field_of(caught.value) == field
    assert (
        service.list_tasks(
            CALLER, __import__("dovecote.tasks.ports", fromlist=["TaskFilter"]).TaskFilter(), None, None
        )["total_size"]
        == 0
    )


def test_expected_revision_must_be_positive_for_other_commands(service: Edge) -> None:
    flow = Flow(service).to_state("submitted")
    flow.revision = 0
    assert code_of(lambda: flow.caller_cmd("cancel")) == "invalid_argument"


# ---- streams and lists -------------------------------------------------------------------------


def test_stream_paging_next_and_has_more(service: Edge) -> None:
    flow = Flow(service).to_state("working")
    flow.worker_cmd("request_input")
    flow.caller_cmd("reply")  # 3 messages
    page = service.messages(CALLER, flow.task_id, None, 1)
    assert (page["next"], page["has_more"], len(page["items"])) == (1, True, 1)
    page = service.messages(CALLER, flow.task_id, 3, 1)
    assert (page["next"], page["has_more"], page["items"]) == (3, False, [])
    assert code_of(lambda: service.messages(CALLER, flow.task_id, 4, 1)) == "invalid_argument"
    assert service.snapshot(CALLER, flow.task_id)["event_cursor"] == 4


def test_total_size_reads_a_bounded_amount_and_says_when_it_is_a_floor(
    service: Edge, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dovecote.tasks import dynamo_queries, memory
    from dovecote.tasks.ports import TaskFilter

    monkeypatch.setattr(memory, "TOTAL_SIZE_CAP", 3)
    monkeypatch.setattr(dynamo_queries, "TOTAL_SIZE_CAP", 3)
    for _ in range(5):
        Flow(service, context="cap").to_state("submitted")
    page = service.list_tasks(CALLER, TaskFilter(), 2, None)
    assert (page["total_size"], page["total_is_lower_bound"]) == (3, True)
    assert len(page["items"]) == 2


def test_lists_and_total_size(service: Edge) -> None:
    from dovecote.tasks.ports import TaskFilter

    flows = [Flow(service, context="c1").to_state("submitted") for _ in range(5)]
    Flow(service, context="c2").to_state("canceled")
    page1 = service.list_context(CALLER, "c1", 2, None)
    page2 = service.list_context(CALLER, "c1", 2, page1["cursor"])
    page3 = service.list_context(CALLER, "c1", 2, page2["cursor"])
    ids = [t["id"] for p in (page1, page2, page3) for t in p["items"]]
    assert (
        ids == [f.task_id for f in flows] and "cursor" not in page3
    )  # the last page: no cursor, as the API leaves it out
    everything = service.list_tasks(CALLER, TaskFilter(), 100, None)
    assert everything["total_size"] == 6 and everything["total_is_lower_bound"] is False
    updated = [t["updated_at"] for t in everything["items"]]
    assert updated == sorted(updated, reverse=True)
    assert service.list_tasks(CALLER, TaskFilter(state="canceled"), None, None)["total_size"] == 1
    assert service.list_tasks(CALLER, TaskFilter(context="c1"), None, None)["total_size"] == 5
    with pytest.raises(DomainError):
        service.list_context(CALLER, "c2", 2, page1["cursor"])  # a cursor of another list


# ---- invariants (hypothesis) -------------------------------------------------------------------

ACTIONS = ["acquire", "fence", "accept", "reject", "request_input", "reply", "cancel", "fail", "complete", "stale"]


# The store is the test's (one moto environment for all its examples): each example drives a task
# of its own, so what one example leaves behind is not another's input.
@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(actions=st.lists(st.sampled_from(ACTIONS), max_size=25))
def test_random_command_sequences_keep_the_invariants(service: Edge, actions: list[str]) -> None:
    flow = Flow(service)
    flow.create()
    for action in actions:
        if action == "acquire":
            code_of(flow.acquire)
        elif action == "fence":
            code_of(lambda: service.fence(WORKER, flow.task_id, {"command_id": uid("c"), "fence": max(flow.fence, 1)}))
        elif action == "stale":
            code_of(lambda: flow.worker_cmd("accept", fence=flow.fence + 1))
        elif action in ("reply", "cancel"):
            code_of(lambda action=action: flow.caller_cmd(action))
        else:
            code_of(lambda action=action: flow.worker_cmd(action))
        task = service.get(CALLER, flow.task_id)["task"]
        flow.revision = task["revision"]
        assert task["revision"] == task["event_count"]
        assert task["message_count"] <= task["revision"]
        messages = service.messages(CALLER, flow.task_id, None, None)["items"]
        assert [m["author"] for m in messages] == ["caller" if m["sequence"] % 2 else "agent" for m in messages]
        events = service.events(CALLER, flow.task_id, None, None)["items"]
        assert [e["revision"] for e in events] == list(range(1, task["revision"] + 1))
        assert events[-1]["state"] == task["state"]


def test_updated_since_and_state_filters_with_paging(service: Edge) -> None:
    from datetime import datetime, timedelta

    from dovecote.tasks.ports import TaskFilter

    base = datetime(2026, 1, 1, tzinfo=UTC)
    moments = iter(base + timedelta(minutes=i) for i in range(100))
    service.work.clock = lambda: next(moments)  # a controlled clock: each command one minute later
    ids = [Flow(service, context="since").create().body["id"] for _ in range(5)]
    since = "2026-01-01T00:02:00Z"  # the third task's creation, inclusive
    pages, cursor = [], None
    while True:
        page = service.list_tasks(CALLER, TaskFilter(context="since", updated_since=since), 1, cursor)
        pages.append([t["id"] for t in page["items"]])
        cursor = page.get("cursor")
        if not cursor:
            break
    assert [i for p in pages for i in p] == list(reversed(ids[2:]))  # newest update first
    assert page["total_size"] == 3
    with pytest.raises(DomainError):
        service.list_tasks(CALLER, TaskFilter(updated_since="2026-01-01T00:02:00"), None, None)  # no zone


# ---- parts: bytes, JSON data and URL references, with filenames --------------------------------------

PARTS_OF_EVERY_FORM = [
    {"media_type": "text/plain", "text": "notes", "filename": "notes.txt"},
    {"media_type": "application/pdf", "data_b64": "JVBERi0=", "filename": "report 2026 (final).pdf"},
    {"data": {"key": "välue", "list": [1, None, True]}},
    {"media_type": "text/csv", "data": [1, 2]},
    {"media_type": "image/png", "url": "https://example.com/a%20b.png?x=1#y", "filename": "a b.png"},
    {"media_type": "application/octet-stream", "url": "http://bucket.example:8080/key"},
]
PARTS_READ_BACK = [
    {"media_type": "text/plain", "text": "notes", "filename": "notes.txt"},
    {"media_type": "application/pdf", "data_b64": "JVBERi0=", "filename": "report 2026 (final).pdf"},
    {"media_type": "application/json", "text": '{"key":"välue","list":[1,null,true]}'},
    {"media_type": "text/csv", "text": "[1,2]"},
    {"media_type": "image/png", "url": "https://example.com/a%20b.png?x=1#y", "filename": "a b.png"},
    {"media_type": "application/octet-stream", "url": "http://bucket.example:8080/key"},
]


def test_parts_keep_their_filename_url_and_json_data(service: Edge) -> None:
    # Given a task created, and answered, with parts of every form
    flow = Flow(service)
    flow.create(message={"id": uid("m"), "parts": PARTS_OF_EVERY_FORM})
    flow.acquire()
    flow.worker_cmd("accept")
    flow.worker_cmd("request_input", message={"id": uid("m"), "parts": PARTS_OF_EVERY_FORM[::-1]})
    # When the messages are read back, as a page and one by one
    items = service.messages(CALLER, flow.task_id, None, None)["items"]
    # Then every part is as it was sent: a URL is a reference (no bytes), `data` is its compact JSON
    assert [m["parts"] for m in items] == [PARTS_READ_BACK, PARTS_READ_BACK[::-1]]
    for m in items:
        assert service.message(CALLER, flow.task_id, m["id"])["message"]["parts"] == m["parts"]


def test_a_message_read_by_id_says_which_id_is_unknown(service: Edge) -> None:
    flow = Flow(service)
    flow.create()
    first = service.messages(CALLER, flow.task_id, None, None)["items"][0]["id"]

    def refusal(task_id: str, message_id: str) -> tuple[str, str, dict[str, Any]]:
        try:
            service.message(CALLER, task_id, message_id)
        except DomainError as err:
            return err.code, err.message, dict(err.details)
        raise AssertionError("read")

    assert refusal(flow.task_id, "m-nowhere") == (
        "not_found",
        "message not found",
        {"task": flow.task_id, "message_id": "m-nowhere"},
    )
    # The ids swapped (a message id where the task's goes): the task is what is not there.
    assert refusal(first, flow.task_id)[:2] == ("not_found", "task not found")
    code, _, details = refusal(flow.task_id, "m/../x")
    assert code == "invalid_argument" and details["field"] == "message_id"


def test_an_exact_retry_of_a_message_with_a_filename_replays_and_a_changed_filename_conflicts(service: Edge) -> None:
    body = {
        "command_id": uid("c"),
        "workspace": "ws",
        "id": uid("t"),
        "context": "c",
        "message": {"id": uid("m"), "parts": PARTS_OF_EVERY_FORM},
    }
    assert service.create(CALLER, body).status == 201
    assert service.create(CALLER, body).status == 200
    renamed = [{**PARTS_OF_EVERY_FORM[0], "filename": "other.txt"}, *PARTS_OF_EVERY_FORM[1:]]
    changed = {**body, "message": {**body["message"], "parts": renamed}}
    assert code_of(lambda: service.create(CALLER, changed)) == "idempotency_conflict"


def _part(**fields: Any) -> dict[str, Any]:
    return {"message": {"id": "m", "parts": [fields]}}


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        (_part(media_type="text/plain"), "message.parts[0]"),  # no form at all
        (_part(media_type="text/plain", text="x", url="https://x.y"), "message.parts[0]"),
        (_part(data={"a": 1}, data_b64="eA=="), "message.parts[0]"),
        (_part(text="x"), "message.parts[0].media_type"),  # only `data` has a default type
        (_part(url="https://x.y"), "message.parts[0].media_type"),
        (_part(data=float("inf")), "message.parts[0].data"),  # no JSON for it
        (_part(data="\ud800"), "message.parts[0].data"),
        (_part(media_type="text/plain", text="x", filename=""), "message.parts[0].filename"),
        (_part(media_type="text/plain", text="x", filename="a/b"), "message.parts[0].filename"),
        (_part(media_type="text/plain", text="x", filename="a\\b"), "message.parts[0].filename"),
        (_part(media_type="text/plain", text="x", filename=".."), "message.parts[0].filename"),
        (_part(media_type="text/plain", text="x", filename="."), "message.parts[0].filename"),
        (_part(media_type="text/plain", text="x", filename="a\x00"), "message.parts[0].filename"),
        (_part(media_type="text/plain", text="x", filename="a\x85"), "message.parts[0].filename"),
        (_part(media_type="text/plain", text="x", filename="x" * 256), "message.parts[0].filename"),
        (_part(media_type="text/plain", text="x", filename=7), "message.parts[0].filename"),
        (_part(media_type="text/plain", url="example.com/x"), "message.parts[0].url"),  # relative
        (_part(media_type="text/plain", url="/x"), "message.parts[0].url"),
        (_part(media_type="text/plain", url="https:/x"), "message.parts[0].url"),  # http(s) names a host
        (_part(media_type="text/plain", url="http:///x"), "message.parts[0].url"),
        (_part(media_type="text/plain", url="https://x.y/a b"), "message.parts[0].url"),
        (_part(media_type="text/plain", url="https://x.y/\u3000"), "message.parts[0].url"),
        (_part(media_type="text/plain", url="https://x.y/\x7f"), "message.parts[0].url"),
        (_part(media_type="text/plain", url="https://x.y/\ud800"), "message.parts[0].url"),
        (_part(media_type="text/plain", url="https://[::1/x"), "message.parts[0].url"),  # urllib.parse refuses
        (_part(media_type="text/plain", url="https://x.y/" + "a" * 2048), "message.parts[0].url"),
        (_part(media_type="text/plain", url=["https://x.y"]), "message.parts[0].url"),
    ],
)
def test_part_validation_stores_nothing(service: Edge, patch: dict[str, Any], field: str) -> None:
    test_create_validation(service, patch, field)


def test_a_large_part_keeps_its_filename_when_it_is_read_by_url(service: Edge) -> None:
    big = "y" * 20_000  # past the inline size: read back by digest and download URL
    flow = Flow(service)
    flow.create(message={"id": uid("m"), "parts": [{"media_type": "text/plain", "text": big, "filename": "big.txt"}]})
    part = service.messages(CALLER, flow.task_id, None, None)["items"][0]["parts"][0]
    assert (part["filename"], part["size"], "text" in part) == ("big.txt", len(big), False) and part["download_url"]
