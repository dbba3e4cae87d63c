"""Tasks over real HTTP against `dovecote dev`: a whole conversation, roles, isolation, and every
bad-input case answered 4xx with nothing stored."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import bearer


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def msg(text: str) -> dict[str, Any]:
    return {"id": uid("m"), "parts": [{"media_type": "text/plain", "text": text}]}


@pytest.fixture
def roles(dev_runtime: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {role: bearer(token) for role, token in dev_runtime["tokens"].items()}


def create(http: httpx.Client, caller: dict[str, str], **extra: Any) -> dict[str, Any]:
    body = {
        "command_id": uid("c"),
        "workspace": "ws",
        "id": uid("t"),
        "context": uid("ctx"),
        "message": msg("hi"),
        **extra,
    }
    response = http.post("/v1/tasks", json=body, headers=caller)
    assert response.status_code == 201, response.text
    return dict(response.json()["task"])


def test_a_whole_conversation(http: httpx.Client, roles: dict[str, dict[str, str]]) -> None:
    caller, worker = roles["caller"], roles["worker"]
    task = create(http, caller)
    tid = task["id"]
    lease = http.post(f"/v1/tasks/{tid}/lease", json={"command_id": uid("c")}, headers=worker)
    assert lease.status_code == 200, lease.text
    fence = lease.json()["assignment"]["fence"]
    assert lease.json()["assignment"]["worker"] == "dev-worker" and fence == 1
    rev = 1

    def worker_cmd(kind: str, **extra: Any) -> dict[str, Any]:
        nonlocal rev
        r = http.post(
            f"/v1/tasks/{tid}/{kind}",
            json={"command_id": uid("c"), "expected_revision": rev, "fence": fence, **extra},
            headers=worker,
        )
        assert r.status_code == 200, r.text
        rev = r.json()["task"]["revision"]
        return dict(r.json()["task"])

    worker_cmd("accept")
    for _ in range(2):
        worker_cmd("request-input", message=msg("which colour?"))
        r = http.post(
            f"/v1/tasks/{tid}/reply",
            json={"command_id": uid("c"), "expected_revision": rev, "message": msg("blue")},
            headers=caller,
        )
        assert r.status_code == 200, r.text
        rev = r.json()["task"]["revision"]
    done = worker_cmd("complete", submission_id=uid("s"), message=msg("done"))
    assert (done["state"], done["revision"], done["message_count"], done["event_count"]) == ("completed", 7, 6, 7)
    messages = http.get(f"/v1/tasks/{tid}/messages", params={"limit": 2}, headers=caller).json()
    assert [m["author"] for m in messages["items"]] == ["caller", "agent"] and messages["has_more"] is True
    events = http.get(f"/v1/tasks/{tid}/events", params={"after": 5}, headers=caller).json()
    assert [e["type"] for e in events["items"]] == ["caller_replied", "task_completed"] and events["next"] == 7
    assert http.get(f"/v1/tasks/{tid}/snapshot", headers=caller).json()["event_cursor"] == 7
    assert http.get(f"/v1/tasks/{tid}/lease", headers=worker).status_code == 404


def test_create_replay_is_200_and_conflicts_are_409(http: httpx.Client, roles: dict[str, dict[str, str]]) -> None:
    body = {"command_id": uid("c"), "workspace": "ws", "id": uid("t"), "context": "c", "message": msg("x")}
    first = http.post("/v1/tasks", json=body, headers=roles["caller"])
    again = http.post("/v1/tasks", json=body, headers=roles["caller"])
    assert (first.status_code, again.status_code) == (201, 200) and first.json() == again.json()
    clash = http.post("/v1/tasks", json={**body, "command_id": uid("c")}, headers=roles["caller"])
    assert clash.status_code == 409 and clash.json()["error"]["code"] == "task_conflict"
    wrong = http.post(
        f"/v1/tasks/{body['id']}/cancel", json={"command_id": uid("c"), "expected_revision": 4}, headers=roles["caller"]
    )
    assert wrong.status_code == 409 and wrong.json()["error"]["details"] == {"expected": 4, "actual": 1}


def test_roles_are_enforced(http: httpx.Client, roles: dict[str, dict[str, str]]) -> None:
    task = create(http, roles["caller"])
    for path, body in (
        ("/v1/leases/claim", {"command_id": uid("c")}),
        (f"/v1/tasks/{task['id']}/lease", {"command_id": uid("c")}),
        (f"/v1/tasks/{task['id']}/accept", {"command_id": uid("c"), "expected_revision": 1, "fence": 1}),
    ):
        response = http.post(path, json=body, headers=roles["caller"])
        assert response.status_code == 403 and response.json()["error"]["code"] == "forbidden", path
    response = http.post(
        "/v1/tasks",
        json={"command_id": uid("c"), "workspace": "w", "id": uid("t"), "context": "c", "message": msg("x")},
        headers=roles["worker"],
    )
    assert response.status_code == 403
    assert http.get("/v1/tasks", headers={}).status_code == 401


def test_cross_authority_is_404(
    http: httpx.Client, roles: dict[str, dict[str, str]], other_authority: dict[str, dict[str, str]]
) -> None:
    task = create(http, roles["caller"])
    other = other_authority
    assert http.get(f"/v1/tasks/{task['id']}", headers=other["caller"]).status_code == 404
    assert (
        http.post(
            f"/v1/tasks/{task['id']}/cancel",
            json={"command_id": uid("c"), "expected_revision": 1},
            headers=other["caller"],
        ).status_code
        == 404
    )
    assert (
        http.post(f"/v1/tasks/{task['id']}/lease", json={"command_id": uid("c")}, headers=other["worker"]).status_code
        == 404
    )
    assert http.get(f"/v1/tasks/{task['id']}/messages", headers=other["caller"]).status_code == 404
    listed = http.get("/v1/tasks", params={"context": task["context"]}, headers=other["caller"]).json()
    assert listed["items"] == [] and listed["total_size"] == 0
    # Another authority may reuse the same task id: ids are unique per authority.
    clone = {"command_id": uid("c"), "workspace": "ws", "id": task["id"], "context": "c", "message": msg("mine")}
    assert http.post("/v1/tasks", json=clone, headers=other["caller"]).status_code == 201


BAD_CREATES = [
    ({"id": "has space"}, "id"),
    ({"id": ""}, "id"),
    ({"workspace": "#"}, "workspace"),
    ({"expected_revision": 3}, "expected_revision"),
    ({"message": {"id": "m1", "parts": []}}, "message.parts"),
    ({"message": {"id": "m1", "parts": [{"media_type": "text/plain", "text": ""}]}}, "message.parts[0]"),
    ({"message": {"id": "m1", "parts": [{"media_type": "no-slash", "text": "x"}]}}, "media_type"),
    ({"message": {"id": "m1", "parts": [{"media_type": "text/plain", "data_b64": "%%"}]}}, "data_b64"),
    ({"message": {"id": "m1", "parts": [{"media_type": "text/plain"}]}}, "message.parts[0]"),
    ({"revision": 1}, "Extra inputs"),
    ({"expected_revision": "0"}, "expected_revision"),
]


@pytest.mark.parametrize(("patch", "needle"), BAD_CREATES, ids=[n for _, n in BAD_CREATES])
def test_bad_creates_are_400_and_store_nothing(
    http: httpx.Client, roles: dict[str, dict[str, str]], patch: dict[str, Any], needle: str
) -> None:
    context = uid("ctx")
    body = {"command_id": uid("c"), "workspace": "ws", "id": uid("t"), "context": context, "message": msg("x"), **patch}
    response = http.post("/v1/tasks", json=body, headers=roles["caller"])
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_argument" and needle in error["message"] + str(error["details"])
    assert http.get(f"/v1/contexts/{context}/tasks", headers=roles["caller"]).json()["items"] == []


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/v1/tasks", {"limit": "101"}),
        ("/v1/tasks", {"limit": "-1"}),
        ("/v1/tasks", {"state": "done"}),
        ("/v1/tasks", {"updated_since": "yesterday"}),
        ("/v1/tasks", {"cursor": "forged"}),
        ("/v1/leases", {"limit": "x"}),
    ],
)
def test_bad_queries_are_400(
    http: httpx.Client, roles: dict[str, dict[str, str]], path: str, query: dict[str, str]
) -> None:
    headers = roles["worker"] if path == "/v1/leases" else roles["caller"]
    response = http.get(path, params=query, headers=headers)
    assert response.status_code == 400, response.text


def test_bad_worker_commands_change_nothing(http: httpx.Client, roles: dict[str, dict[str, str]]) -> None:
    task = create(http, roles["caller"])
    tid = task["id"]
    fence = http.post(f"/v1/tasks/{tid}/lease", json={"command_id": uid("c")}, headers=roles["worker"]).json()[
        "assignment"
    ]["fence"]
    for body in (
        {"command_id": uid("c"), "expected_revision": 0, "fence": fence},
        {"command_id": uid("c"), "expected_revision": 1, "fence": 0},
        {"command_id": uid("c"), "expected_revision": 1},
        {"command_id": "bad id", "expected_revision": 1, "fence": fence},
    ):
        assert http.post(f"/v1/tasks/{tid}/accept", json=body, headers=roles["worker"]).status_code == 400
    stale = http.post(
        f"/v1/tasks/{tid}/accept",
        json={"command_id": uid("c"), "expected_revision": 1, "fence": fence + 1},
        headers=roles["worker"],
    )
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "stale_lease"
    assert http.get(f"/v1/tasks/{tid}", headers=roles["caller"]).json()["task"]["revision"] == 1
    after = http.get(f"/v1/tasks/{tid}/messages", params={"after": 5}, headers=roles["caller"])
    assert after.status_code == 400


def test_claim_and_lease_listing(http: httpx.Client, roles: dict[str, dict[str, str]]) -> None:
    worker = roles["worker"]
    claimed = []
    while True:
        response = http.post("/v1/leases/claim", json={"command_id": uid("c")}, headers=worker)
        if response.status_code == 404:
            break
        assert response.status_code == 200, response.text
        claimed.append(response.json()["assignment"]["task"]["id"])
    listed, cursor = [], None
    while True:
        page = http.get(
            "/v1/leases", params={"limit": 2, **({"cursor": cursor} if cursor else {})}, headers=worker
        ).json()
        listed += [a["task"]["id"] for a in page["items"]]
        cursor = page.get("cursor")
        if not cursor:
            break
    assert set(claimed) <= set(listed)


def test_a_task_read_shows_its_lease_and_the_grants_say_how_each_ended(
    http: httpx.Client, roles: dict[str, dict[str, str]]
) -> None:
    """A worker that stops mid-task leaves a visible lease on the task read (holder, fence, last
    heartbeat, when it will be fenced), and the grant history says how each lease ended."""
    caller, worker, admin = roles["caller"], roles["worker"], roles["admin"]
    tid = create(http, caller, lease_timeout_seconds=600)["id"]
    assert "lease" not in http.get(f"/v1/tasks/{tid}", headers=caller).json()
    lease = http.post(f"/v1/tasks/{tid}/lease", json={"command_id": uid("c")}, headers=worker)
    assert lease.status_code == 200, lease.text
    read = http.get(f"/v1/tasks/{tid}", headers=caller).json()
    assert read["lease"]["fence"] == 1 and read["lease"]["worker"] == lease.json()["assignment"]["worker"]
    assert read["lease"]["fenced_after"] and "last_lease" not in read
    fenced = http.post(f"/v1/tasks/{tid}/lease/fence", json={"command_id": uid("c"), "fence": 1}, headers=admin)
    assert fenced.status_code == 204, fenced.text
    read = http.get(f"/v1/tasks/{tid}/snapshot", headers=caller).json()
    assert "lease" not in read and (read["last_lease"]["reason"], read["last_lease"]["by"]) == ("fenced", "admin")
    grants = http.get(f"/v1/tasks/{tid}/grants", headers=caller).json()
    assert [(g["fence"], g["state"], g["reason"]) for g in grants["items"]] == [(1, "ended", "fenced")]
    # The worker's view of it: its lease is gone, and it is told why on its next command.
    assert http.get(f"/v1/tasks/{tid}/lease", headers=worker).status_code == 404
    assert (grants["next"], grants["has_more"]) == (1, False)
    assert http.get(f"/v1/tasks/{tid}/grants", params={"after": 2}, headers=caller).status_code == 400
