"""The test OpenSearch node is a real OpenSearch 2.19 with the modules recall relies on.

Each assertion needs one module: the `english` analyzer and the `ngram` tokenizer come from
analysis-common, `script` queries from lang-painless, HTTP itself from transport-netty4. Collapse
and highlighting are core search features that recall's ranking and excerpts use.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

# (id, session, turn, text)
TURNS = (
    ("t1", "s1", 1, "We reconciled the ledger against the bank statement yesterday."),
    ("t2", "s1", 2, "The ledger still shows one unmatched transfer."),
    ("t3", "s1", 3, "Reconciliation of the transfer is done."),
    ("t4", "s2", 1, "The deploy pipeline failed on the lint step."),
    ("t5", "s2", 2, "Lint passes now; the pipeline is green."),
    ("t6", "s3", 1, "Who reconciled the vendor invoices in March?"),
)

INDEX_BODY = {
    "settings": {
        "number_of_shards": 1,
        "analysis": {
            "tokenizer": {
                "trigram": {"type": "ngram", "min_gram": 3, "max_gram": 3, "token_chars": ["letter", "digit"]}
            },
            "analyzer": {"trigram": {"type": "custom", "tokenizer": "trigram", "filter": ["lowercase"]}},
        },
    },
    "mappings": {
        "properties": {
            "session": {"type": "keyword"},
            "turn": {"type": "integer"},
            "text": {"type": "text", "analyzer": "english", "fields": {"tri": {"type": "text", "analyzer": "trigram"}}},
        }
    },
}


@pytest.fixture(scope="module")
def client(opensearch_url: str) -> Iterator[OpenSearch]:
    search = OpenSearch(hosts=[opensearch_url], timeout=30)
    yield search
    search.close()


@pytest.fixture(scope="module")
def index(client: OpenSearch) -> Iterator[str]:
    # The node is shared by the whole run (and both xdist workers): a name of our own.
    name = f"smoke-{uuid.uuid4().hex[:12]}"
    client.indices.create(index=name, body=INDEX_BODY)
    for doc_id, session, turn, text in TURNS:
        client.index(index=name, id=doc_id, body={"session": session, "turn": turn, "text": text})
    client.indices.refresh(index=name)
    yield name
    client.indices.delete(index=name)


def _ids(response: dict[str, Any]) -> set[str]:
    return {hit["_id"] for hit in response["hits"]["hits"]}


def test_the_node_is_opensearch_2_19_and_a_new_index_is_green(client: OpenSearch, index: str) -> None:
    assert client.info()["version"]["number"] == "2.19.6"
    health = client.cluster.health(index=index, wait_for_status="green")
    # green on one node means the index has no replica to leave unassigned
    assert health["status"] == "green"
    assert client.indices.get_settings(index=index)[index]["settings"]["index"]["number_of_replicas"] == "0"


def test_english_analyzer_stems_reconciling_to_reconciled(client: OpenSearch, index: str) -> None:
    response = client.search(index=index, body={"query": {"match": {"text": "reconciling"}}})
    # reconcil* in t1 (reconciled) and t6 (reconciled); "Reconciliation" stems to "reconcili"
    assert _ids(response) == {"t1", "t6"}
    tokens = client.indices.analyze(index=index, body={"analyzer": "english", "text": "reconciling ledgers"})
    assert [token["token"] for token in tokens["tokens"]] == ["reconcil", "ledger"]


def test_trigram_subfield_matches_a_fragment(client: OpenSearch, index: str) -> None:
    tokens = client.indices.analyze(index=index, body={"analyzer": "trigram", "text": "Lint"})
    assert [token["token"] for token in tokens["tokens"]] == ["lin", "int"]
    response = client.search(
        index=index,
        body={"query": {"match": {"text.tri": {"query": "pipelin", "minimum_should_match": "100%"}}}},
    )
    assert _ids(response) == {"t4", "t5"}


def test_collapse_on_session_returns_one_hit_per_session(client: OpenSearch, index: str) -> None:
    response = client.search(
        index=index,
        body={
            "query": {"match": {"text": "ledger reconciled transfer pipeline invoices"}},
            "collapse": {"field": "session"},
            "size": 10,
        },
    )
    sessions = [hit["fields"]["session"][0] for hit in response["hits"]["hits"]]
    assert sorted(sessions) == ["s1", "s2", "s3"]
    assert response["hits"]["total"]["value"] == 6  # the total still counts turns, not groups


def test_highlight_returns_a_snippet_around_the_stemmed_match(client: OpenSearch, index: str) -> None:
    response = client.search(
        index=index,
        body={
            "query": {"match": {"text": "reconciling"}},
            "highlight": {"fields": {"text": {"fragment_size": 40, "number_of_fragments": 1}}},
        },
    )
    snippets = {hit["_id"]: hit["highlight"]["text"][0] for hit in response["hits"]["hits"]}
    assert "<em>reconciled</em>" in snippets["t1"]
    assert "<em>reconciled</em>" in snippets["t6"]


def test_painless_script_query_and_script_field_run(client: OpenSearch, index: str) -> None:
    response = client.search(
        index=index,
        body={
            "query": {
                "script": {
                    "script": {"lang": "painless", "source": "doc['turn'].value >= params.min", "params": {"min": 2}}
                }
            },
            "script_fields": {"turn_x10": {"script": {"lang": "painless", "source": "doc['turn'].value * 10"}}},
            "size": 10,
        },
    )
    assert _ids(response) == {"t2", "t3", "t5"}
    assert sorted(hit["fields"]["turn_x10"][0] for hit in response["hits"]["hits"]) == [20, 20, 30]
