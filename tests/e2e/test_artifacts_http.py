"""Artifacts, workspace heads, apply receipts and worker events through the SDK over real HTTP, against
`dovecote dev --faults` started with a 64 MiB artifact limit: a 40 MiB payload freezes through a
presigned upload (never inline), is published by the complete that names it, downloads verified
against its digest, and its success receipt moves the workspace head; worker events whose answer is
dropped after the commit (X-Dovecote-Fault: drop-response) are retried by the SDK as the same
delivery and answered the same ACK, with the task moved exactly once; the echo worker in --events mode
does a whole task through worker events."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dovecote.client import DovecoteClient, DovecoteError
from tests.conftest import ROOT
from tests.e2e.conftest import start_dev
from tests.support.authorities import fresh_authority

MIB = 1024 * 1024
FAULT = {"X-Dovecote-Fault": "drop-response"}


@pytest.fixture(scope="module")
def artifact_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    settings = {"DOVECOTE_ARTIFACT_MAX_BYTES": str(64 * MIB)}
    with start_dev(tmp_path_factory.mktemp("artifacts-dev"), "--faults", settings=settings) as runtime:
        yield runtime


class Recorder:
    """An httpx request hook: every request's method and path; `cut` puts the fault header on the next
    request to that path (its answer is then lost after the server committed)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, bytes]] = []
        self.cut: str | None = None

    def __call__(self, request: httpx.Request) -> None:
        if self.cut is not None and request.url.path == self.cut:
            request.headers.update(FAULT)
            self.cut = None
        self.sent.append((request.method, request.url.path, request.content if request.method == "POST" else b""))

    def to(self, path: str) -> list[bytes]:
        return [body for method, p, body in self.sent if p == path and method == "POST"]


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def clients(runtime: dict[str, Any]) -> tuple[DovecoteClient, DovecoteClient, Recorder]:
    recorder = Recorder()
    caller = DovecoteClient(runtime["endpoint"], runtime["tokens"]["caller"])
    worker = DovecoteClient(
        runtime["endpoint"], runtime["tokens"]["worker"], event_hooks={"request": [recorder]}, backoff=0.05
    )
    return caller, worker, recorder


def working_task(caller: DovecoteClient, worker: DovecoteClient, workspace: str) -> tuple[str, dict[str, Any]]:
    task_id = uid("t")
    caller.create_task(task_id, "make the change", workspace=workspace)
    assignment = worker.acquire(task_id)
    task = worker.accept(task_id, assignment["task"]["revision"], assignment["fence"])
    return task_id, {"fence": assignment["fence"], "revision": task["revision"]}


def test_a_40_mib_artifact_goes_through_a_presigned_upload_and_comes_back_verified(
    artifact_runtime: dict[str, Any], tmp_path: Path
) -> None:
    caller, worker, recorder = clients(artifact_runtime)
    workspace = uid("ws")
    source = tmp_path / "patch.bin"
    digest = hashlib.sha256()
    with source.open("wb") as handle:
        for _ in range(40):
            block = os.urandom(MIB)
            digest.update(block)
            handle.write(block)
    task_id, lease = working_task(caller, worker, workspace)
    frozen = worker.freeze_artifact(
        task_id, lease["revision"], lease["fence"], "big", "rev-0", source, media_type="application/octet-stream"
    )
    artifact = frozen["artifact"]
    assert artifact["payload_size"] == 40 * MIB and artifact["payload_digest"] == "sha256:" + digest.hexdigest()
    assert artifact["state"] == "frozen" and frozen["task"]["revision"] == lease["revision"] + 1
    # Declared by size and SHA-256, then frozen by that digest: never sent inline.
    [declared] = recorder.to(f"/v1/tasks/{task_id}/artifacts/uploads")
    [freeze] = recorder.to(f"/v1/tasks/{task_id}/artifacts")
    assert digest.hexdigest().encode() in declared and b'"upload_sha256"' in freeze and len(freeze) < 4096

    done = worker.complete(task_id, frozen["task"]["revision"], lease["fence"], "done", artifact_id="big")
    assert done["state"] == "completed" and done["artifact"] == "big"
    answer = caller.get_artifact(workspace, "big")
    assert answer["artifact"]["state"] == "published" and answer["payload"]["download_url"]
    target = tmp_path / "copy.bin"
    meta = caller.download_artifact(workspace, "big", target)
    assert meta["payload_digest"] == artifact["payload_digest"]
    check = hashlib.sha256()
    with target.open("rb") as handle:
        while chunk := handle.read(MIB):
            check.update(chunk)
    assert check.hexdigest() == digest.hexdigest()

    assert caller.workspace_head(workspace) == {
        "workspace": workspace,
        "confirmed_revision": "rev-0",
        "updated_at": artifact["frozen_at"],
    }
    assert caller.get_receipt(workspace, "big") is None
    receipt = caller.receipt_for(meta, "success")
    assert receipt["decision"] == "success" and caller.get_receipt(workspace, "big") == receipt
    head = caller.workspace_head(workspace)
    assert head is not None and head["confirmed_revision"] == artifact["result_revision"]


