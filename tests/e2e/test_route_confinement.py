"""Ids stay in their route at the gateway too (issue 15 item 1), over real HTTP against `dovecote dev`.

The requests are written byte for byte on a socket, so no client normalizes them first (httpx
resolves `..` before sending). With an admin token, nothing a normalizing server would turn into an
admin route reaches one: `..` is never resolved, `%2e%2e` neither, `%2F` stays inside its segment
(where the id's pattern answers 4xx). The victim token still authenticates afterwards."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.e2e.conftest import bearer, start_dev
from tests.support.tasks import create_body


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with start_dev(tmp_path_factory.mktemp("dev-confinement")) as runtime:
        yield runtime


def raw_request(endpoint: str, method: str, target: bytes, token: str) -> tuple[int, bytes]:
    """One request with exactly this request target; the status and the body."""
    where = urlsplit(endpoint)
    host, port = where.hostname or "127.0.0.1", where.port or 80
    head = b"%s %s HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n" % (
        method.encode(),
        target,
        host.encode(),
        port,
        token.encode(),
    )
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(head)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


@pytest.fixture(scope="module")
def victim(dev: dict[str, Any]) -> dict[str, str]:
    """A token the admin mints: the one the traversals try to revoke."""
    minted = httpx.post(
        dev["endpoint"] + "/v1/admin/tokens",
        json={"authority": "dev", "role": "caller"},
        headers=bearer(dev["tokens"]["admin"]),
        timeout=30,
    )
    assert minted.status_code == 201, minted.text
    return {"token": minted.json()["token"], "token_id": minted.json()["token_id"]}


def authenticates(dev: dict[str, Any], token: str) -> bool:
    return httpx.get(dev["endpoint"] + "/v1/notes", params={"limit": 1}, headers=bearer(token), timeout=30).is_success


TRAVERSALS = [
    "/v1/notes/../admin/tokens/{id}",
    "/v1/notes/%2e%2e/admin/tokens/{id}",
    "/v1/notes/%2E%2E/admin/tokens/{id}",
    "/v1/notes/..%2Fadmin%2Ftokens%2F{id}",
    "/v1/notes/%2e%2e%2fadmin%2ftokens%2f{id}",
    "/v1/notes/x/../../admin/tokens/{id}",
    "/v1/notes/./../admin/tokens/{id}",
    "/v1%2Fadmin%2Ftokens%2F{id}",
    "/v1/admin%2Ftokens%2F{id}",
    "/v1/admin/tokens/{id}/x/..",
    "/v1/memory/writes/..%2F..%2Fadmin%2Ftokens%2F{id}",
]


@pytest.mark.parametrize("template", TRAVERSALS)
def test_no_traversal_reaches_the_admin_route_and_the_token_stays_valid(
    dev: dict[str, Any], victim: dict[str, str], template: str
) -> None:
    target = template.format(id=victim["token_id"]).encode()
    status, body = raw_request(dev["endpoint"], "DELETE", target, dev["tokens"]["admin"])
    assert 400 <= status < 500, (target, status, body)
    assert authenticates(dev, victim["token"]), target


@pytest.mark.parametrize(
    "target",
    [
        b"/v1/notes/../admin/tokens",
        b"/v1/notes/%2e%2e/admin/tokens",
        b"/v1/notes/..%2Fadmin%2Ftokens%3F",
        b"/v1%2Fadmin%2Ftokens",
        b"/v1/notes/%2e%2e%2fadmin%2ftokens",
        b"/v1/tasks/../admin/tokens",
    ],
)
def test_no_traversal_lists_the_tokens(dev: dict[str, Any], victim: dict[str, str], target: bytes) -> None:
    status, body = raw_request(dev["endpoint"], "GET", target, dev["tokens"]["admin"])
    assert 400 <= status < 500, (target, status, body)
    assert victim["token_id"].encode() not in body


def test_an_encoded_slash_stays_in_its_segment_and_the_pattern_refuses_it(dev: dict[str, Any]) -> None:
    caller = dev["tokens"]["caller"]
    task_id = f"t-{uuid.uuid4().hex[:12]}"
    created = httpx.post(
        dev["endpoint"] + "/v1/tasks",
        json=create_body(task_id, context="confinement"),
        headers=bearer(caller),
        timeout=30,
    )
    assert created.status_code == 201, created.text
    # The control: the events route answers for this task.
    assert raw_request(dev["endpoint"], "GET", f"/v1/tasks/{task_id}/events".encode(), caller)[0] == 200
    # `<task>%2Fevents` is one segment: GET /v1/tasks/{id} with an id no pattern accepts.
    status, body = raw_request(dev["endpoint"], "GET", f"/v1/tasks/{task_id}%2Fevents".encode(), caller)
    assert status == 400 and b'"invalid_argument"' in body, body
    # `..` is a segment like any other: never the parent of the one before it.
    for target in (f"/v1/tasks/{task_id}/events/..", f"/v1/tasks/{task_id}/snapshot/../events"):
        assert raw_request(dev["endpoint"], "GET", target.encode(), caller)[0] == 404, target
    status, body = raw_request(dev["endpoint"], "GET", b"/v1/tasks/..", caller)
    assert status == 400 and b'"invalid_argument"' in body, body


def test_the_control_a_revoke_by_its_own_route_is_seen(dev: dict[str, Any]) -> None:
    """Without this, `authenticates` staying true could mean a check that cannot see a revocation."""
    admin = dev["tokens"]["admin"]
    minted = httpx.post(
        dev["endpoint"] + "/v1/admin/tokens", json={"authority": "dev", "role": "caller"}, headers=bearer(admin)
    ).json()
    assert authenticates(dev, minted["token"])
    status, _ = raw_request(dev["endpoint"], "DELETE", f"/v1/admin/tokens/{minted['token_id']}".encode(), admin)
    assert status == 204
    assert not authenticates(dev, minted["token"])
