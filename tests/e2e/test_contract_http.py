"""What the review's fuzzer found declared but not enforced (issue 15 item 11), over real HTTP: each
refusal is a 400 with the field named, and stores nothing."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.e2e.conftest import bearer

SAFE_MAX = 2**53 - 1


def _caller(dev_runtime: dict[str, Any]) -> dict[str, str]:
    return bearer(dev_runtime["tokens"]["caller"])


def test_a_run_past_2_53_is_refused_and_stores_nothing(http: httpx.Client, dev_runtime: dict[str, Any]) -> None:
    caller = _caller(dev_runtime)
    key = f"run-{uuid.uuid4().hex}"
    for run in (SAFE_MAX + 1, 2**63 - 1):
        response = http.put("/v1/notes", json={"key": key, "run": run, "name": "n", "text": "x"}, headers=caller)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["details"]["field"] == "run"
        upload = http.post(
            "/v1/notes/uploads",
            json={"key": key, "run": run, "name": "n", "size": 1, "sha256": "0" * 64},
            headers=caller,
        )
        assert upload.status_code == 400, upload.text
        listed = http.get("/v1/notes", params={"run": run}, headers=caller)
        assert listed.status_code == 400, listed.text
        assert listed.json()["error"]["details"]["field"] == "run"
    assert http.get("/v1/notes", params={"key": key}, headers=caller).json()["items"] == []
    # The declared maximum itself is a run like any other.
    stored = http.put("/v1/notes", json={"key": key, "run": SAFE_MAX, "name": "n", "text": "x"}, headers=caller)
    assert stored.status_code == 200, stored.text
    listed = http.get("/v1/notes", params={"key": key, "run": SAFE_MAX}, headers=caller).json()["items"]
    assert [i["run"] for i in listed] == [SAFE_MAX]


def test_an_inline_put_with_a_size_is_refused(http: httpx.Client, dev_runtime: dict[str, Any]) -> None:
    caller = _caller(dev_runtime)
    key = f"size-{uuid.uuid4().hex}"
    for size in (999, 3):  # contradicting the body, and agreeing with it: size is an upload's
        response = http.put(
            "/v1/notes", json={"key": key, "run": 1, "name": "n", "text": "abc", "size": size}, headers=caller
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"]["details"]["field"] == "size"
    assert http.get("/v1/notes", params={"key": key}, headers=caller).json()["items"] == []


def test_control_characters_in_a_transcript_upload_project_are_refused(
    http: httpx.Client, dev_runtime: dict[str, Any]
) -> None:
    caller = _caller(dev_runtime)
    for field in ("project", "project_folder"):
        response = http.post(
            "/v1/transcripts/uploads",
            json={"format": "claude-code-jsonl", field: "acme\n12:00 forged line"},
            headers=caller,
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "invalid_argument"
        assert field in response.json()["error"]["message"]
    # (A tab is allowed: tests/unit/test_contract.py. Not asserted here: a pending upload would mark the
    # authority's recall scope stale for the other tests sharing this runtime.)
