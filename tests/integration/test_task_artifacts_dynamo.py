"""Artifacts, workspace heads, apply receipts and worker events where only DynamoDB on moto has
something to show: protection at rest (KMS data keys on moto), races with real threads, faults at
botocore level, and round trips. The scenarios every store runs are in test_task_artifacts.py."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError

from dovecote.platform import aws
from dovecote.platform.cursors import CursorSigner
from dovecote.platform.errors import CommitUnknown, CorruptStore, DomainError
from dovecote.platform.protection import MAGIC
from dovecote.tasks.dynamo import artifact_pk
from dovecote.tasks.dynamo_items import message_id_pk
from infra.local.metering import count_round_trips
from tests.integration.test_task_artifacts import KEY, deliver, event, published, sealed_store, working
from tests.integration.test_task_store import _error, _state, commits_nothing, failing, race
from tests.support.tasks import (
    CALLER,
    WORKER,
    Edge,
    Flow,
    code_of,
    edge,
    freeze,
    freeze_body,
    message,
    put_upload,
    receipt_body,
    uid,
)


@pytest.fixture
def dynamo(moto_env: dict[str, Any]) -> tuple[Edge, dict[str, Any]]:
    return edge(sealed_store(moto_env), CursorSigner(KEY)), moto_env


def raw_item(env: dict[str, Any], pk: str, sk: str) -> dict[str, Any]:
    return env["dynamodb"].get_item(TableName=env["settings"].tasks_table, Key={"pk": {"S": pk}, "sk": {"S": sk}})[
        "Item"
    ]


def stored_message(env: dict[str, Any], service: Edge, task_id: str, sequence: int = 1) -> dict[str, Any]:
    """The item holding a message: its id's guard (the tasks table's layout v2)."""
    message_id = service.messages(CALLER, task_id, sequence - 1, 1)["items"][0]["id"]
    return raw_item(env, message_id_pk("acme", message_id), "-")


def put_raw(env: dict[str, Any], item: dict[str, Any]) -> None:
    env["dynamodb"].put_item(TableName=env["settings"].tasks_table, Item=item)


# ---- protection at rest -------------------------------------------------------------------------------


def test_the_stored_ciphertext_differs_from_the_plaintext(dynamo: tuple[Edge, dict[str, Any]]) -> None:
    service, env = dynamo
    secret = "the launch code is 0000"
    flow = Flow(service)
    flow.create()
    flow.acquire()
    flow.worker_cmd("accept")
    freeze(flow, artifact_id="a1", text=secret)
    flow.worker_cmd("request_input", message=message(secret))
    table = env["dynamodb"].scan(TableName=env["settings"].tasks_table)["Items"]
    dumped = repr(table)
    assert secret not in dumped and base64.b64encode(secret.encode()).decode() not in dumped
    art = raw_item(env, artifact_pk("acme", "ws", "a1"), "-")
    stored = art["payload"]["B"]
    assert stored.startswith(MAGIC) and secret.encode() not in stored
    # Digests and sizes describe the plaintext.
    assert art["payload_digest"]["S"] == "sha256:" + hashlib.sha256(secret.encode()).hexdigest()
    assert int(art["payload_size"]["N"]) == len(secret.encode())
    # And it reads back.
    assert service.get_artifact(CALLER, "ws", "a1")["payload"]["text"] == secret
    texts = [p["text"] for m in service.messages(CALLER, flow.task_id, None, None)["items"] for p in m["parts"]]
    assert secret in texts


def test_a_url_part_is_sealed_and_bound_to_its_place(dynamo: tuple[Edge, dict[str, Any]]) -> None:
    # A URL may carry a token (a presigned URL): it is sealed as inline bytes are; its filename is not
    service, env = dynamo
    url = "https://files.example.com/x.pdf?X-Amz-Signature=secret0000"
    part = {"media_type": "application/pdf", "url": url, "filename": "x.pdf"}
    flow = Flow(service)
    flow.create(message={"id": "m-url", "parts": [part, {**part, "url": url + "1"}]})
    item = stored_message(env, service, flow.task_id)
    stored = [p["M"] for p in item["parts"]["L"]]
    assert all(p["url"]["B"].startswith(MAGIC) and b"secret0000" not in p["url"]["B"] for p in stored)
    assert "secret0000" not in repr(env["dynamodb"].scan(TableName=env["settings"].tasks_table)["Items"])
    assert [p["filename"]["S"] for p in stored] == ["x.pdf", "x.pdf"] and "data" not in stored[0]
    read = service.messages(CALLER, flow.task_id, None, None)["items"][0]["parts"]
    assert read == [part, {**part, "url": url + "1"}]
    # Swapped between the two parts of the message, a sealed URL no longer opens
    item["parts"]["L"][0]["M"]["url"], item["parts"]["L"][1]["M"]["url"] = stored[1]["url"], stored[0]["url"]
    env["dynamodb"].put_item(TableName=env["settings"].tasks_table, Item=item)
    with pytest.raises(CorruptStore):
        service.messages(CALLER, flow.task_id, None, None)


def test_a_ciphertext_moved_to_another_record_does_not_open(dynamo: tuple[Edge, dict[str, Any]]) -> None:
    service, env = dynamo
    reports: list[tuple[str, dict[str, Any]]] = []
    service.work.on_corrupt = lambda kind, facts: reports.append((kind, facts))
    one, two = working(service), working(service)
    freeze(one, artifact_id="a1", text="same text")
    freeze(two, artifact_id="a2", text="same text")  # same digest, same size: only the identity differs
    moved = raw_item(env, artifact_pk("acme", "ws", "a1"), "-")["payload"]
    target = raw_item(env, artifact_pk("acme", "ws", "a2"), "-")
    put_raw(env, {**target, "payload": moved})
    assert code_of(lambda: service.get_artifact(CALLER, "ws", "a2")) == "corrupt_store"
    assert service.get_artifact(CALLER, "ws", "a1")["payload"]["text"] == "same text"
    # A message part moved from one message to another fails the same way.
    first = stored_message(env, service, one.task_id)
    second = stored_message(env, service, two.task_id)
    put_raw(env, {**second, "parts": first["parts"]})
    assert code_of(lambda: service.messages(CALLER, two.task_id, None, None)) == "corrupt_store"
    assert [kind for kind, _ in reports] == ["artifact", "message"]
    assert all("same text" not in repr(facts) for _, facts in reports)  # the alarm holds no payload


def test_a_plaintext_replacement_is_refused(dynamo: tuple[Edge, dict[str, Any]]) -> None:
    """Downgrade protection: a protected record replaced by plaintext is never served."""
    service, env = dynamo
    flow = working(service)
    freeze(flow, artifact_id="a1", text="sealed")
    key = artifact_pk("acme", "ws", "a1")
    put_raw(env, {**raw_item(env, key, "-"), "payload": {"B": b"sealed"}})
    assert code_of(lambda: service.get_artifact(CALLER, "ws", "a1")) == "corrupt_store"
    # A message part, the same.
    message_id = service.messages(CALLER, flow.task_id, 0, 1)["items"][0]["id"]
    msg = raw_item(env, message_id_pk("acme", message_id), "-")
    parts = msg["parts"]["L"]
    parts[0]["M"]["data"] = {"B": b"do it"}
    put_raw(env, {**msg, "parts": {"L": parts}})
    assert code_of(lambda: service.messages(CALLER, flow.task_id, None, None)) == "corrupt_store"
    assert code_of(lambda: service.message(CALLER, flow.task_id, message_id)) == "corrupt_store"
    # A payload in S3 replaced by an object without KMS encryption.
    big = working(service)
    data = b"b" * 20_000  # over the inline size: stored in S3
    freeze(big, artifact_id="a-big", text=data.decode())
    s3_key = f"artifacts/acme/{hashlib.sha256(data).hexdigest()}"
    assert env["s3"].head_object(Bucket=env["settings"].bucket, Key=s3_key)["ServerSideEncryption"] == "aws:kms"
    assert service.get_artifact(CALLER, "ws", "a-big")["payload"]["text"] == data.decode()
    env["s3"].put_object(Bucket=env["settings"].bucket, Key=s3_key, Body=data)
    assert code_of(lambda: service.get_artifact(CALLER, "ws", "a-big")) == "corrupt_store"


def test_plaintext_reads_work_only_with_the_flag(moto_env: dict[str, Any]) -> None:
    old = edge(sealed_store(moto_env, plaintext=True), CursorSigner(KEY))
    flow = working(old)
    freeze(flow, artifact_id="a-old", text="written before protection")
    strict = edge(sealed_store(moto_env), CursorSigner(KEY))
    strict.work.on_corrupt = lambda kind, facts: None
    assert code_of(lambda: strict.get_artifact(CALLER, "ws", "a-old")) == "corrupt_store"
    assert code_of(lambda: strict.messages(CALLER, flow.task_id, None, None)) == "corrupt_store"
    migrating = edge(sealed_store(moto_env, allow_plaintext_reads=True), CursorSigner(KEY))
    assert migrating.get_artifact(CALLER, "ws", "a-old")["payload"]["text"] == "written before protection"
    assert migrating.messages(CALLER, flow.task_id, None, None)["items"][0]["parts"][0]["text"] == "do it"


def test_data_keys_are_cached_per_container(dynamo: tuple[Edge, dict[str, Any]]) -> None:
    service, env = dynamo
    kms = aws.client("kms")
    flow = working(service)
    with count_round_trips(kms) as meter:
        freeze(flow, artifact_id="k1")
        service.get_artifact(CALLER, "ws", "k1")
        freeze(working(service), artifact_id="k2")
    # working() and freeze() above seal messages too: one GenerateDataKey served them all.
    assert meter.calls.get("kms.GenerateDataKey", 0) <= 1 and "kms.Decrypt" not in meter.calls, meter.calls


# ---- races --------------------------------------------------------------------------------------------


def test_two_success_receipts_on_sibling_artifacts_exactly_one_moves_the_head(
    dynamo: tuple[Edge, dict[str, Any]],
) -> None:
    service, _ = dynamo
    arts = [published(service, text=f"sibling {i}") for i in range(4)]
    outcomes = race(4, lambda i: service.record_apply_receipt(CALLER, "ws", arts[i]["id"], receipt_body(arts[i])))
    assert outcomes.count("ok") == 1 and outcomes.count("workspace_conflict") == 3, outcomes
    head = service.get_head(CALLER, "ws")["confirmed_revision"]
    assert head in {a["result_revision"] for a in arts}


def test_a_receipt_racing_a_freeze_exactly_one_wins(dynamo: tuple[Edge, dict[str, Any]]) -> None:
    """The receipt moves the head off rev-0; the freeze claims rev-0 as its base. Serializable:
    either the freeze came first (both commit, and the frozen artifact's own success later
    conflicts) or the receipt came first (the freeze is a workspace conflict)."""
    service, _ = dynamo
    for _ in range(3):
        _receipt_races_freeze(service, uid("ws"))


def _receipt_races_freeze(service: Edge, ws: str) -> None:
    art = published(service, workspace=ws)
    flow = working(service, ws)
    calls = [
        lambda: service.record_apply_receipt(CALLER, ws, art["id"], receipt_body(art)),
        lambda: freeze(flow, artifact_id="late", base="rev-0"),
    ]
    outcomes = race(2, lambda i: calls[i]())
    head = service.get_head(CALLER, ws)["confirmed_revision"]
    assert head == art["result_revision"]  # the receipt always lands: a freeze never moves the head
    if "workspace_conflict" in outcomes:
        assert code_of(lambda: service.get_artifact(CALLER, ws, "late")) == "not_found"
        return
    assert outcomes == ["ok", "ok"]
    flow.worker_cmd("complete", artifact_id="late")
    late = service.get_artifact(CALLER, ws, "late")["artifact"]
    assert code_of(lambda: service.record_apply_receipt(CALLER, ws, "late", receipt_body(late))) == (
        "workspace_conflict"
    )


def test_identical_receipts_racing_store_one(dynamo: tuple[Edge, dict[str, Any]]) -> None:
    service, _ = dynamo
    art = published(service)
    body = receipt_body(art, "indeterminate")
    answers: list[Any] = []

    def record(i: int) -> None:
        answers.append(service.record_apply_receipt(CALLER, "ws", art["id"], {**body, "command_id": uid("c")}).body)

    assert race(4, record) == ["ok"] * 4
    assert all(a == answers[0] for a in answers)


def test_deliveries_of_one_event_racing_settle_once(dynamo: tuple[Edge, dict[str, Any]]) -> None:
    service, _ = dynamo
    flow = Flow(service)
    flow.create()
    flow.acquire()
    ev = event(flow, "accept_task")
    answers: list[Any] = []
    race(4, lambda i: answers.append(deliver(service, ev, "d-race")))
    assert len(answers) == 4 and all(a == answers[0] for a in answers) and answers[0]["decision"] == "ack"
    assert service.get(CALLER, flow.task_id)["task"]["revision"] == 2


# ---- faults -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("after_commit", [False, True])
def test_an_infrastructure_error_settles_nothing_and_the_retry_settles_once(
    dynamo: tuple[Edge, dict[str, Any]], after_commit: bool
) -> None:
    service, env = dynamo
    flow = Flow(service)
    flow.create()
    flow.acquire()
    ev = event(flow, "accept_task")
    before = _state(env)
    name = ("after-call" if after_commit else "before-call") + ".dynamodb.TransactWriteItems"
    error = (
        ReadTimeoutError(endpoint_url="https://dynamodb")
        if after_commit
        else _error("InternalServerError", "TransactWriteItems")
    )
    with failing(env["dynamodb"], name, error), pytest.raises(CommitUnknown) as raised:
        deliver(service, ev, "d-fault")
    assert raised.value.status == 503
    if not after_commit:
        assert _state(env) == before  # nothing partial, nothing settled
    first = deliver(service, ev, "d-fault")
    assert first["decision"] == "ack"
    assert deliver(service, ev, "d-fault") == first
    task = service.get(CALLER, flow.task_id)["task"]
    assert (task["state"], task["revision"], task["event_count"]) == ("working", 2, 2)


def test_a_failed_freeze_upload_copy_commits_nothing(dynamo: tuple[Edge, dict[str, Any]]) -> None:
    service, env = dynamo
    flow = working(service)
    data = b"u" * 50_000
    sha = put_upload(service, data)
    body = freeze_body(flow, artifact_id="a-up")
    body["payload"] = {"media_type": "application/octet-stream", "upload_sha256": sha}
    copy_fails = _error("InternalError", "CopyObject")
    commits_nothing(
        env, "before-call.s3.CopyObject", copy_fails, DomainError, lambda: service.freeze(WORKER, flow.task_id, body)
    )
    assert service.freeze(WORKER, flow.task_id, body).body["artifact"]["payload_size"] == len(data)
    assert service.freeze(WORKER, flow.task_id, body).replayed


# ---- round trips --------------------------------------------------------------------------------------


def test_round_trips(dynamo: tuple[Edge, dict[str, Any]]) -> None:
    """Each command is one read and one TransactWriteItems, plus the S3 and KMS calls its payload
    needs (docs/benchmarks/notes.md)."""
    service, env = dynamo
    clients = (env["dynamodb"], env["s3"], aws.client("kms"))
    flow = working(service)
    with count_round_trips(*clients) as meter:
        freeze(flow, artifact_id="rt-1")
    assert meter.total == 2, meter.calls  # the data key is cached: no KMS call
    with count_round_trips(*clients) as meter:
        flow.worker_cmd("complete", artifact_id="rt-1")
    assert meter.total == 2, meter.calls
    art = service.get_artifact(CALLER, "ws", "rt-1")["artifact"]
    with count_round_trips(*clients) as meter:
        service.record_apply_receipt(CALLER, "ws", "rt-1", receipt_body(art))
    assert meter.total == 2, meter.calls
    other = Flow(service)
    other.create()
    other.acquire()
    with count_round_trips(*clients) as meter:
        deliver(service, event(other, "accept_task"))
    assert meter.total == 2, meter.calls
    with count_round_trips(*clients) as meter:
        deliver(service, event(other, "accept_task", expected_revision=9))  # a NACK: read, settle
    assert meter.total == 2, meter.calls
    big = working(service, "ws-big")
    with count_round_trips(*clients) as meter:
        freeze(big, artifact_id="rt-big", text="z" * 20_000)
    assert dict(meter.calls) == {
        "dynamodb.TransactGetItems": 1,
        "s3.PutObject": 1,
        "dynamodb.TransactWriteItems": 1,
    }, meter.calls
    up = working(service, "ws-up")
    with count_round_trips(*clients) as meter:
        declared = {"size": 30_000, "sha256": hashlib.sha256(b"q" * 30_000).hexdigest(), "fence": up.fence}
        service.create_artifact_upload(WORKER, up.task_id, declared)
    assert dict(meter.calls) == {"dynamodb.GetItem": 1}, meter.calls  # the lease check; signing is local
    sha = put_upload(service, b"q" * 30_000)
    body = freeze_body(up, artifact_id="rt-up")
    body["payload"] = {"media_type": "text/plain", "upload_sha256": sha}
    with count_round_trips(*clients) as meter:
        service.freeze(WORKER, up.task_id, body)
    assert dict(meter.calls) == {
        "s3.GetObject": 1,
        "s3.CopyObject": 1,
        "dynamodb.TransactGetItems": 1,
        "dynamodb.TransactWriteItems": 1,
    }, meter.calls


def test_corrupt_reads_raise_the_alarm(dynamo: tuple[Edge, dict[str, Any]]) -> None:
    service, env = dynamo
    seen: list[str] = []
    service.work.on_corrupt = lambda kind, facts: seen.append(kind)
    freeze(working(service), artifact_id="a1", text="x")
    key = artifact_pk("acme", "ws", "a1")
    item = raw_item(env, key, "-")
    payload = item["payload"]["B"]
    # Flip a bit of the last byte: replacing it with a fixed byte left it unchanged 1 time in 256.
    put_raw(env, {**item, "payload": {"B": payload[:-1] + bytes([payload[-1] ^ 1])}})
    with pytest.raises(CorruptStore):
        service.get_artifact(CALLER, "ws", "a1")
    assert seen == ["artifact"]