def test_a_payload_over_the_deployment_limit_is_refused_by_the_upload(artifact_runtime: dict[str, Any]) -> None:
    caller, worker, _ = clients(artifact_runtime)
    task_id, lease = working_task(caller, worker, uid("ws"))
    with pytest.raises(DovecoteError) as caught:
        worker.request(
            "POST",
            f"/v1/tasks/{task_id}/artifacts/uploads",
            json={"size": 64 * MIB + 1, "sha256": "0" * 64, "fence": lease["fence"]},
        )
    assert (caught.value.status, caught.value.code) == (400, "invalid_argument")


def test_worker_events_replay_the_same_ack_after_a_dropped_response(artifact_runtime: dict[str, Any]) -> None:
    caller, worker, recorder = clients(artifact_runtime)
    workspace = uid("ws")
    task_id = uid("t")
    caller.create_task(task_id, "echo me", workspace=workspace)
    fence = worker.acquire(task_id)["fence"]
    events = "/v1/worker/events"

    def settle(event: dict[str, Any]) -> dict[str, Any]:
        recorder.cut = events
        before = len(recorder.to(events))
        settlement = worker.worker_event({"task": task_id, "fence": fence, **event})
        sent = recorder.to(events)[before:]
        assert len(sent) == 2 and sent[0] == sent[1], "the retry must be the same delivery"
        return settlement

    accepted = settle({"kind": "accept_task", "expected_revision": 1})
    assert accepted["decision"] == "ack" and "code" not in accepted
    payload = worker.artifact_payload(task_id, "echo: echo me", fence=fence)
    freeze = {"artifact": "echoed", "expected_base_revision": "empty", "payload": payload}
    assert settle({"kind": "freeze_artifact", "expected_revision": 2, "freeze": freeze})["decision"] == "ack"
    completed = settle(
        {"kind": "complete_task", "expected_revision": 3, "message": "echo: echo me", "artifact": "echoed"}
    )
    assert completed["decision"] == "ack"
    task = caller.get_task(task_id)
    # Each event moved the task once, though each was sent twice.
    assert (task["state"], task["revision"], task["event_count"], task["artifact"]) == ("completed", 4, 4, "echoed")
    assert [e["type"] for e in caller.events(task_id)["items"]][-3:] == [
        "task_accepted",
        "artifact_frozen",
        "task_completed",
    ]
    assert caller.artifact_bytes(workspace, "echoed")[1] == b"echo: echo me"
    # The same delivery sent once more answers the stored settlement; a stale one is a NACK, as data.
    replay = worker.worker_event(
        {
            "task": task_id,
            "fence": fence,
            "kind": "accept_task",
            "expected_revision": 1,
            "event_id": accepted["event_id"],
        }
    )
    assert replay == accepted
    nack = worker.worker_event({"task": task_id, "fence": fence, "kind": "fail_task", "expected_revision": 4})
    assert nack["decision"] == "nack" and nack["code"] in ("stale_lease", "state_conflict")


def test_the_echo_worker_in_events_mode_freezes_and_completes(artifact_runtime: dict[str, Any]) -> None:
    authority = fresh_authority(artifact_runtime, "echo")
    caller = DovecoteClient(artifact_runtime["endpoint"], authority.token("caller"))
    task_id, workspace = uid("t"), uid("ws")
    caller.create_task(task_id, "hello artifacts", workspace=workspace)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")}
    env |= {"DOVECOTE_ENDPOINT": artifact_runtime["endpoint"], "DOVECOTE_TOKEN": authority.token("worker", "echo")}
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "echo_worker.py"), "--events", "--once", "--wait", "5"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{task_id}: completed with artifact echo.{task_id}" in result.stdout
    task = caller.get_task(task_id)
    assert (task["state"], task["artifact"]) == ("completed", f"echo.{task_id}")
    meta, body = caller.artifact_bytes(workspace, f"echo.{task_id}")
    assert body == b"echo: hello artifacts" and meta["state"] == "published" and meta["base_revision"] == "empty"
    # Driven through worker events: the dev log shows them, and no per-command route for this task.
    log = artifact_runtime["log"].read_text()
    assert "POST /v1/worker/events 200" in log
    assert f"POST /v1/tasks/{task_id}/complete" not in log and f"POST /v1/tasks/{task_id}/accept" not in log
