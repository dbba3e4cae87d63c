"""The SDK's artifact, workspace, receipt and worker-event methods against httpx.MockTransport: which
payloads go inline and which through a presigned upload (streamed in chunks, with exactly the signed
headers), that retries resend the very same command (same command, receipt, event and delivery ids),
that downloads are checked against the artifact's payload digest, that a NACK is data, and that the
worker loop's jobs drive tasks through worker events when asked to."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from dovecote.client import DovecoteClient, DovecoteError
from dovecote.client.artifacts import ARTIFACT_INLINE_SEND
from dovecote.client.notes import CHUNK
from dovecote.client.worker import EventNacked, Job, Worker
from dovecote.tasks.limits import ARTIFACT_HARD_MAX

TASK: dict[str, Any] = {"id": "t1", "workspace": "ws", "state": "working", "revision": 2}


def envelope(status: int, code: str, message: str = "", **details: Any) -> httpx.Response:
    return httpx.Response(status, json={"error": {"code": code, "message": message or code, "details": details}})


def artifact_meta(data: bytes, **extra: Any) -> dict[str, Any]:
    return {
        "id": "a1",
        "task": "t1",
        "workspace": "ws",
        "state": "published",
        "base_revision": "r0",
        "result_revision": "sha256:" + "1" * 64,
        "digest": "sha256:" + "2" * 64,
        "payload_digest": "sha256:" + hashlib.sha256(data).hexdigest(),
        "payload_size": len(data),
        "media_type": "application/octet-stream",
        "frozen_at": "2026-01-01T00:00:00Z",
        **extra,
    }


class FakeApi:
    """The routes these methods call, plus a presigned bucket: records every request; `fail` holds
    answers (or exceptions) to give before the real one, per path."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self.blobs: dict[str, bytes] = {}
        self.put_headers: dict[str, str] = {}
        self.fail: dict[str, list[httpx.Response | Exception]] = {}
        self.stored = b""
        self.settlements: dict[str, dict[str, Any]] = {}
        self.revision = TASK["revision"]  # the task's current revision, as worker events see it

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.url.host == "bucket.test":
            if request.method == "PUT":
                self.blobs[path] = request.read()
                self.put_headers = {k.lower(): v for k, v in request.headers.items()}
                return httpx.Response(200)
            return httpx.Response(200, content=self.blobs.get(path, b""))
        body = json.loads(request.content) if request.content else {}
        self.requests.append((request.method, path, body))
        pending = self.fail.get(path)
        if pending:
            answer = pending.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        if path.endswith("/artifacts/uploads"):
            return httpx.Response(
                200,
                json={
                    "upload_url": f"http://bucket.test/{body['sha256']}",
                    "upload_headers": {"x-amz-checksum-sha256": "signed", "content-length": str(body["size"])},
                    "expires_at": "2026-01-01T00:15:00Z",
                },
            )
        if path.endswith("/artifacts") and request.method == "POST":
            payload = body["payload"]
            if "upload_sha256" in payload:
                data = self.blobs[f"/{payload['upload_sha256']}"]
            elif "text" in payload:
                data = payload["text"].encode("utf-8")
            else:
                data = base64.b64decode(payload["data_b64"])
            self.stored = data
            meta = artifact_meta(data, state="frozen", media_type=payload["media_type"])
            return httpx.Response(200, json={"task": {**TASK, "revision": 3, "artifact": "a1"}, "artifact": meta})
        if path == "/v1/worker/events":
            event = body["event"]
            if body["delivery_id"] in self.settlements:  # an exact retry: the stored settlement
                return httpx.Response(200, json=self.settlements[body["delivery_id"]])
            if event["expected_revision"] != self.revision or event["fence"] != 1:
                settlement = {
                    "delivery_id": body["delivery_id"],
                    "event_id": event["event_id"],
                    "decision": "nack",
                    "code": "stale_lease" if event["fence"] != 1 else "revision_conflict",
                    "message": "no",
                }
            else:
                settlement = {"delivery_id": body["delivery_id"], "event_id": event["event_id"], "decision": "ack"}
                self.revision += 1
            return httpx.Response(200, json=self.settlements.setdefault(body["delivery_id"], settlement))
        if path.endswith("/receipt") and request.method == "POST":
            receipt = {k: v for k, v in body.items() if k not in ("command_id", "receipt_id")}
            return httpx.Response(200, json={"receipt": {"id": body["receipt_id"], "artifact": "a1", **receipt}})
        return envelope(404, "not_found", "no such route in the fake")

    def bodies(self, suffix: str) -> list[dict[str, Any]]:
        return [body for _, path, body in self.requests if path.endswith(suffix)]


