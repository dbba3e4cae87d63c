"""Workers over real HTTP against `dovecote dev` (dispatcher every 0.5 s): silent leases are fenced
and claimed again with fence + 1, heartbeats keep a lease, the dispatcher racing a heartbeat or a
complete gives exactly one outcome, long-poll claims, a connection cut after commit, the request log."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import bearer
from tests.support.threads import eventually


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def workers(dev_runtime: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Two worker identities of their own, so no other test's claim takes these tasks."""
    admin = bearer(dev_runtime["tokens"]["admin"])
    out = {"caller": bearer(dev_runtime["tokens"]["caller"])}
    for name in ("w1", "w2"):
        minted = httpx.post(
            dev_runtime["endpoint"] + "/v1/admin/tokens",
            json={"authority": "dev", "role": "worker", "worker": uid(name)},
            headers=admin,
        )
        out[name] = bearer(minted.json()["token"])
    return out


def create(http: httpx.Client, caller: dict[str, str], timeout: int) -> str:
    tid = uid("t")
    body = {
        "command_id": uid("c"),
        "workspace": "ws",
        "id": tid,
        "context": uid("ctx"),
        "message": {"id": uid("m"), "parts": [{"media_type": "text/plain", "text": "x"}]},
        "lease_timeout_seconds": timeout,
    }
    assert http.post("/v1/tasks", json=body, headers=caller).status_code == 201
    return tid


def lease(http: httpx.Client, worker: dict[str, str], tid: str) -> int:
    answer = http.post(f"/v1/tasks/{tid}/lease", json={"command_id": uid("c")}, headers=worker)
    assert answer.status_code == 200, answer.text
    return int(answer.json()["assignment"]["fence"])


def wait_until(predicate: Any, seconds: float = 15) -> bool:
    return eventually(predicate, seconds, poll=0.2)


def test_a_silent_lease_is_fenced_and_claimed_again_with_fence_plus_one(
    http: httpx.Client, workers: dict[str, dict[str, str]]
) -> None:
    tid = create(http, workers["caller"], timeout=1)
    fence = lease(http, workers["w1"], tid)
    assert wait_until(lambda: http.get(f"/v1/tasks/{tid}/lease", headers=workers["w1"]).status_code == 404)
    stale = http.post(f"/v1/tasks/{tid}/lease/heartbeat", json={"fence": fence}, headers=workers["w1"])
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "stale_lease"
    assert lease(http, workers["w2"], tid) == fence + 1


def test_a_heartbeating_worker_keeps_its_lease_past_its_timeout(
    http: httpx.Client, workers: dict[str, dict[str, str]]
) -> None:
    tid = create(http, workers["caller"], timeout=2)
    fence = lease(http, workers["w1"], tid)
    stop = threading.Event()

    def beat() -> None:
        with httpx.Client(base_url=str(http.base_url), timeout=10) as c:
            while not stop.wait(0.5):
                answer = c.post(f"/v1/tasks/{tid}/lease/heartbeat", json={"fence": fence}, headers=workers["w1"])
                assert answer.status_code == 200, answer.text

    thread = threading.Thread(target=beat)
    thread.start()
    time.sleep(6)  # three timeouts
    stop.set()
    thread.join()
    assignment = http.get(f"/v1/tasks/{tid}/lease", headers=workers["w1"]).json()["assignment"]
    assert assignment["fence"] == fence
    assert http.get(f"/v1/tasks/{tid}", headers=workers["caller"]).json()["task"]["revision"] == 1


