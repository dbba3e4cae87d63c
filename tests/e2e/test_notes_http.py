"""Notes over real HTTP against `dovecote dev`: the contract, bad input, isolation, large bodies."""

from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Any

import httpx
import pytest

from dovecote.client import DovecoteClient, DovecoteError
from dovecote.notes.limits import INLINE_LIMIT
from dovecote.notes.model import note_ref
from tests.e2e.conftest import bearer
from tests.support.notes import put_uploaded_note


def unique_key() -> str:
    return f"e2e:{uuid.uuid4().hex[:12]}"


@pytest.fixture
def caller(dev_runtime: dict[str, Any]) -> dict[str, str]:
    return bearer(dev_runtime["tokens"]["caller"])


def listed(http: httpx.Client, headers: dict[str, str], **params: Any) -> list[dict[str, Any]]:
    response = http.get("/v1/notes", params=params, headers=headers)
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


def test_health_and_openapi_need_no_token(http: httpx.Client) -> None:
    assert http.get("/v1/health").json()["status"] == "ok"
    doc = http.get("/v1/openapi.json").json()
    assert {"/v1/notes", "/v1/notes/{ref}", "/v1/notes/uploads", "/v1/admin/tokens"} <= set(doc["paths"])


def test_put_get_list_delete(http: httpx.Client, caller: dict[str, str]) -> None:
    key = unique_key()
    put = http.put(
        "/v1/notes",
        json={"key": key, "run": 1, "name": "fix_plan", "author": "claude", "text": "plan A"},
        headers=caller,
    )
    assert put.status_code == 200, put.text
    note = put.json()
    assert note["ref"] == note_ref(key, 1, "fix_plan", "claude")
    assert note["content_type"] == "text/plain; charset=utf-8" and note["size"] == 6
    got = http.get(f"/v1/notes/{note['ref']}", headers=caller).json()
    assert got["text"] == "plan A" and "download_url" not in got
    assert [i["ref"] for i in listed(http, caller, key=key)] == [note["ref"]]
    assert http.delete(f"/v1/notes/{note['ref']}", headers=caller).status_code == 204
    second = http.delete(f"/v1/notes/{note['ref']}", headers=caller)
    assert second.status_code == 404 and second.json()["error"]["code"] == "not_found"


def test_author_filter_over_http_has_three_states(http: httpx.Client, caller: dict[str, str]) -> None:
    key = unique_key()
    for author in ("", "claude"):
        http.put("/v1/notes", json={"key": key, "run": 1, "name": "n", "author": author, "text": "x"}, headers=caller)
    assert len(listed(http, caller, key=key)) == 2
    assert [i["author"] for i in listed(http, caller, key=key, author="")] == [""]
    assert [i["author"] for i in listed(http, caller, key=key, author="claude")] == ["claude"]


def test_paging_over_http(http: httpx.Client, caller: dict[str, str]) -> None:
    key = unique_key()
    for i in range(25):
        http.put("/v1/notes", json={"key": key, "run": 1, "name": f"n{i}", "text": "x"}, headers=caller)
    sizes, cursor = [], None
    while True:
        params: dict[str, Any] = {"key": key, "limit": 10, **({"cursor": cursor} if cursor else {})}
        page = http.get("/v1/notes", params=params, headers=caller).json()
        sizes.append(len(page["items"]))
        cursor = page.get("cursor")
        if not cursor:
            break
    assert sizes == [10, 10, 5]
    bad = http.get(
        "/v1/notes", params={"key": key + "x", "limit": 10, "cursor": page_cursor(http, caller, key)}, headers=caller
    )
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_argument"


def page_cursor(http: httpx.Client, caller: dict[str, str], key: str) -> str:
    return str(http.get("/v1/notes", params={"key": key, "limit": 1}, headers=caller).json()["cursor"])


def test_a_missing_token_is_401_and_an_invalid_one_is_denied_by_the_authorizer(http: httpx.Client) -> None:
    # docs/clients/http.md#errors: the gateway's own answers, before any function runs.
    body = {"key": "k", "run": 1, "name": "n", "text": "x"}
    missing = http.put("/v1/notes", json=body)
    assert missing.status_code == 401 and missing.json() == {"message": "Unauthorized"}
    forged = "Bearer dvc_0123456789abcdef_" + "A" * 43
    for header in ("Bearer nope", "Bearer dvc_forged", forged, "Basic abc", "Bearer"):
        response = http.put("/v1/notes", json=body, headers={"Authorization": header})
        assert response.status_code == 403, header
        assert response.json() == {"message": "Forbidden"}
    assert http.get("/v1/notes", headers={"Authorization": "Bearer nope"}).status_code == 403


def test_a_stranger_with_a_deep_body_gets_403_not_500(http: httpx.Client) -> None:
    deep = "[" * 2000 + "]" * 2000
    for _ in range(5):
        response = http.put(
            "/v1/notes", content=deep, headers={"Authorization": "Bearer garbage", "Content-Type": "application/json"}
        )
        assert response.status_code == 403


