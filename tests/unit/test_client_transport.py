"""The SDK's transport, against httpx.MockTransport: what is retried (and with exactly the same body),
what never is, how failures become `DovecoteError`s, how ids derive from the command id, where
configuration is looked for, and how note bodies stream."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from dovecote.client import DovecoteClient, DovecoteError, WaitTimeout
from dovecote.client.config import resolve
from dovecote.client.notes import CHUNK
from dovecote.notes.limits import INLINE_LIMIT

Handler = Callable[[httpx.Request], httpx.Response]


def client(handler: Handler, **options: Any) -> DovecoteClient:
    options.setdefault("backoff", 0.0)
    return DovecoteClient("http://dovecote.test", "dvc_t_secret", transport=httpx.MockTransport(handler), **options)


def envelope(status: int, code: str, **details: Any) -> httpx.Response:
    return httpx.Response(status, json={"error": {"code": code, "message": code.replace("_", " "), "details": details}})


TASK = {"id": "t1", "state": "submitted", "revision": 1}


class Script:
    """Answers in order, recording every request body."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        self.bodies.append(json.loads(request.content) if request.content else {})
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.mark.parametrize(
    "failure",
    [
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
        httpx.ReadTimeout("timed out"),
        httpx.ConnectError("[Errno 111] Connection refused"),
        envelope(503, "commit_unknown"),
        envelope(503, "unavailable"),
        envelope(429, "throttled"),
        httpx.Response(504, json={"message": "Endpoint request timed out"}),
    ],
    ids=["cut", "read-timeout", "refused", "commit_unknown", "unavailable", "throttled", "gateway-504"],
)
def test_a_command_is_retried_with_the_same_body_after_a_retryable_failure(
    failure: httpx.Response | Exception,
) -> None:
    script = Script(failure, failure, httpx.Response(201, json={"task": TASK}))
    task = client(script).create_task("t1", "hello")
    assert task == TASK
    assert len(script.bodies) == 3
    first = script.bodies[0]
    assert all(body == first for body in script.bodies), "a retry must be the same command"
    assert first["command_id"].startswith("c-")
    assert first["message"]["id"] == client(script).derived_id("m", "message", first["command_id"])


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (400, "invalid_argument"),
        (404, "not_found"),
        (409, "idempotency_conflict"),
        (409, "stale_lease"),
        (500, "internal"),
    ],
)
def test_a_4xx_or_a_500_is_never_retried(status: int, code: str) -> None:
    script = Script(envelope(status, code, task="t1"))
    with pytest.raises(DovecoteError) as caught:
        client(script).create_task("t1", "hello")
    assert (caught.value.status, caught.value.code, caught.value.details, caught.value.attempts) == (
        status,
        code,
        {"task": "t1"},
        1,
    )
    assert len(script.bodies) == 1


def test_attempts_are_bounded_and_the_last_error_names_the_command() -> None:
    script = Script(*[envelope(503, "commit_unknown")] * 3)
    with pytest.raises(DovecoteError) as caught:
        client(script, max_attempts=3).reply("t1", 3, "more")
    error = caught.value
    assert (error.status, error.code, error.attempts) == (503, "commit_unknown", 3)
    assert error.retryable and error.command_id == script.bodies[0]["command_id"]
    assert len({json.dumps(b, sort_keys=True) for b in script.bodies}) == 1


def test_a_transport_failure_is_wrapped_never_a_raw_httpx_error() -> None:
    script = Script(*[httpx.ConnectError("[Errno 111] Connection refused")] * 2)
    c = DovecoteClient(
        "http://127.0.0.1:8787", "dvc_t_s", transport=httpx.MockTransport(script), max_attempts=2, backoff=0
    )
    with pytest.raises(DovecoteError) as caught:
        c.get_task("t1")
    assert caught.value.status == 0 and caught.value.code == "unavailable"
    assert caught.value.message == (
        "cannot reach Dovecote at http://127.0.0.1:8787: connection refused; is `make dev` running?"
    )


def test_minting_a_token_is_not_resent_once_it_may_have_arrived() -> None:
    script = Script(httpx.RemoteProtocolError("cut"), httpx.Response(201, json={"token": "x"}))
    with pytest.raises(DovecoteError) as caught:
        client(script).create_token("a", "caller")
    assert caught.value.code == "unavailable" and len(script.bodies) == 1
    never_sent = Script(httpx.ConnectError("refused"), httpx.Response(201, json={"token": "x"}))
    assert client(never_sent).create_token("a", "caller") == {"token": "x"}


