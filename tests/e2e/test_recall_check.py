"""`POST /v1/transcripts/check` against `dovecote dev`, and what it fixes: `recall push` trusts the server,
not its local memory of it. After `dovecote dev --fresh` the same files are pushed again (they used to
be reported "unchanged" while search found nothing)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import DATA, ROOT
from tests.e2e.conftest import bearer, start_dev
from tests.support.authorities import fresh_authority

SESSION = DATA / "transcripts" / "claude-code" / "lanegrid-agtrace__claude_session.jsonl"


def test_the_check_answers_what_this_authority_lacks(dev_runtime: dict[str, Any], http: httpx.Client) -> None:
    own = fresh_authority(dev_runtime, "check")
    raw = SESSION.read_bytes()
    digest, other = hashlib.sha256(raw).hexdigest(), "0" * 64
    caller = bearer(own.token("caller"))
    before = http.post("/v1/transcripts/check", json={"sha256": [digest, other]}, headers=caller)
    assert before.status_code == 200, before.text
    assert before.json() == {"unknown": [digest, other]}
    ingest = http.post("/v1/transcripts", json={"format": "claude-code-jsonl", "jsonl": raw.decode()}, headers=caller)
    assert ingest.status_code == 200, ingest.text
    after = http.post(
        "/v1/transcripts/check", json={"sha256": [digest, other]}, headers=bearer(own.token("worker", "w1"))
    )
    assert after.json() == {"unknown": [other]}
    elsewhere = fresh_authority(dev_runtime, "check")
    lacking = http.post("/v1/transcripts/check", json={"sha256": [digest]}, headers=bearer(elsewhere.token("caller")))
    assert lacking.json() == {"unknown": [digest]}
    bad = http.post("/v1/transcripts/check", json={"sha256": ["not-hex"]}, headers=caller)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_argument"
    assert http.post("/v1/transcripts/check", json={"sha256": [digest]}).status_code == 401


def push(runtime: dict[str, Any], tree: Path, state: Path, token: str = "") -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOVECOTE_", "AWS_"))}
    env |= {"DOVECOTE_ENDPOINT": runtime["endpoint"], "DOVECOTE_TOKEN": token or runtime["tokens"]["caller"]}
    done = subprocess.run(
        [sys.executable, "-m", "dovecote.cli", "recall", "push", str(tree), "--state", str(state), "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_push_after_a_fresh_start_sends_everything_again(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(SESSION, tree / "session.jsonl")
    state = tmp_path / "state.json"
    data = tmp_path / "data"
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
    with start_dev(tmp_path / "first", "--data", str(data)) as first:
        assert push(first, tree, state)["pushed"] == 1
        assert (push(first, tree, state)["pushed"], push(first, tree, state)["unchanged"]) == (0, 1)
    with start_dev(tmp_path / "second", "--data", str(data), "--fresh") as second:
        again = push(second, tree, state)
        assert (again["pushed"], again["unchanged"]) == (1, 0), again
        found = httpx.get(
            second["endpoint"] + "/v1/recall/search",
            params={"q": "hoge"},
            headers=bearer(second["tokens"]["caller"]),
            timeout=30,
        )
        assert found.json()["count"] == 1


def test_the_sample_transcript_the_readme_offers_is_found(
    dev_runtime: dict[str, Any], http: httpx.Client, tmp_path: Path
) -> None:
    """The quickstart: `recall push examples/transcripts` for a reader with no transcripts of their own, then
    its search block (`recall search "flaky test retry" --since 2026-01-01`) finds the session."""
    own = fresh_authority(dev_runtime, "sample")
    sent = push(dev_runtime, ROOT / "examples" / "transcripts", tmp_path / "state.json", own.token("caller"))
    assert sent["pushed"] == 1, sent
    found = http.get(
        "/v1/recall/search",
        params={"q": "flaky test retry", "since": "2026-01-01"},
        headers=bearer(own.token("caller")),
    )
    assert found.status_code == 200 and found.json()["count"] == 1, found.text
    assert found.json()["results"][0]["session_id"].startswith("5f0c1e2a")
