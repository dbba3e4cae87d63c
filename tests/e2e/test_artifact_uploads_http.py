"""Issue 15 item 6 over real HTTP: `POST /v1/tasks/{id}/artifacts/uploads` presigns a URL only for the
holder of the task's current lease. No such task (or another authority's task) is 404 not_found; no
lease, another worker's lease or a stale fence is 409 stale_lease; the fence is in the body."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import bearer
from tests.support.authorities import fresh_authority

SHA = hashlib.sha256(b"an artifact payload").hexdigest()


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def tokens(dev_runtime: dict[str, Any]) -> dict[str, dict[str, str]]:
    """An authority of this module's own (a caller, two workers), and a worker of another one."""
    mine, other = fresh_authority(dev_runtime, "up"), fresh_authority(dev_runtime, "up-other")
    return {
        "caller": bearer(mine.token("caller")),
        "holder": bearer(mine.token("worker", "holder")),
        "stranger": bearer(mine.token("worker", "stranger")),
        "other": bearer(other.token("worker", "holder")),
    }


def create(http: httpx.Client, caller: dict[str, str]) -> str:
    task_id = uid("t")
    body = {
        "command_id": uid("c"),
        "workspace": uid("ws"),
        "id": task_id,
        "context": uid("ctx"),
        "message": {"id": uid("m"), "parts": [{"media_type": "text/plain", "text": "make the change"}]},
    }
    answer = http.post("/v1/tasks", json=body, headers=caller)
    assert answer.status_code == 201, answer.text
    return task_id


def upload(http: httpx.Client, who: dict[str, str], task_id: str, fence: int | None) -> httpx.Response:
    body: dict[str, Any] = {"size": 19, "sha256": SHA}
    if fence is not None:
        body["fence"] = fence
    return http.post(f"/v1/tasks/{task_id}/artifacts/uploads", json=body, headers=who)


def refused(answer: httpx.Response, status: int, code: str) -> bool:
    return answer.status_code == status and answer.json()["error"]["code"] == code and "upload_url" not in answer.text


def test_no_such_task_is_404(http: httpx.Client, tokens: dict[str, dict[str, str]]) -> None:
    assert refused(upload(http, tokens["holder"], uid("no-such-task"), 1), 404, "not_found")


def test_without_the_current_lease_it_is_409_stale_lease(http: httpx.Client, tokens: dict[str, dict[str, str]]) -> None:
    task_id = create(http, tokens["caller"])
    assert refused(upload(http, tokens["holder"], task_id, 1), 409, "stale_lease")  # not leased at all
    leased = http.post(f"/v1/tasks/{task_id}/lease", json={"command_id": uid("c")}, headers=tokens["holder"])
    fence = leased.json()["assignment"]["fence"]
    stale = upload(http, tokens["holder"], task_id, fence + 1)
    assert refused(stale, 409, "stale_lease")
    assert stale.json()["error"]["details"] == {"fence": fence + 1, "current_fence": fence}
    assert refused(upload(http, tokens["stranger"], task_id, fence), 409, "stale_lease")  # another worker's lease
    assert refused(upload(http, tokens["holder"], task_id, None), 400, "invalid_argument")  # the fence is required


def test_another_authoritys_task_is_404(http: httpx.Client, tokens: dict[str, dict[str, str]]) -> None:
    task_id = create(http, tokens["caller"])
    fence = http.post(f"/v1/tasks/{task_id}/lease", json={"command_id": uid("c")}, headers=tokens["holder"]).json()[
        "assignment"
    ]["fence"]
    # The same task id and fence, from a worker of the same name in another authority.
    assert refused(upload(http, tokens["other"], task_id, fence), 404, "not_found")


def test_the_holder_of_the_current_lease_gets_a_url(http: httpx.Client, tokens: dict[str, dict[str, str]]) -> None:
    task_id = create(http, tokens["caller"])
    fence = http.post(f"/v1/tasks/{task_id}/lease", json={"command_id": uid("c")}, headers=tokens["holder"]).json()[
        "assignment"
    ]["fence"]
    answer = upload(http, tokens["holder"], task_id, fence)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["upload_url"] and body["expires_at"] and body["upload_headers"]["Content-Length"] == "19"
    # Once the lease is released (fenced), its holder gets no URL any more.
    fenced = http.post(
        f"/v1/tasks/{task_id}/lease/fence", json={"command_id": uid("c"), "fence": fence}, headers=tokens["holder"]
    )
    assert fenced.status_code == 204, fenced.text
    assert refused(upload(http, tokens["holder"], task_id, fence), 409, "stale_lease")