def test_retry_after_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr("dovecote.client.core.time.sleep", slept.append)
    throttled = httpx.Response(429, headers={"Retry-After": "2"}, json={"message": "Too Many Requests"})
    script = Script(throttled, httpx.Response(200, json={"task": TASK}))
    assert client(script).get_task("t1") == TASK
    assert slept == [2.0]


def test_backoff_grows_and_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr("dovecote.client.core.time.sleep", slept.append)
    monkeypatch.setattr("dovecote.client.core.random.uniform", lambda low, high: high)
    script = Script(*[envelope(503, "unavailable")] * 6)
    with pytest.raises(DovecoteError):
        client(script, max_attempts=6, backoff=0.5, max_backoff=3.0).get_task("t1")
    assert slept == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_ids_derive_from_the_command_id_so_an_explicit_retry_is_the_same_command() -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, json={"task": TASK})

    c = client(handler)
    for _ in range(2):
        c.create_task("t1", "hi", command_id="c-create")
        c.reply("t1", 3, "answer", "c-reply")
        c.request_input("t1", 2, 1, "question?", "c-ask")
        c.complete("t1", 4, 1, "done", "c-done")
    first, second = seen[:4], seen[4:]
    assert first == second
    assert first[3]["submission_id"] == c.derived_id("s", "submission", "c-done")
    message_ids = [b["message"]["id"] for b in first]
    assert len(set(message_ids)) == 4
    other = DovecoteClient("http://x", "dvc_other_token")
    assert other.derived_id("m", "message", "c-create") != message_ids[0]  # keyed by the token
    given = c.complete("t1", 4, 1, {"id": "m-mine", "parts": [{"media_type": "text/plain", "text": "x"}]}, "c2")
    assert given == TASK and seen[-1]["message"]["id"] == "m-mine"


def test_fresh_calls_get_fresh_command_ids() -> None:
    script = Script(*[httpx.Response(200, json={"task": TASK})] * 2)
    c = client(script)
    c.cancel("t1", 1)
    c.cancel("t1", 1)
    assert script.bodies[0]["command_id"] != script.bodies[1]["command_id"]


def test_claim_returns_none_when_nothing_is_claimable_and_long_polls_with_a_longer_timeout() -> None:
    timeouts: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        timeouts.append(request.extensions["timeout"]["read"])
        assert json.loads(request.content)["wait_seconds"] == 20
        return envelope(404, "not_found")

    assert client(handler).claim(wait_seconds=20) is None
    assert timeouts[0] >= 40


def test_wait_for_follows_the_event_stream_and_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("dovecote.client.tasks.time.sleep", lambda s: None)
    events = [
        {"sequence": 2, "type": "task_accepted", "state": "working", "revision": 2},
        {"sequence": 3, "type": "input_required", "state": "input_required", "revision": 3},
        {"sequence": 4, "type": "caller_replied", "state": "working", "revision": 4},
    ]
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(str(request.url.path) + "?" + request.url.query.decode())
        if request.url.path.endswith("/snapshot"):
            return httpx.Response(200, json={"task": {**TASK, "state": "submitted"}, "event_cursor": 1})
        if request.url.path.endswith("/stream"):
            # An endpoint without the stream route (the gateway's own 404): wait_for polls instead.
            return httpx.Response(404, json={"message": "Not Found"})
        if request.url.path.endswith("/events"):
            after = int(request.url.params["after"])
            # The events arrive one per poll; an empty page in between.
            shown = [e for e in events if e["sequence"] == after + 1] if len(calls) % 2 else []
            return httpx.Response(200, json={"items": shown, "next": after + len(shown), "has_more": False})
        return httpx.Response(200, json={"task": {**TASK, "state": "working", "revision": 4}})

    # input_required was passed through between polls: it still counts.
    assert client(handler).wait_for("t1", "input_required", timeout=30)["revision"] == 4
    with pytest.raises(WaitTimeout) as caught:
        client(handler).wait_for("t1", ("completed",), timeout=0.01)
    assert caught.value.code == "wait_timeout" and "completed" in caught.value.message