def test_the_dispatcher_racing_a_complete_gives_exactly_one_outcome(
    http: httpx.Client, workers: dict[str, dict[str, str]]
) -> None:
    outcomes = []
    for _ in range(3):
        tid = create(http, workers["caller"], timeout=1)
        fence = lease(http, workers["w1"], tid)
        accept = {"command_id": uid("c"), "expected_revision": 1, "fence": fence}
        assert http.post(f"/v1/tasks/{tid}/accept", json=accept, headers=workers["w1"]).status_code == 200
        time.sleep(1.0)  # the lease is now silent; the dispatcher and the worker race
        done = {
            "command_id": uid("c"),
            "expected_revision": 2,
            "fence": fence,
            "submission_id": uid("s"),
            "message": {"id": uid("m"), "parts": [{"media_type": "text/plain", "text": "done"}]},
        }
        answer = http.post(f"/v1/tasks/{tid}/complete", json=done, headers=workers["w1"])
        task = http.get(f"/v1/tasks/{tid}", headers=workers["caller"]).json()["task"]
        if answer.status_code == 200:
            assert task["state"] == "completed" and task["revision"] == 3
            outcomes.append("worker")
        else:
            assert answer.json()["error"]["code"] == "stale_lease"
            assert task["state"] == "working" and task["revision"] == 2
            assert wait_until(
                lambda tid=tid: (
                    http.post(
                        f"/v1/tasks/{tid}/lease", json={"command_id": uid("c")}, headers=workers["w2"]
                    ).status_code
                    == 200
                )
            )
            outcomes.append("dispatcher")
    assert len(outcomes) == 3


def test_a_long_poll_claim_gets_a_task_created_during_its_wait(
    dev_runtime: dict[str, Any], workers: dict[str, dict[str, str]]
) -> None:
    # A worker of its own authority's namespace sees every claimable task: use a fresh authority-wide
    # claim right after the queue is empty of old tasks is not possible here, so wait for ours.
    endpoint = dev_runtime["endpoint"]
    answers: list[httpx.Response] = []

    def claim() -> None:
        with httpx.Client(base_url=endpoint, timeout=30) as c:
            while True:
                answer = c.post(
                    "/v1/leases/claim", json={"command_id": uid("c"), "wait_seconds": 10}, headers=workers["w2"]
                )
                answers.append(answer)
                if answer.status_code != 200 or answer.json()["assignment"]["task"]["context"] == "long-poll":
                    return

    thread = threading.Thread(target=claim)
    thread.start()
    time.sleep(1.5)
    body = {
        "command_id": uid("c"),
        "workspace": "ws",
        "id": uid("t"),
        "context": "long-poll",
        "message": {"id": uid("m"), "parts": [{"media_type": "text/plain", "text": "x"}]},
    }
    with httpx.Client(base_url=endpoint, timeout=30) as c:
        assert c.post("/v1/tasks", json=body, headers=workers["caller"]).status_code == 201
    thread.join(timeout=30)
    assert answers[-1].status_code == 200, answers[-1].text
    assert answers[-1].json()["assignment"]["task"]["id"] == body["id"]


def test_a_command_whose_answer_was_lost_replays_on_retry(
    dev_runtime: dict[str, Any], workers: dict[str, dict[str, str]]
) -> None:
    body = {
        "command_id": uid("c"),
        "workspace": "ws",
        "id": uid("t"),
        "context": uid("ctx"),
        "message": {"id": uid("m"), "parts": [{"media_type": "text/plain", "text": "x"}]},
    }
    with httpx.Client(base_url=dev_runtime["endpoint"], timeout=30) as c:
        with pytest.raises(httpx.TransportError):
            c.post("/v1/tasks", json=body, headers={**workers["caller"], "X-Dovecote-Fault": "drop-response"})
        replay = c.post("/v1/tasks", json=body, headers=workers["caller"])
    assert replay.status_code == 200, replay.text  # an exact retry of a committed create: the same task
    assert replay.json()["task"]["id"] == body["id"] and replay.json()["task"]["revision"] == 1


def test_the_runtime_logs_one_line_per_request(dev_runtime: dict[str, Any], http: httpx.Client) -> None:
    marker = uid("logged")
    http.get(f"/v1/tasks/{marker}", headers=bearer(dev_runtime["tokens"]["caller"]))
    assert wait_until(lambda: marker in dev_runtime["log"].read_text(), 5)
    line = next(row for row in dev_runtime["log"].read_text().splitlines() if marker in row)
    assert f"GET /v1/tasks/{marker} 404 not_found" in line and line.endswith("ms")