BAD_PUTS = [
    ({"run": 1, "name": "n", "text": "x"}, "Note.Key is required"),
    ({"key": "K", "run": 1, "text": "x"}, "Note.Name is required"),
    ({"key": "K", "run": 0, "name": "n", "text": "x"}, "Note.Run must be >= 1, got 0"),
    ({"key": "K", "run": -1, "name": "n", "text": "x"}, "Note.Run must be >= 1, got -1"),
    ({"key": "K", "run": "1", "name": "n", "text": "x"}, "run"),
    ({"key": "K", "run": 1.5, "name": "n", "text": "x"}, "run"),
    ({"key": "K", "run": "one", "name": "n", "text": "x"}, "run"),
    ({"key": "K", "run": 1, "name": "n", "text": "x", "body_b64": "eA=="}, "either text or body_b64"),
    ({"key": "K", "run": 1, "name": "n", "body_b64": "***"}, "not valid base64"),
    ({"key": "K", "run": 1, "name": "n", "text": "x", "authority": "other"}, "Extra inputs"),
    ({"key": "K", "run": 1, "name": "n", "text": "x", "content_type": "bogus"}, "media type"),
]


@pytest.mark.parametrize(("body", "message"), BAD_PUTS, ids=[m for _, m in BAD_PUTS])
def test_bad_input_is_400_and_stores_nothing(
    http: httpx.Client, caller: dict[str, str], body: dict, message: str
) -> None:
    key = unique_key()
    if body.get("key") == "K":
        body = {**body, "key": key}
    response = http.put("/v1/notes", json=body, headers=caller)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_argument" and message in error["message"] + str(error["details"])
    assert listed(http, caller, key=key) == []


def test_malformed_json_is_400(http: httpx.Client, caller: dict[str, str]) -> None:
    response = http.put("/v1/notes", content=b"{not json", headers={**caller, "Content-Type": "application/json"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_argument"


@pytest.mark.parametrize(
    "query", [{"run": "x"}, {"run": "0"}, {"limit": "1001"}, {"limit": "-1"}, {"cursor": "zzz"}, {"atuhor": "x"}]
)
def test_bad_list_queries_are_400(http: httpx.Client, caller: dict[str, str], query: dict[str, str]) -> None:
    response = http.get("/v1/notes", params=query, headers=caller)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_argument"


def test_inline_body_over_the_limit_is_413(http: httpx.Client, caller: dict[str, str]) -> None:
    key = unique_key()
    response = http.put(
        "/v1/notes", json={"key": key, "run": 1, "name": "n", "text": "x" * (INLINE_LIMIT + 1)}, headers=caller
    )
    assert response.status_code == 413 and response.json()["error"]["code"] == "payload_too_large"
    assert listed(http, caller, key=key) == []


def test_authority_isolation_over_http(
    dev_runtime: dict[str, Any], http: httpx.Client, caller: dict[str, str], other_authority: dict[str, dict[str, str]]
) -> None:
    admin = bearer(dev_runtime["tokens"]["admin"])
    key = unique_key()
    ref = http.put("/v1/notes", json={"key": key, "run": 1, "name": "n", "text": "dev's"}, headers=caller).json()["ref"]
    # An admin mints only inside its own authority.
    denied = http.post("/v1/admin/tokens", json={"authority": "other", "role": "caller"}, headers=admin)
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "forbidden"
    assert http.post("/v1/admin/tokens", json={"authority": "dev", "role": "caller"}, headers=caller).status_code == 403
    # A token of another authority, minted with AWS credentials (the bootstrap path), sees nothing.
    other = other_authority["caller"]
    assert http.get(f"/v1/notes/{ref}", headers=other).status_code == 404
    assert http.delete(f"/v1/notes/{ref}", headers=other).status_code == 404
    assert listed(http, other, key=key) == [] and listed(http, other) == []
    assert http.get(f"/v1/notes/{ref}", headers=caller).json()["text"] == "dev's"


def test_large_upload_over_http(dev_runtime: dict[str, Any], http: httpx.Client, caller: dict[str, str]) -> None:
    key = unique_key()
    body = hashlib.sha256(b"seed").digest() * (((8 * 1024 * 1024) // 32) + 1)  # just over 8 MiB
    coords = {"key": key, "run": 1, "name": "weights", "author": "claude"}
    committed = put_uploaded_note(http, caller, coords, body)
    assert committed.json()["size"] == len(body)
    got = http.get(f"/v1/notes/{committed.json()['ref']}", headers=caller).json()
    assert "text" not in got and "body_b64" not in got
    assert httpx.get(got["download_url"], timeout=60).content == body


def test_upload_over_64_mib_is_413(http: httpx.Client, caller: dict[str, str]) -> None:
    response = http.post(
        "/v1/notes/uploads",
        json={"key": "k", "run": 1, "name": "n", "size": 64 * 1024 * 1024 + 1, "sha256": "0" * 64},
        headers=caller,
    )
    assert response.status_code == 413


def test_sdk_computes_refs_and_moves_large_bodies(dev_runtime: dict[str, Any]) -> None:
    key = unique_key()
    with DovecoteClient(dev_runtime["endpoint"], dev_runtime["tokens"]["worker"]) as client:
        client.put_note(key, 3, "plan", "small", author="w")
        assert client.get_note_at(key, 3, "plan", "w").text == "small"
        big = b"\x00\x01" * (INLINE_LIMIT // 2 + 100)
        client.put_note(key, 3, "blob", big)
        assert client.get_note(client.note_ref(key, 3, "blob")).body == big
        assert [n["name"] for n in client.iter_notes(key=key, limit=1)] == sorted(
            ["plan", "blob"], key=lambda n: client.note_ref(key, 3, n, "w" if n == "plan" else "")
        )
        with pytest.raises(DovecoteError) as caught:
            client.get_note(client.note_ref(key, 3, "absent"))
        assert caught.value.status == 404 and caught.value.code == "not_found"
    assert base64.b64encode(b"") == b""