def test_wait_for_follows_the_stream_when_there_is_one() -> None:
    stream = (
        'event: lease\ndata: {"lease":null,"last_lease":null}\n\n'
        'id: 2\nevent: task_accepted\ndata: {"sequence":2,"state":"working","revision":2}\n\n'
        'id: 3\nevent: input_required\ndata: {"sequence":3,"state":"input_required","revision":3}\n\n'
    )
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path + " " + request.headers.get("last-event-id", ""))
        if request.url.path.endswith("/snapshot"):
            return httpx.Response(200, json={"task": {**TASK, "state": "submitted"}, "event_cursor": 1})
        if request.url.path.endswith("/stream"):
            return httpx.Response(200, text=stream, headers={"content-type": "text/event-stream"})
        return httpx.Response(200, json={"task": {**TASK, "state": "input_required", "revision": 3}})

    assert client(handler).wait_for("t1", "input_required", timeout=30)["revision"] == 3
    assert calls == ["/v1/tasks/t1/snapshot ", "/v1/tasks/t1/stream 1", "/v1/tasks/t1 "]
    assert not any(call.startswith("/v1/tasks/t1/events") for call in calls)  # no polling


def test_configuration_says_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DOVECOTE_ENDPOINT", "DOVECOTE_TOKEN", "DOVECOTE_TOKENS_FILE", "DOVECOTE_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no profile of the user's
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DovecoteError) as caught:
        resolve("caller")
    assert caught.value.code == "configuration"
    assert "DOVECOTE_ENDPOINT" in caught.value.message and "DOVECOTE_TOKEN" in caught.value.message
    assert str(tmp_path) in caught.value.message and ".dovecote/dev-tokens.json" in caught.value.message
    tokens = tmp_path / "t.json"
    tokens.write_text(json.dumps({"endpoint": "http://127.0.0.1:1", "tokens": {"caller": "c", "worker": "w"}}))
    monkeypatch.setenv("DOVECOTE_TOKENS_FILE", str(tokens))
    found = resolve("worker")
    assert (found.endpoint, found.token, found.source) == ("http://127.0.0.1:1", "w", str(tokens))
    with pytest.raises(DovecoteError) as missing_role:
        resolve("admin")
    assert "admin" in missing_role.value.message
    tokens.write_text("{not json")
    with pytest.raises(DovecoteError) as broken:
        resolve("caller")
    assert broken.value.code == "configuration" and str(tokens) in broken.value.message
    monkeypatch.setenv("DOVECOTE_ENDPOINT", "http://e")
    monkeypatch.setenv("DOVECOTE_TOKEN", "tok")
    assert resolve("caller").token == "tok"


