"""The OpenSearch engine without a node: how settings become a client (SigV4 for a domain or a
serverless collection, basic auth from settings or the URL), the engine seam, the query compiler
and the snippet marks."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from dovecote.platform.settings import Settings, SettingsError
from dovecote.recall.engines import open_search_index
from dovecote.recall.opensearch import OpenSearchIndex
from dovecote.recall.opensearch_mapping import compile_node, fragment_snippet, make_client
from dovecote.recall.query import And, Not, Or, Term, parse_query


def connection(settings: Settings) -> Any:
    return make_client(settings).transport.get_connection()


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_a_url_with_userinfo_gives_basic_auth_and_a_clean_host() -> None:
    conn = connection(Settings(opensearch_url="https://admin:p%40ss@search.example.com:9200"))
    assert conn.host == "https://search.example.com:9200"
    assert conn.headers["authorization"] == basic("admin", "p@ss")


def test_username_and_password_settings_win_over_the_url() -> None:
    conn = connection(
        Settings(
            opensearch_url="https://admin:old@search.example.com", opensearch_username="reader", opensearch_password="x"
        )
    )
    assert conn.host == "https://search.example.com:443" and conn.headers["authorization"] == basic("reader", "x")


def test_a_plain_url_sends_no_credentials() -> None:
    conn = connection(Settings(opensearch_url="http://127.0.0.1:9200"))
    assert "authorization" not in conn.headers and conn.http_auth is None


@pytest.mark.parametrize("service", ["es", "aoss"])
def test_sigv4_signs_for_a_domain_or_a_serverless_collection(service: str) -> None:
    settings = Settings(
        opensearch_url="https://search-x.us-east-1.es.amazonaws.com",
        opensearch_aws_service=service,
        opensearch_username="ignored",
        region="eu-west-1",
    )
    conn = connection(settings)
    assert "authorization" not in conn.headers  # no basic auth beside the signature
    signed = conn.http_auth("GET", "https://search-x.us-east-1.es.amazonaws.com/_search", b"{}")
    # the test environment's fake credentials (tests/conftest.py), this region, this service
    assert "Credential=testing/" in signed["Authorization"]
    assert f"/eu-west-1/{service}/aws4_request" in signed["Authorization"]
    assert "X-Amz-Content-SHA256" in signed


def test_settings_refuse_an_unknown_signing_service_and_a_bad_prefix() -> None:
    with pytest.raises(SettingsError):
        Settings(opensearch_url="https://x", opensearch_aws_service="s3")  # type: ignore[arg-type]
    for prefix in ("Upper", "-dash", "a\n", "a b"):
        with pytest.raises(SettingsError):
            Settings(opensearch_index_prefix=prefix)


def test_the_engine_seam_picks_opensearch_when_a_url_is_set() -> None:
    engine = open_search_index(Settings(opensearch_url="http://127.0.0.1:9", opensearch_index_prefix="team-a"))
    assert isinstance(engine, OpenSearchIndex) and engine.name == "opensearch"
    assert (engine.store.messages, engine.store.sessions, engine.store.topics) == (
        "team-a-messages",
        "team-a-sessions",
        "team-a-topics",
    )


PROBE = """
import sys
from dovecote.platform.settings import Settings, SettingsError
from dovecote.recall.engines import recall_service
service = recall_service(Settings(opensearch_url="http://127.0.0.1:9", opensearch_aws_service="es"))
before = "opensearchpy" in sys.modules
print(before, service.index.name, "opensearchpy" in sys.modules)
"""


def test_the_recall_composition_root_opens_the_engine_on_its_first_use() -> None:
    """A first request that never searches (a check, an upload URL) loads no opensearch-py."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True)
    assert result.stdout.split() == ["False", "opensearch", "True"]


# ---- the query compiler ---------------------------------------------------------------------------------


def phrase(text: str, field: str = "text") -> dict[str, Any]:
    return {"match_phrase": {field: {"query": text}}}


def long_enough(term: Term) -> bool:
    return len(term.text) >= 3


@pytest.mark.parametrize(
    ("node", "keep", "want"),
    [
        (Term("deploy"), None, phrase("deploy")),
        (Term("blue heron", phrase=True), None, phrase("blue heron")),
        (
            Or((Term("a1"), Term("deploy"))),
            None,
            {"bool": {"should": [phrase("a1"), phrase("deploy")], "minimum_should_match": 1}},
        ),
        (And((Term("deploy"), Term("rollback"))), None, {"bool": {"must": [phrase("deploy"), phrase("rollback")]}}),
        (
            Not(Term("deploy"), Term("rollback")),
            None,
            {"bool": {"must": [phrase("deploy")], "must_not": [phrase("rollback")]}},
        ),
        # the trigram tier: a two-character leaf cannot match
        (Or((Term("ab"), Term("deploy"))), long_enough, phrase("deploy")),
        (And((Term("ab"), Term("deploy"))), long_enough, None),
        (Not(Term("deploy"), Term("ab")), long_enough, phrase("deploy")),
        (Not(Term("ab"), Term("deploy")), long_enough, None),
    ],
)
def test_compile_node(node: Any, keep: Any, want: dict[str, Any] | None) -> None:
    assert compile_node(node, "text", keep) == want


def test_a_parsed_boolean_query_compiles_to_the_same_tree() -> None:
    query = parse_query("(deploy || rollback) !canary")
    assert query is not None
    assert compile_node(query.root, "text.tri") == {
        "bool": {
            "must": [
                {
                    "bool": {
                        "should": [phrase("deploy", "text.tri"), phrase("rollback", "text.tri")],
                        "minimum_should_match": 1,
                    }
                }
            ],
            "must_not": [phrase("canary", "text.tri")],
        }
    }


@pytest.mark.parametrize(
    ("text", "fragment", "want"),
    [
        ("postgres vacuum answer", "postgres vacuum answer", "postgres vacuum answer"),
        ("one two three four", "two three", "…two three…"),
        ("one two three", "two three", "…two three"),
        ("one two three", "one two", "one two…"),
        ("  padded  ", "padded", "padded"),
        ("text", "not a substring", "not a substring"),
    ],
)
def test_fragment_snippet_marks_the_cuts(text: str, fragment: str, want: str) -> None:
    assert fragment_snippet(text, fragment) == want
