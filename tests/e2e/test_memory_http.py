"""Memory over real HTTP against `dovecote dev` (the SQS emulator runs the worker): submit → status
?wait → complete with candidates, the lists, judgments, cancel, isolation between authorities, and
bad input answered 4xx with nothing queued."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import bearer


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def roles(dev_runtime: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {role: bearer(token) for role, token in dev_runtime["tokens"].items()}


def submit(http: httpx.Client, who: dict[str, str], write_id: str, scope: str, content: str, **extra: Any) -> Any:
    return http.post(
        "/v1/memory/writes", json={"id": write_id, "scope": scope, "content": content, **extra}, headers=who
    )


def settled(http: httpx.Client, who: dict[str, str], write_id: str) -> dict[str, Any]:
    response = http.get(f"/v1/memory/writes/{write_id}", params={"wait": 20}, headers=who)
    assert response.status_code == 200, response.text
    body = dict(response.json())
    assert body["status"] in ("complete", "cancelled", "failed"), body
    return body


def test_submit_wait_list_relations_and_judge(http: httpx.Client, roles: dict[str, dict[str, str]]) -> None:
    caller = roles["caller"]
    scope = uid("scope")
    first, second = uid("w"), uid("w")
    answer = submit(http, caller, first, scope, "The retry limit is 5", tags=["subject:retry-limit"])
    assert answer.status_code == 202 and answer.json() == {"id": first, "scope": scope, "status": "queued"}
    assert submit(http, caller, second, scope, "The retry limit is 7", tags=["subject:retry-limit"]).status_code == 202
    assert settled(http, caller, first)["evidence"] == {
        "code": "goncho_write_complete",
        "write_ok": True,
        "candidates": [],
    }
    status = settled(http, caller, second)
    assert status["status"] == "complete" and status["evidence"]["code"] == "goncho_write_complete"
    (candidate,) = status["evidence"]["candidates"]
    assert (candidate["from"], candidate["to"], candidate["verb"]) == (second, first, "conflicts_with")
    assert f"memory:{first}" in candidate["evidence_ids"] and "subject:retry-limit" in candidate["evidence_ids"]

    listed = http.get("/v1/memory", params={"scope": scope}, headers=caller)
    assert listed.status_code == 200
    assert [(m["id"], m["content"], m["tags"]) for m in listed.json()["items"]] == [
        (first, "The retry limit is 5", ["subject:retry-limit"]),
        (second, "The retry limit is 7", ["subject:retry-limit"]),
    ]
    assert "cursor" not in listed.json()
    page = http.get("/v1/memory", params={"scope": scope, "limit": 1}, headers=caller).json()
    rest = http.get("/v1/memory", params={"scope": scope, "limit": 1, "cursor": page["cursor"]}, headers=caller)
    assert [m["id"] for m in page["items"] + rest.json()["items"]] == [first, second]

    relations = http.get("/v1/memory/relations", params={"scope": scope, "status": "pending"}, headers=caller)
    assert relations.status_code == 200
    (relation,) = relations.json()["items"]
    assert relation["id"] == candidate["id"] and relation["status"] == "pending" and "judgment" not in relation

    path = f"/v1/memory/relations/{relation['id']}/judgment"
    judgment = {"command_id": uid("c"), "decision": "confirmed", "note": "7 is the current limit"}
    judged = http.post(path, json=judgment, headers=caller)
    assert judged.status_code == 200, judged.text
    assert judged.json()["relation"]["status"] == "confirmed"
    assert judged.json()["relation"]["judgment"]["note"] == "7 is the current limit"
    assert http.post(path, json=judgment, headers=caller).json() == judged.json()  # the exact retry
    conflict = http.post(path, json={"command_id": uid("c"), "decision": "dismissed"}, headers=caller)
    assert conflict.status_code == 409 and conflict.json()["error"]["code"] == "judgment_conflict"
    confirmed = http.get("/v1/memory/relations", params={"scope": scope, "status": "confirmed"}, headers=caller)
    assert [r["id"] for r in confirmed.json()["items"]] == [relation["id"]]
    assert http.get("/v1/memory/relations", params={"scope": scope, "status": "pending"}, headers=caller).json() == {
        "items": []
    }


def test_an_exact_resubmit_answers_the_same_and_another_write_is_409(
    http: httpx.Client, roles: dict[str, dict[str, str]]
) -> None:
    caller, scope, write_id = roles["caller"], uid("scope"), uid("w")
    first = submit(http, caller, write_id, scope, "deploys happen on fridays")
    again = submit(http, caller, write_id, scope, "deploys happen on fridays")
    assert (
        (again.status_code, again.json())
        == (first.status_code, first.json())
        == (
            202,
            {"id": write_id, "scope": scope, "status": "queued"},
        )
    )
    other = submit(http, caller, write_id, scope, "deploys never happen on fridays")
    assert other.status_code == 409 and other.json()["error"]["code"] == "idempotency_conflict"
    settled(http, caller, write_id)
    items = http.get("/v1/memory", params={"scope": scope}, headers=caller).json()["items"]
    assert [m["content"] for m in items] == ["deploys happen on fridays"]


def test_cancel_is_true_only_if_the_write_never_started(http: httpx.Client, roles: dict[str, dict[str, str]]) -> None:
    caller, scope = roles["caller"], uid("scope")
    ids = [uid("w") for _ in range(5)]
    for write_id in ids:
        assert submit(http, caller, write_id, scope, f"fact {write_id}").status_code == 202
    answers = {}
    for write_id in reversed(ids):  # the last ones are the likeliest to be still queued
        response = http.delete(f"/v1/memory/writes/{write_id}", headers=caller)
        assert response.status_code == 200 and response.json()["id"] == write_id
        answers[write_id] = response.json()["cancelled"]
    stored = set()
    for write_id in ids:
        status = settled(http, caller, write_id)
        if answers[write_id]:
            assert status["status"] == "cancelled"
            assert status["evidence"] == {"code": "goncho_write_cancelled", "write_ok": False, "candidates": []}
        else:
            assert status["status"] == "complete"
            stored.add(write_id)
        # Settled: a cancel now is false (the cancellation, if any, was consumed by the worker).
        assert http.delete(f"/v1/memory/writes/{write_id}", headers=caller).json()["cancelled"] is False
    items = http.get("/v1/memory", params={"scope": scope}, headers=caller).json()["items"]
    assert {m["id"] for m in items} == stored


def test_another_authority_sees_nothing(
    http: httpx.Client, roles: dict[str, dict[str, str]], other_authority: dict[str, dict[str, str]]
) -> None:
    caller, other = roles["caller"], other_authority["caller"]
    scope = uid("scope")
    first, second = uid("w"), uid("w")
    submit(http, caller, first, scope, "The cache is enabled")
    submit(http, caller, second, scope, "The cache is not enabled")
    relation = settled(http, caller, second)["evidence"]["candidates"][0]
    assert http.get(f"/v1/memory/writes/{first}", headers=other).status_code == 404
    assert http.delete(f"/v1/memory/writes/{first}", headers=other).status_code == 404
    assert http.get("/v1/memory", params={"scope": scope}, headers=other).json() == {"items": []}
    assert http.get("/v1/memory/relations", params={"scope": scope}, headers=other).json() == {"items": []}
    judged = http.post(
        f"/v1/memory/relations/{relation['id']}/judgment",
        json={"command_id": uid("c"), "decision": "dismissed"},
        headers=other,
    )
    assert judged.status_code == 404
    # The same write id is free in the other authority.
    assert submit(http, other, first, scope, "theirs").status_code == 202
    assert settled(http, other, first)["status"] == "complete"


BAD_BODIES = [
    '{"id": "ID", "scope": "S", "content": "\\ud800"}',  # a lone surrogate
    '{"id": "ID\\n", "scope": "S", "content": "x"}',  # a trailing newline
    '{"id": "ID", "scope": "S\\n", "content": "x"}',
    '{"id": 123456789012345678901234567890, "scope": "S", "content": "x"}',  # a huge int
    '{"id": "ID", "scope": "S", "content": 5}',
    '{"id": "ID", "scope": "S", "content": ""}',
    '{"id": "ID", "scope": "S", "content": "x", "tags": "subject:a"}',
    '{"id": "ID", "scope": "S", "content": "x", "tags": [["nested"]]}',
    '{"id": "ID", "scope": "S", "content": "x", "extra": true}',
    '{"id": "ID", "scope": "S", "content": "' + "x" * 9000 + '"}',
    '{"id": "ID", "scope": "S", "content": "x", "tags": ["subject:a", "subject:b"]}',
    "[" * 50_000 + "]" * 50_000,  # deep JSON
    '{"id": "ID", "scope": "S"',
]


@pytest.mark.parametrize("template", BAD_BODIES, ids=range(len(BAD_BODIES)))
def test_bad_input_is_4xx_and_nothing_is_queued(
    http: httpx.Client, roles: dict[str, dict[str, str]], template: str
) -> None:
    caller, scope, write_id = roles["caller"], uid("scope"), uid("w")
    body = template.replace('"ID', f'"{write_id}').replace('"S', f'"{scope}')
    response = http.post(
        "/v1/memory/writes", content=body.encode(), headers={**caller, "Content-Type": "application/json"}
    )
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["error"]["code"] == "invalid_argument"
    assert http.get(f"/v1/memory/writes/{write_id}", headers=caller).status_code == 404
    assert http.get("/v1/memory", params={"scope": scope}, headers=caller).json() == {"items": []}


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/v1/memory/writes/{id}", {"wait": "21"}),
        ("/v1/memory/writes/{id}", {"wait": "-1"}),
        ("/v1/memory/writes/{id}", {"wait": "1" * 40}),
        ("/v1/memory/writes/{id}", {"wait": "soon"}),
        ("/v1/memory", {"scope": "s", "limit": "101"}),
        ("/v1/memory", {"scope": "s", "limit": "9" * 40}),
        ("/v1/memory", {"scope": "s\n"}),
        ("/v1/memory", {}),
        ("/v1/memory", {"scope": "s", "cursor": "forged"}),
        ("/v1/memory", {"scope": "s", "scop": "typo"}),
        ("/v1/memory/relations", {"scope": "s", "status": "judged"}),
    ],
)
def test_bad_reads_are_400(
    http: httpx.Client, roles: dict[str, dict[str, str]], path: str, params: dict[str, str]
) -> None:
    caller = roles["caller"]
    write_id = uid("w")
    submit(http, caller, write_id, uid("scope"), "x is 1")
    response = http.get(path.replace("{id}", write_id), params=params, headers=caller)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_argument"


@pytest.mark.parametrize("suffix", ["%0A", "%0D", "%00", "%1C"])
def test_a_control_character_in_a_path_names_nothing(
    http: httpx.Client, roles: dict[str, dict[str, str]], suffix: str
) -> None:
    """`$` in a route pattern matches before a trailing newline: `w%0A` must not reach `w`."""
    caller, write_id = roles["caller"], uid("w")
    submit(http, caller, write_id, uid("scope"), "x is 1")
    assert http.get(f"/v1/memory/writes/{write_id}{suffix}", headers=caller).status_code == 404
    assert http.delete(f"/v1/memory/writes/{write_id}{suffix}", headers=caller).status_code == 404
    assert http.get(f"/v1/memory/writes/{write_id}", headers=caller).status_code == 200


def test_roles_and_authentication(http: httpx.Client, roles: dict[str, dict[str, str]]) -> None:
    assert http.get("/v1/memory", params={"scope": "s"}).status_code == 401
    assert submit(http, roles["worker"], uid("w"), uid("scope"), "workers write memory too").status_code == 202
    assert http.post("/v1/memory/redrive", json={"limit": 5}, headers=roles["caller"]).status_code == 403
    assert http.post("/v1/memory/redrive", json={}, headers=roles["admin"]).status_code == 400
    redriven = http.post("/v1/memory/redrive", json={"limit": 5}, headers=roles["admin"])
    assert redriven.status_code == 200 and redriven.json()["moved"] == len(redriven.json()["writes"])
    bad = http.post("/v1/memory/redrive", json={"limit": 1000}, headers=roles["admin"])
    assert bad.status_code == 400