def client(api: FakeApi, **options: Any) -> DovecoteClient:
    options.setdefault("backoff", 0.0)
    return DovecoteClient("http://dovecote.test", "dvc_t_secret", transport=httpx.MockTransport(api), **options)


# ---- freeze ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "media_type", "form", "stored_type"),
    [
        ("plan: ship it\n", None, "text", "text/plain; charset=utf-8"),
        (b"\x00\xffbinary", None, "data_b64", "application/octet-stream"),
        (b'{"a": 1}', "application/json", "text", "application/json"),
        ("\x00" * 1000, None, "data_b64", "text/plain; charset=utf-8"),  # JSON would escape it 6x
        (b"\xff" * 10, "text/plain", "data_b64", "text/plain"),  # declared text, not UTF-8
    ],
    ids=["str", "binary", "json", "control-characters", "not-utf8"],
)
def test_a_small_payload_goes_inline_in_one_command(
    payload: bytes | str, media_type: str | None, form: str, stored_type: str
) -> None:
    api = FakeApi()
    answer = client(api).freeze_artifact("t1", 2, 1, "a1", "r0", payload, media_type=media_type)
    assert answer["artifact"]["id"] == "a1" and answer["task"]["revision"] == 3
    [body] = api.bodies("/artifacts")
    assert set(body["payload"]) == {"media_type", form} and body["payload"]["media_type"] == stored_type
    assert (body["expected_revision"], body["fence"], body["artifact_id"], body["expected_base_revision"]) == (
        2,
        1,
        "a1",
        "r0",
    )
    assert api.stored == (payload.encode("utf-8") if isinstance(payload, str) else payload)
    assert not api.bodies("/uploads")


def test_a_large_file_streams_through_a_presigned_upload_in_chunks(tmp_path: Path) -> None:
    api = FakeApi()
    data = b"x" * (3 * ARTIFACT_INLINE_SEND + 17)
    path = tmp_path / "diff.json"
    path.write_bytes(data)
    progress: list[tuple[int, int]] = []
    c = client(api)
    answer = c.freeze_artifact(
        "t1", 2, 1, "a1", "r0", path, progress=lambda done, total: progress.append((done, total))
    )
    [declared] = api.bodies("/artifacts/uploads")
    assert declared == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "fence": 1}
    assert api.put_headers["x-amz-checksum-sha256"] == "signed"  # exactly the headers it was signed for
    [freeze] = api.bodies("/t1/artifacts")
    assert freeze["payload"] == {"media_type": "application/json", "upload_sha256": declared["sha256"]}
    assert api.stored == data and answer["artifact"]["payload_size"] == len(data)
    sent = [done for done, _ in progress]
    assert len(sent) >= 4 and max(b - a for a, b in zip(sent, sent[1:], strict=False)) <= CHUNK
    assert progress[-1] == (len(data), len(data))


