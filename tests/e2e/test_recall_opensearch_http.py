"""The recall HTTP tests again, against `dovecote dev` started with `DOVECOTE_OPENSEARCH_URL`: the
local runtime's API and transcript indexer on the OpenSearch engine (a real node,
tests/opensearch_fixture.py), with indices of this module's own.

The tests are tests/e2e/test_recall_http.py's and the recall schema fuzz, imported here so they run a
second time with this module's `dev_runtime` (and `other_authority`, which depends on it); the runtime start and the
token minting repeat tests/e2e/conftest.py's with the engine's variables added.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import ROOT
from tests.e2e.conftest import _free_port, bearer
from tests.e2e.test_recall_http import (  # noqa: F401 - collected again, with this module's runtime
    caller,
    test_an_ambiguous_prefix_lists_candidates,
    test_authorities_are_isolated,
    test_bad_input_and_unknown_sessions,
    test_bad_transcripts_are_refused,
    test_claude_session_with_a_subagent_thread,
    test_ingest_search_read_outline,
    test_rebuild_is_admin_only,
    test_topics,
    test_upload_is_indexed_asynchronously,
)
from tests.e2e.test_recall_schemathesis import test_recall_conforms_to_its_schema  # noqa: F401 - no 5xx here either


@pytest.fixture(scope="module")
def dev_runtime(tmp_path_factory: pytest.TempPathFactory, opensearch_url: str) -> Iterator[dict[str, Any]]:
    prefix = f"e2e-{uuid.uuid4().hex[:12]}"
    tokens_file = tmp_path_factory.mktemp("dev-opensearch") / "dev-tokens.json"
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DOVECOTE_"))}
    env.update({"DOVECOTE_OPENSEARCH_URL": opensearch_url, "DOVECOTE_OPENSEARCH_INDEX_PREFIX": prefix})
    process = subprocess.Popen(
        [sys.executable, "-m", "dovecote.cli", "dev", "--port", str(port), "--tokens-file", str(tokens_file)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"dovecote dev exited early:\n{process.stdout.read() if process.stdout else ''}")
        if tokens_file.exists():
            try:
                if httpx.get(endpoint + "/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
        time.sleep(0.2)
    else:
        process.kill()
        raise RuntimeError("dovecote dev (OpenSearch) did not become ready in 90 s")
    data = json.loads(Path(tokens_file).read_text())
    yield {"endpoint": data["endpoint"], "tokens": data["tokens"], "tokens_file": tokens_file, "prefix": prefix}
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
    client = OpenSearch(hosts=[opensearch_url], timeout=30)
    client.indices.delete(index=f"{prefix}-*", ignore_unavailable=True)
    client.close()


@pytest.fixture(scope="module")
def other_authority(dev_runtime: dict[str, Any]) -> dict[str, dict[str, str]]:
    """A second authority's tokens, minted the bootstrap way (straight into the tokens table)."""
    upload = httpx.post(
        dev_runtime["endpoint"] + "/v1/notes/uploads",
        json={"key": "probe", "run": 1, "name": "n", "size": 1, "sha256": "0" * 64},
        headers=bearer(dev_runtime["tokens"]["caller"]),
    )
    url = httpx.URL(upload.json()["upload_url"])  # names the dev runtime's in-process moto endpoint
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": f"{url.scheme}://{url.host}:{url.port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    minted = subprocess.run(
        [sys.executable, "-m", "dovecote.cli", "tokens", "bootstrap", "--authority", "other"]
        + ["--role", "caller", "--table", "dovecote-tokens"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return {"caller": bearer(json.loads(minted.stdout)["token"])}


def test_the_runtime_answers_from_opensearch(
    http: httpx.Client, dev_runtime: dict[str, Any], opensearch_url: str
) -> None:
    headers = bearer(dev_runtime["tokens"]["caller"])
    session_id = "os-" + uuid.uuid4().hex
    word = "w" + uuid.uuid4().hex[:10]
    body = {
        "source": "e2e",
        "project": "e2e",
        "session_id": session_id,
        "messages": [
            {"uuid": str(uuid.uuid4()), "role": "user", "text": f"{word} here", "timestamp": "2025-06-01T00:00:00Z"}
        ],
    }
    assert http.post("/v1/transcripts", json=body, headers=headers).status_code == 200
    envelope = http.get("/v1/recall/search", params={"q": word}, headers=headers).json()
    assert envelope["store"] == "opensearch" and envelope["count"] == 1
    # the documents are in this runtime's indices on the node
    client = OpenSearch(hosts=[opensearch_url], timeout=30)
    try:
        found = client.search(
            index=f"{dev_runtime['prefix']}-messages", body={"query": {"term": {"session_id": session_id}}}
        )
    finally:
        client.close()
    assert found["hits"]["total"]["value"] == 1
