"""Webhooks against `dovecote dev` (docs/guides/webhooks.md), real HTTP both ways: a receiver on
loopback gets every state of a task in order, with the config's credentials and a signature that
verifies against the JWKS (examples/webhook_receiver.py's check: plain Ed25519, as the Python
`standardwebhooks` package verifies only the symmetric v1 form); a receiver answering 503 twice gets
the same webhook-id again until it answers 200; a kill -9 of `dovecote dev` while a notification is
being delivered still delivers it after the restart; another authority's task is TaskNotFound / 404;
the SSRF table is refused at config time on both APIs, with the reason."""

from __future__ import annotations

import json
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.push import example_receiver
from dovecote.client import DovecoteClient
from tests.e2e.conftest import bearer, local_http, start_dev

A2A = {"A2A-Version": "1.0", "Content-Type": "application/json"}


receiver_example = example_receiver()


class Hook:
    """A receiver on loopback (served by the example's `serve`): answers each POST with the next status
    of `script` (then 200), keeps every request, and may hold requests until released."""

    def __init__(self, script: list[int] | None = None) -> None:
        self.script = list(script or [])
        self.got: list[tuple[dict[str, str], bytes, int]] = []
        self.arrived = threading.Condition()
        self.hold = threading.Event()
        self.hold.set()
        self.inflight = 0
        self.server = receiver_example.serve(self, 0)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def receive(self, headers: dict[str, str], body: bytes) -> int:
        with self.arrived:
            self.inflight += 1
        self.hold.wait(60)
        with self.arrived:
            status = self.script.pop(0) if self.script else 200
            self.got.append(({k.lower(): v for k, v in headers.items()}, body, status))
            self.inflight -= 1
            self.arrived.notify_all()
        return status

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait(self, count: int, timeout: float = 60) -> list[tuple[dict[str, str], bytes, int]]:
        deadline = time.monotonic() + timeout
        with self.arrived:
            while len(self.got) < count and time.monotonic() < deadline:
                self.arrived.wait(0.2)
            return list(self.got)

    def server_busy(self) -> bool:
        """Whether a request is being held (the sender is waiting on this receiver)."""
        with self.arrived:
            return self.inflight > 0

    def close(self) -> None:
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()