def test_a_pipe_is_spooled_and_uploaded_when_large(tmp_path: Path) -> None:
    class Pipe:
        """A stream that can be read once, like stdin."""

        def __init__(self, data: bytes) -> None:
            self._data, self._at = data, 0

        def seekable(self) -> bool:
            return False

        def read(self, n: int = -1) -> bytes:
            end = len(self._data) if n < 0 else self._at + n
            chunk, self._at = self._data[self._at : end], min(end, len(self._data))
            return chunk

    api = FakeApi()
    data = bytes(range(256)) * (ARTIFACT_INLINE_SEND // 128)
    client(api).freeze_artifact("t1", 2, 1, "a1", "r0", Pipe(data))  # type: ignore[arg-type]
    assert api.stored == data and api.bodies("/t1/artifacts")[0]["payload"]["media_type"] == "application/octet-stream"


def test_a_payload_over_the_hard_maximum_is_refused_before_any_request(tmp_path: Path) -> None:
    api = FakeApi()
    path = tmp_path / "huge.bin"
    with path.open("wb") as handle:
        handle.truncate(ARTIFACT_HARD_MAX + 1)  # sparse: no 64 MiB written to the disk
    with pytest.raises(DovecoteError) as caught:
        client(api).freeze_artifact("t1", 2, 1, "a1", "r0", path)
    assert caught.value.code == "payload_too_large" and caught.value.details["limit"] == ARTIFACT_HARD_MAX
    assert api.requests == []


@pytest.mark.parametrize(
    "failure",
    [httpx.RemoteProtocolError("cut"), envelope(503, "commit_unknown"), httpx.ReadTimeout("slow")],
    ids=["cut", "commit_unknown", "timeout"],
)
def test_a_freeze_is_retried_as_the_same_command(failure: httpx.Response | Exception) -> None:
    api = FakeApi()
    api.fail["/v1/tasks/t1/artifacts"] = [failure]
    client(api).freeze_artifact("t1", 2, 1, "a1", "r0", "text")
    first, second = api.bodies("/t1/artifacts")
    assert first == second and first["command_id"].startswith("c-")


def test_a_stale_lease_is_not_retried() -> None:
    api = FakeApi()
    api.fail["/v1/tasks/t1/artifacts"] = [envelope(409, "stale_lease", fence=1)]
    with pytest.raises(DovecoteError) as caught:
        client(api).freeze_artifact("t1", 2, 1, "a1", "r0", "text")
    assert (caught.value.status, caught.value.code, caught.value.attempts) == (409, "stale_lease", 1)


# ---- reading ----------------------------------------------------------------------------------------


def test_downloads_are_checked_against_the_payload_digest(tmp_path: Path) -> None:
    api = FakeApi()
    data = b"y" * (2 * CHUNK + 5)
    api.blobs["/payload"] = data
    route = "/v1/workspaces/ws/artifacts/a1"
    meta = artifact_meta(data)
    api.fail[route] = [
        httpx.Response(
            200, json={"artifact": meta, "payload": {"media_type": "x", "download_url": "http://bucket.test/payload"}}
        ),
        httpx.Response(
            200,
            json={"artifact": meta, "payload": {"media_type": "x", "data_b64": base64.b64encode(b"other").decode()}},
        ),
        httpx.Response(
            200, json={"artifact": artifact_meta(b"hi"), "payload": {"media_type": "text/plain", "text": "hi"}}
        ),
    ]
    c = client(api)
    out = tmp_path / "payload.bin"
    assert c.download_artifact("ws", "a1", out) == meta and out.read_bytes() == data
    target = tmp_path / "tampered.bin"
    with pytest.raises(DovecoteError) as caught:
        c.download_artifact("ws", "a1", target)
    assert caught.value.code == "integrity" and "artifact a1 of workspace ws" in caught.value.message
    assert caught.value.details["expected"] == hashlib.sha256(data).hexdigest()
    assert not target.exists() and not list(tmp_path.glob(".tampered*"))  # nothing half-written stays
    assert c.artifact_bytes("ws", "a1")[1] == b"hi"


def test_a_missing_head_or_receipt_is_none_but_a_missing_artifact_is_an_error() -> None:
    api = FakeApi()
    api.fail["/v1/workspaces/ws/head"] = [envelope(404, "not_found", "the workspace has no head yet")]
    receipt = "/v1/workspaces/ws/artifacts/a1/receipt"
    api.fail[receipt] = [
        envelope(404, "not_found", "the artifact has no apply receipt"),
        envelope(404, "not_found", "artifact not found"),
    ]
    c = client(api)
    assert c.workspace_head("ws") is None
    assert c.get_receipt("ws", "a1") is None
    with pytest.raises(DovecoteError) as caught:
        c.get_receipt("ws", "a1")
    assert caught.value.status == 404


def test_a_receipt_for_an_artifact_fills_its_fields_and_derives_its_id_from_the_command() -> None:
    api = FakeApi()
    api.fail["/v1/workspaces/ws/artifacts/a1/receipt"] = [envelope(503, "unavailable")]
    c = client(api)
    meta = artifact_meta(b"z")
    receipt = c.receipt_for(meta, "success", command_id="c-receipt")
    first, second = api.bodies("/receipt")
    assert first == second  # the retry is the same command, with the same receipt id
    assert first["receipt_id"] == c.derived_id("r", "receipt", "c-receipt") == receipt["id"]
    assert (first["artifact_digest"], first["base_revision"], first["result_revision"]) == (
        meta["digest"],
        "r0",
        meta["result_revision"],
    )
    assert first["observed_revision"] == meta["result_revision"] and first["decision"] == "success"
    c.receipt_for(meta, "rejected", code="tests_failed", message="3 failed")
    assert "observed_revision" not in api.bodies("/receipt")[-1]


# ---- worker events ------------------------------------------------------------------------------------


def test_a_worker_event_is_settled_as_data_and_a_retry_is_the_same_delivery() -> None:
    api = FakeApi()
    api.fail["/v1/worker/events"] = [httpx.RemoteProtocolError("cut")]
    c = client(api)
    event = {"kind": "complete_task", "task": "t1", "fence": 1, "expected_revision": 2, "message": "done"}
    ack = c.worker_event(dict(event))
    first, second = api.bodies("/v1/worker/events")
    assert first == second and ack["decision"] == "ack"
    sent = first["event"]
    assert sent["event_id"].startswith("e-")
    assert first["delivery_id"] == c.derived_id("d", "delivery", sent["event_id"]) == ack["delivery_id"]
    assert sent["message"]["id"] == c.derived_id("m", "message", sent["event_id"])
    assert sent["submission"] == c.submission_id_for(sent["event_id"])
    # Sent again by hand with the same event id: the same delivery, and the stored settlement.
    assert c.worker_event({**event, "event_id": sent["event_id"]}) == ack
    nack = c.worker_event({"kind": "accept_task", "task": "t1", "fence": 1, "expected_revision": 9})
    assert (nack["decision"], nack["code"]) == ("nack", "revision_conflict")


def test_a_freeze_event_stages_a_large_payload_first() -> None:
    api = FakeApi()
    data = b"\x01" * (ARTIFACT_INLINE_SEND + 1)
    settlement = client(api).freeze_event("t1", 2, 1, "a1", "r0", data)
    assert settlement["decision"] == "ack" and api.blobs[f"/{hashlib.sha256(data).hexdigest()}"] == data
    [body] = api.bodies("/v1/worker/events")
    freeze = body["event"]["freeze"]
    assert freeze["payload"]["upload_sha256"] == hashlib.sha256(data).hexdigest() and freeze["artifact"] == "a1"


def test_a_job_in_events_mode_drives_its_task_through_worker_events() -> None:
    api = FakeApi()
    c = client(api)
    worker = Worker(c, lambda job: None, events=True)
    job = Job(worker, {"task": dict(TASK), "fence": 1})
    job.freeze("a1", "r0", "the echo")
    assert (job.revision, job.state, job.task["artifact"]) == (3, "working", "a1")
    job.complete("done", artifact_id="a1")
    assert (job.revision, job.state) == (4, "completed")
    kinds = [b["event"]["kind"] for b in api.bodies("/v1/worker/events")]
    assert kinds == ["freeze_artifact", "complete_task"]
    complete = api.bodies("/v1/worker/events")[-1]["event"]
    assert complete["artifact"] == "a1" and complete["event_id"] == c.derived_id("w", "t1", 1, "event:complete_task", 3)
    assert not [p for _, p, _ in api.requests if p.endswith(("/complete", "/t1/artifacts"))]  # no command routes
    stale = Job(worker, {"task": dict(TASK), "fence": 7})
    stale.task["revision"] = 9
    with pytest.raises(EventNacked) as caught:
        stale.accept()
    assert caught.value.code == "stale_lease" and stale.lost.is_set() and not caught.value.retryable


def test_a_job_freezes_by_command_with_a_derived_command_id() -> None:
    api = FakeApi()
    c = client(api)
    job = Job(Worker(c, lambda job: None), {"task": dict(TASK), "fence": 1})
    artifact = job.freeze("a1", "r0", b"\x00bytes")
    [body] = api.bodies("/t1/artifacts")
    assert body["command_id"] == c.derived_id("w", "t1", 1, "freeze", 2)
    assert artifact["id"] == "a1" and (job.revision, job.task["artifact"]) == (3, "a1")
    assert not api.bodies("/v1/worker/events")
