"""The recall HTTP tests again, against `dovecote dev` started with `DOVECOTE_OPENSEARCH_URL`: the
local runtime's API and transcript indexer on the OpenSearch engine (a real node,
tests/opensearch_fixture.py), with indices of this module's own.

The tests are tests/e2e/test_recall_http.py's, imported here so they run a second time with this
module's `dev_runtime` (and `other_authority`, which depends on it), and the recall routes' schema
fuzz with the checks of tests/support/fuzzing.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from opensearchpy import OpenSearch

from functions.admin_api.handler import openapi_document
from tests.conftest import examples
from tests.e2e.conftest import bearer, mint_dev_token, start_dev
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
from tests.support.fuzzing import DevBearer, conforms


@pytest.fixture(scope="module")
def dev_runtime(tmp_path_factory: pytest.TempPathFactory, opensearch_url: str) -> Iterator[dict[str, Any]]:
    prefix = f"e2e-{uuid.uuid4().hex[:12]}"
    settings = {"DOVECOTE_OPENSEARCH_URL": opensearch_url, "DOVECOTE_OPENSEARCH_INDEX_PREFIX": prefix}
    with start_dev(tmp_path_factory.mktemp("dev-opensearch"), settings=settings) as runtime:
        yield {**runtime, "prefix": prefix}
    client = OpenSearch(hosts=[opensearch_url], timeout=30)
    client.indices.delete(index=f"{prefix}-*", ignore_unavailable=True)
    client.close()


# The recall routes' schema fuzz, on this engine: the same checks as tests/e2e/fuzz/ (tests/support/fuzzing.py).
recall_schema = schemathesis.openapi.from_dict(openapi_document()).include(path_regex="^/v1/(recall|transcripts)")
recall_schema.auth()(DevBearer)


@recall_schema.parametrize()
@settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))
def test_recall_conforms_to_its_schema_on_opensearch(case: Any, dev_runtime: dict[str, Any]) -> None:
    conforms(case, dev_runtime)


@pytest.fixture(scope="module")
def other_authority(dev_runtime: dict[str, Any]) -> dict[str, dict[str, str]]:
    """A second authority's caller token, minted by this module's runtime (`dovecote dev token`)."""
    return {"caller": bearer(mint_dev_token(dev_runtime, "other", "caller"))}


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