class FakeS3:
    """The API and a presigned bucket in one MockTransport: checks the signed headers like S3."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.meta: dict[str, Any] = {}
        self.upload_headers: dict[str, str] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == "bucket.test":
            if request.method == "PUT":
                body = request.content
                for name, value in self.upload_headers.items():
                    if request.headers.get(name) != value:
                        return httpx.Response(403, text=f"SignatureDoesNotMatch: {name}")
                sha = base64.b64encode(hashlib.sha256(body).digest()).decode()
                if sha != self.upload_headers["x-amz-checksum-sha256"]:
                    return httpx.Response(400, text="BadDigest")
                self.objects["upload"] = body
                return httpx.Response(200)
            return httpx.Response(200, content=self.objects["upload"])
        body = json.loads(request.content) if request.content else {}
        if request.url.path == "/v1/notes/uploads":
            self.meta = body
            self.upload_headers = {
                "Content-Length": str(body["size"]),
                "Content-Type": body.get("content_type", "application/octet-stream"),
                "x-amz-checksum-sha256": base64.b64encode(bytes.fromhex(body["sha256"])).decode(),
            }
            return httpx.Response(
                200, json={"ref": "r", "upload_url": "http://bucket.test/u", "upload_headers": self.upload_headers}
            )
        if request.method == "PUT":
            assert body["upload"] is True and body["sha256"] == self.meta["sha256"]
            return httpx.Response(200, json={**self.meta, "content_type": self.upload_headers["Content-Type"]})
        meta = {
            "ref": "r",
            "key": "k",
            "run": 1,
            "name": "n",
            "author": "",
            "size": len(self.objects["upload"]),
            "sha256": self.meta["sha256"],
            "content_type": "x",
            "updated_at": "now",
        }
        return httpx.Response(200, json={**meta, "download_url": "http://bucket.test/d"})


def test_a_large_file_streams_to_the_presigned_url_with_exactly_its_headers(tmp_path: Path) -> None:
    s3 = FakeS3()
    path = tmp_path / "report.json"
    data = b'{"rows": "' + b"x" * (3 * 1024 * 1024) + b'"}'
    path.write_bytes(data)
    progress: list[tuple[int, int]] = []
    c = client(s3)
    note = c.put_note("k", 1, "n", path, progress=lambda done, total: progress.append((done, total)))
    assert s3.objects["upload"] == data
    assert s3.meta["content_type"] == "application/json"  # guessed from the name, kept on the upload path
    assert note["content_type"] == "application/json"
    # Sent in chunks of at most CHUNK bytes, read from the file as they go (never one buffer).
    sent = [done for done, _ in progress]
    assert len(sent) >= 4 and max(b - a for a, b in zip(sent, sent[1:], strict=False)) <= CHUNK
    assert progress[-1] == (len(data), len(data))
    out = tmp_path / "copy.json"
    assert c.download_note("r", out)["sha256"] == hashlib.sha256(data).hexdigest()
    assert out.read_bytes() == data


def test_undeclared_utf8_text_is_text_on_the_upload_path_too_and_a_corrupt_download_is_refused(
    tmp_path: Path,
) -> None:
    s3 = FakeS3()
    c = client(s3)
    c.put_note("k", 1, "n", "é" * INLINE_LIMIT)
    assert s3.meta["content_type"] == "text/plain; charset=utf-8"
    s3.objects["upload"] = b"tampered"
    with pytest.raises(DovecoteError) as caught:
        c.download_note("r", tmp_path / "x")
    assert caught.value.code == "integrity"
    assert not (tmp_path / "x").exists()  # a failed download leaves nothing


def test_a_refused_or_wrong_role_token_is_blamed_on_where_the_token_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad DOVECOTE_TOKEN is DOVECOTE_TOKEN's fault, not DOVECOTE_ENDPOINT's; a token of the wrong
    role says which role the command needs and how to give it one."""
    for name in ("DOVECOTE_TOKENS_FILE", "DOVECOTE_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("DOVECOTE_ENDPOINT", "http://dovecote.test")
    monkeypatch.setenv("DOVECOTE_TOKEN", "dvc_t_bad")
    gateway = httpx.MockTransport(lambda request: httpx.Response(403, json={"message": "Forbidden"}))
    with DovecoteClient.from_env(transport=gateway, max_attempts=1) as sdk, pytest.raises(DovecoteError) as refused:
        sdk.whoami()
    assert "the token was refused (the token from DOVECOTE_TOKEN)" in refused.value.message
    wrong = envelope(403, "forbidden", role="caller", allowed=["worker"])
    wrong_role = httpx.MockTransport(lambda request: wrong)
    with DovecoteClient.from_env("worker", transport=wrong_role, max_attempts=1) as sdk:
        with pytest.raises(DovecoteError) as caught:
            sdk.claim("c1")
    message = caught.value.message
    assert caught.value.code == "forbidden" and caught.value.details == {"role": "caller", "allowed": ["worker"]}
    assert "this command needs a worker token; the token from DOVECOTE_TOKEN is a caller token" in message
    assert "DOVECOTE_TOKEN is the token of every role: set it to a worker token" in message


def test_adding_a_webhook_without_an_id_is_retried_as_the_same_webhook() -> None:
    # The server keys a webhook by its id (the same id again replaces it): the SDK picks the id
    # when the caller does not, so a retry after a lost answer cannot make a second webhook.
    hook = {"id": "wh-x", "url": "https://hooks.example.com/"}
    script = Script(
        envelope(503, "unavailable"), httpx.ReadTimeout("timed out"), httpx.Response(201, json={"webhook": hook})
    )
    assert client(script).add_webhook("t1", "https://hooks.example.com/") == hook
    assert len(script.bodies) == 3 and all(body == script.bodies[0] for body in script.bodies)
    assert script.bodies[0]["id"].startswith("wh-")
    again = Script(httpx.Response(201, json={"webhook": hook}))
    client(again).add_webhook("t1", "https://hooks.example.com/")
    assert again.bodies[0]["id"] != script.bodies[0]["id"], "each call is a webhook of its own"