def rpc(http: httpx.Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One JSON-RPC request to the A2A binding; its response object."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return dict(http.post("/", headers=A2A, json=body).json())


@pytest.fixture(scope="module")
def hooks_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with start_dev(tmp_path_factory.mktemp("hooks"), "--allow-loopback-webhooks") as runtime:
        yield runtime


@pytest.fixture
def hook() -> Iterator[Hook]:
    made = Hook()
    yield made
    made.close()


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def text(value: str) -> dict[str, Any]:
    return {"parts": [{"media_type": "text/plain", "text": value}]}


def states(got: list[tuple[dict[str, str], bytes, int]]) -> list[str]:
    return [json.loads(body)["statusUpdate"]["status"]["state"] for _, body, _ in got if b"statusUpdate" in body]


def run_task_to_completion(runtime: dict[str, Any], task_id: str) -> None:
    worker = DovecoteClient(runtime["endpoint"], runtime["tokens"]["worker"])
    assignment = worker.acquire(task_id)
    task = worker.accept(task_id, assignment["task"]["revision"], assignment["fence"])
    task = worker.request_input(task_id, task["revision"], assignment["fence"], "which one?")
    caller = DovecoteClient(runtime["endpoint"], runtime["tokens"]["caller"])
    task = caller.reply(task_id, task["revision"], text("the blue one"))
    worker.complete(task_id, task["revision"], assignment["fence"], "done")  # the same lease goes on


def test_every_state_arrives_in_order_signed_with_the_configs_credentials(
    hooks_dev: dict[str, Any], hook: Hook
) -> None:
    endpoint, tokens = hooks_dev["endpoint"], hooks_dev["tokens"]
    caller = DovecoteClient(endpoint, tokens["caller"])
    task_id = uid("t")
    caller.create_task(task_id, text("notify me"))
    with local_http(endpoint, headers=bearer(tokens["caller"]), timeout=30) as http:
        made = http.post(
            f"/v1/tasks/{task_id}/webhooks",
            json={
                "id": "w1",
                "url": hook.url,
                "token": "check-me",
                "authentication": {"scheme": "Bearer", "credentials": "receiver-secret"},
            },
        )
        assert made.status_code == 201, made.text
        shown = made.json()["webhook"]
        # Never answered back: the token and the credentials are write-only.
        assert "receiver-secret" not in made.text and "check-me" not in made.text
        assert shown["has_token"] and shown["authentication"] == {"scheme": "Bearer", "has_credentials": True}
        run_task_to_completion(hooks_dev, task_id)
        got = hook.wait(4)
        assert states(got) == [
            "TASK_STATE_WORKING",
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED",
        ]
        verifier = receiver_example.Verifier(endpoint + "/.well-known/jwks.json")
        for headers, body, _ in got:
            assert headers["authorization"] == "Bearer receiver-secret"
            assert headers["x-a2a-notification-token"] == "check-me"
            assert headers["content-type"] == "application/a2a+json"
            assert headers["webhook-signature"].startswith("v1a,")
            assert verifier.verify(headers, body)
            assert not verifier.verify(headers, body.replace(b"TASK_STATE", b"TASK_STATF"))
        assert len({headers["webhook-id"] for headers, _, _ in got}) == len(got)
        listed = http.get(f"/v1/tasks/{task_id}/webhooks").json()["items"]
        assert [w["delivered"] for w in listed] == [5]  # the cursor: the task's last event
        jwks = http.get("/.well-known/jwks.json", headers={"Authorization": ""})
        assert jwks.status_code == 200 and jwks.json()["keys"][0]["crv"] == "Ed25519"
        # Delete is idempotent, and the config is gone.
        assert http.delete(f"/v1/tasks/{task_id}/webhooks/w1").status_code == 204
        assert http.delete(f"/v1/tasks/{task_id}/webhooks/w1").status_code == 204
        assert http.get(f"/v1/tasks/{task_id}/webhooks/w1").status_code == 404


def test_the_example_receiver_verifies_and_dedupes(hooks_dev: dict[str, Any]) -> None:
    endpoint, tokens = hooks_dev["endpoint"], hooks_dev["tokens"]
    handled: list[str] = []
    receiver = receiver_example.Receiver(
        receiver_example.Verifier(endpoint + "/.well-known/jwks.json"),
        token="tok",
        handle=lambda webhook_id, update: handled.append(webhook_id),
    )
    server = receiver_example.serve(receiver, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        caller = DovecoteClient(endpoint, tokens["caller"])
        task_id = uid("t")
        caller.create_task(task_id, text("to the example"))
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        with local_http(endpoint, headers=bearer(tokens["caller"]), timeout=30) as http:
            assert http.post(f"/v1/tasks/{task_id}/webhooks", json={"url": url, "token": "tok"}).status_code == 201
        caller.cancel(task_id, 1)
        deadline = time.monotonic() + 30
        while not handled and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(handled) == 1
    finally:
        server.shutdown()
        server.server_close()
    # A replay of a delivered notification is acknowledged and not handled again; a forged one is refused.
    headers = {"webhook-id": handled[0], "webhook-timestamp": str(int(time.time())), "webhook-signature": "v1a,AAAA"}
    assert receiver.receive({**headers, "X-A2A-Notification-Token": "tok"}, b"{}") == 401
    assert handled == [handled[0]]


def test_503_twice_gets_the_same_webhook_id_until_200(hooks_dev: dict[str, Any]) -> None:
    hook = Hook([503, 503])
    try:
        endpoint, tokens = hooks_dev["endpoint"], hooks_dev["tokens"]
        caller = DovecoteClient(endpoint, tokens["caller"])
        task_id = uid("t")
        caller.create_task(task_id, text("retry me"))
        with local_http(endpoint, headers=bearer(tokens["caller"]), timeout=30) as http:
            assert http.post(f"/v1/tasks/{task_id}/webhooks", json={"url": hook.url}).status_code == 201
            caller.cancel(task_id, 1)
            got = hook.wait(3)
            assert [status for _, _, status in got] == [503, 503, 200]
            assert len({headers["webhook-id"] for headers, _, _ in got}) == 1  # the same notification each time
            assert len({body for _, body, _ in got}) == 1
            # The failure was recorded on the config (status, attempt), then the cursor moved on.
            shown = http.get(f"/v1/tasks/{task_id}/webhooks").json()["items"][0]
            assert shown["delivered"] == 2
            assert shown["last_failure"]["status"] == 503 and shown["last_failure"]["attempt"] == 2
    finally:
        hook.close()


def test_another_authoritys_task_is_not_found(hooks_dev: dict[str, Any], hook: Hook, tmp_path: Path) -> None:
    from tests.e2e.conftest import mint_dev_token

    endpoint, tokens = hooks_dev["endpoint"], hooks_dev["tokens"]
    task_id = uid("t")
    DovecoteClient(endpoint, tokens["caller"]).create_task(task_id, text("mine"))
    other = mint_dev_token(hooks_dev, "other", "caller")
    with local_http(endpoint, headers=bearer(other), timeout=30) as http:
        for method, path in (
            ("POST", f"/v1/tasks/{task_id}/webhooks"),
            ("GET", f"/v1/tasks/{task_id}/webhooks"),
            ("GET", f"/v1/tasks/{task_id}/webhooks/w1"),
            ("DELETE", f"/v1/tasks/{task_id}/webhooks/w1"),
        ):
            answer = http.request(method, path, json={"url": hook.url} if method == "POST" else None)
            assert answer.status_code == 404, (method, path, answer.text)
            assert answer.json()["error"]["code"] == "not_found"
        answered = rpc(http, "CreateTaskPushNotificationConfig", {"taskId": task_id, "url": hook.url})
        assert answered["error"]["code"] == -32001  # TaskNotFound
        rest = http.post(f"/a2a/tasks/{task_id}/pushNotificationConfigs", headers=A2A, json={"url": hook.url})
        assert rest.status_code == 404
        listed = http.get(f"/a2a/tasks/{task_id}/pushNotificationConfigs", headers=A2A)
        assert listed.status_code == 404


SSRF = [
    "https://127.0.0.1/hook",
    "http://127.0.0.1/hook",
    "https://169.254.169.254/latest/meta-data/",
    "https://10.0.0.1/hook",
    "https://[::ffff:10.0.0.1]/hook",
    "https://[::1]/hook",
    "https://localhost/hook",
    "https://192.168.1.10/",
    "https://100.64.0.1/",
    "https://[fd00::1]/",
    "https://[fe80::1]/",
    "https://224.0.0.1/",
]


def test_the_ssrf_table_is_refused_at_config_time_on_both_apis(dev_runtime: dict[str, Any]) -> None:
    """The shared runtime runs without --allow-loopback-webhooks: loopback is refused there too."""
    endpoint, tokens = dev_runtime["endpoint"], dev_runtime["tokens"]
    task_id = uid("t")
    DovecoteClient(endpoint, tokens["caller"]).create_task(task_id, text("no private networks"))
    with local_http(endpoint, headers=bearer(tokens["caller"]), timeout=30) as http:
        for url in SSRF:
            answer = http.post(f"/v1/tasks/{task_id}/webhooks", json={"url": url})
            assert answer.status_code == 400, (url, answer.text)
            error = answer.json()["error"]
            assert error["code"] == "invalid_argument" and error["details"]["field"] == "url"
            assert error["details"]["refused"] in ("address", "scheme"), (url, error)
            answered = rpc(http, "CreateTaskPushNotificationConfig", {"taskId": task_id, "url": url})
            assert answered["error"]["code"] == -32602, (url, answered)  # InvalidParams, with the reason
            assert "webhook" in answered["error"]["message"]
        assert http.get(f"/v1/tasks/{task_id}/webhooks").json()["items"] == []  # nothing stored
        # SendMessage with a refused config refuses the whole send: no task is created.
        sent = rpc(
            http,
            "SendMessage",
            {
                "message": {"role": "ROLE_USER", "messageId": uid("m"), "parts": [{"text": "x"}]},
                "configuration": {
                    "returnImmediately": True,
                    "taskPushNotificationConfig": {"url": "https://169.254.169.254/"},
                },
            },
        )
        assert sent["error"]["code"] == -32602


def test_a2a_send_message_with_a_config_notifies_from_the_first_event(hooks_dev: dict[str, Any], hook: Hook) -> None:
    endpoint, tokens = hooks_dev["endpoint"], hooks_dev["tokens"]
    with local_http(endpoint, headers=bearer(tokens["caller"]), timeout=30) as http:
        sent = http.post(
            "/a2a/message:send",
            headers=A2A,
            json={
                "message": {"role": "ROLE_USER", "messageId": uid("m"), "parts": [{"text": "hello"}]},
                "configuration": {
                    "returnImmediately": True,
                    "taskPushNotificationConfig": {
                        "id": "a2a-hook",
                        "url": hook.url,
                        "authentication": {"scheme": "Bearer", "credentials": "a2a-secret"},
                    },
                },
            },
        )
        assert sent.status_code == 200, sent.text
        task_id = sent.json()["task"]["id"]
        got = hook.wait(1)
        assert states(got) == ["TASK_STATE_SUBMITTED"]
        assert got[0][0]["authorization"] == "Bearer a2a-secret"
        # The A2A reads of the config: both bindings, no credentials in the answers.
        one = http.get(f"/a2a/tasks/{task_id}/pushNotificationConfigs/a2a-hook", headers=A2A)
        assert one.status_code == 200 and one.json()["url"] == hook.url, one.text
        assert "a2a-secret" not in one.text and one.json()["authentication"] == {"scheme": "Bearer"}
        listed = rpc(http, "ListTaskPushNotificationConfigs", {"taskId": task_id})
        assert [c["id"] for c in listed["result"]["configs"]] == ["a2a-hook"]
        for _ in range(2):  # idempotent delete, on the JSON-RPC binding
            gone = rpc(http, "DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "a2a-hook"})
            assert gone["result"] == {}, gone
        missing = http.get(f"/a2a/tasks/{task_id}/pushNotificationConfigs/a2a-hook", headers=A2A)
        assert missing.status_code == 404


def test_kill_9_of_dovecote_dev_mid_delivery_still_delivers_after_the_restart(tmp_path: Path) -> None:
    hook = Hook()
    hook.hold.clear()  # the first notification is held: dev is mid-delivery when it dies
    try:
        with start_dev(tmp_path, "--allow-loopback-webhooks") as dev:
            endpoint, tokens, port = dev["endpoint"], dev["tokens"], int(dev["endpoint"].rsplit(":", 1)[1])
            caller = DovecoteClient(endpoint, tokens["caller"])
            task_id = uid("t")
            caller.create_task(task_id, text("survive a crash"))
            with local_http(endpoint, headers=bearer(tokens["caller"]), timeout=30) as http:
                assert http.post(f"/v1/tasks/{task_id}/webhooks", json={"url": hook.url}).status_code == 201
            caller.cancel(task_id, 1)  # committed: its notification is queued and being sent (held)
            deadline = time.monotonic() + 30
            while not hook.server_busy() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert hook.server_busy(), "the notification never reached the receiver"
            dev["process"].send_signal(signal.SIGKILL)
            dev["process"].wait(10)
        hook.hold.set()  # the held request is answered into a dead connection
        hook.wait(1, timeout=5)
        first = list(hook.got)
        with start_dev(tmp_path, "--allow-loopback-webhooks", port=port):
            got = hook.wait(len(first) + 1, timeout=90)
        delivered = [json.loads(body) for _, body, _ in got]
        assert delivered and all(d["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED" for d in delivered)
        assert len(got) > len(first), "nothing was delivered after the restart"
        assert len({headers["webhook-id"] for headers, _, _ in got}) == 1  # the same notification again
    finally:
        hook.close()


def test_jwks_is_public_and_lists_the_signing_keys(dev_runtime: dict[str, Any]) -> None:
    answer = httpx.get(dev_runtime["endpoint"] + "/.well-known/jwks.json", timeout=10)
    assert answer.status_code == 200
    (key,) = answer.json()["keys"]
    assert (key["kty"], key["crv"], key["alg"]) == ("OKP", "Ed25519", "EdDSA") and key["kid"]
