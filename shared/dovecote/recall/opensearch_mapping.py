"""The OpenSearch engine's mapping (its one public module of names the other parts use): what is
stored and how a query is asked. The index settings
and mappings (the analysers that mirror FTS5's `porter unicode61` and `trigram`), the query tree
compiled to OpenSearch queries, document ↔ domain conversions, the client built from settings,
and the mapping of OpenSearch failures to domain errors. See dovecote.recall.opensearch."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit, urlunsplit

from dovecote.platform.errors import CommitUnknown, InvalidArgument, Throttled, Unavailable
from dovecote.recall.model import (
    Row,
    SessionInfo,
    Visibility,
)
from dovecote.recall.ports import (
    SearchFilter,
)
from dovecote.recall.query import And, Node, Not, Term

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from dovecote.platform.settings import Settings

# A matched term adds this to a message's score, so the score orders by coverage, then bm25 (a
# message's bm25 summed over 32 terms stays far below it: Lucene's bm25 per term is at most its idf).
COVERAGE_WEIGHT = 1024.0
# A dead generation stays (hidden) this long before its documents are deleted: a reader that took
# its snapshot before the flip may still be reading it. Far longer than any reading call.
GRACE_SECONDS = 120
# A generation still pending after this is abandoned (its writer died; a Lambda lives 15 minutes).
ABANDON_SECONDS = 3600
BULK_BYTES = 4_000_000  # under the 10 MiB request limit of the smallest OpenSearch Service domains
BULK_DOCS = 2000
SCROLL_PAGE = 1000
MAX_WINDOW = 10_000  # index.max_result_window: from + size beyond it is refused
POS_LIMIT = 10_000_000  # rowid = gen × POS_LIMIT + pos: insertion order across sessions
SNIPPET_FRAGMENT = 160
# A state update that loses the race to another writer is retried by the node this many times.
STATE_RETRIES = 20
REFRESH_POLICIES = ("wait_for", "true")

# unicode61's token characters: letters, digits and private-use characters; everything else splits.
_WORD_PATTERN = r"[^\p{L}\p{N}\p{Co}]+"
_WORD_SPLIT = re.compile(r"[^\w]|_")  # a prefix of several tokens (Python's approximation of the above)
# A multi-token prefix (`foo-ba*`) expands its last token to at most this many indexed tokens.
PREFIX_EXPANSIONS = 1000
ANALYSIS = {
    "tokenizer": {
        "recall_words": {"type": "pattern", "pattern": _WORD_PATTERN},
        "recall_trigrams": {"type": "ngram", "min_gram": 3, "max_gram": 3},
    },
    "analyzer": {
        "recall_english": {
            "type": "custom",
            "tokenizer": "recall_words",
            "filter": ["lowercase", "asciifolding", "porter_stem"],
        },
        "recall_trigram": {"type": "custom", "tokenizer": "recall_trigrams", "filter": ["lowercase"]},
    },
}
_KEYWORD = {"type": "keyword"}
_STORED = {"type": "keyword", "index": False, "doc_values": False}
# The session version every versioned document (a message, a session, a session document) belongs to:
# its authority and generation are what `OpenSearchStore.visible` scopes every read by.
_SESSION_VERSION = {"authority": _KEYWORD, "gen": {"type": "long"}, "session_id": _KEYWORD}
MESSAGE_MAPPING: dict[str, Any] = {
    "dynamic": "strict",
    "properties": {
        **_SESSION_VERSION,
        "rowid": {"type": "long"},
        "pos": {"type": "integer"},
        "uuid": _KEYWORD,
        "role": _KEYWORD,
        "kind": _KEYWORD,
        "envelope": {"type": "boolean"},
        "human": {"type": "boolean"},
        "ts": _KEYWORD,  # UTC `Z` with ms, one shape: string order is instant order; absent when unknown
        "text": {
            "type": "text",
            "analyzer": "recall_english",
            "index_options": "offsets",  # the unified highlighter reads offsets instead of re-analysing
            "fields": {"tri": {"type": "text", "analyzer": "recall_trigram"}},
        },
        "project": _KEYWORD,
        "source": _KEYWORD,
        "cwd": _KEYWORD,
        "message_count": {"type": "integer"},
        "subagent": {"type": "boolean"},  # absent on documents written before it: a main session
        # The semantic tier (opensearch_vectors.py): the SHA-256 of the text, on conversation messages
        # only (what the tier embeds and counts), and the model key of the vector the message carries.
        "digest": _KEYWORD,
        "vector_model": _KEYWORD,
    },
}
# The messages index is a k-NN index (a static setting: it cannot be turned on later), so a vector
# field can be added when an embedder is first used; every OpenSearch Service domain has the plugin,
# and the test node loads it (infra/opensearch-node).
MESSAGE_SETTINGS = {"index": {"knn": True}}
# Lucene's HNSW (no native library; filtered searches are exact when the filter selects fewer
# messages than k), cosine similarity. m and ef_construction are the plugin's defaults, written out.
VECTOR_METHOD = {
    "name": "hnsw",
    "engine": "lucene",
    "space_type": "cosinesimil",
    "parameters": {"m": 16, "ef_construction": 100},
}


def vector_field(dimension: int) -> str:
    """One knn_vector field per dimension (a field's dimension is fixed): a model of another
    dimension writes its own field, and `vector_model` says which model wrote what a message holds."""
    return f"vector_{dimension}"


def vector_mapping(dimension: int) -> dict[str, Any]:
    """The mapping that adds a dimension's field to the messages index (PUT _mapping)."""
    field = {"type": "knn_vector", "dimension": dimension, "method": VECTOR_METHOD}
    return {"properties": {vector_field(dimension): field}}


def message_mapping(dimension: int | None) -> dict[str, Any]:
    """The messages index's mapping at creation: with the configured embedder's vector field, if any."""
    if not dimension:
        return MESSAGE_MAPPING
    properties = {**MESSAGE_MAPPING["properties"], **vector_mapping(dimension)["properties"]}
    return {**MESSAGE_MAPPING, "properties": properties}


SESSION_MAPPING = {
    "dynamic": "strict",
    "properties": {
        **_SESSION_VERSION,
        "sid_lower": _KEYWORD,
        "depth": {"type": "integer"},
        "source": _KEYWORD,
        "project": _KEYWORD,
        "cwd": _KEYWORD,
        "parent_session": _KEYWORD,
        "agent": _STORED,
        "summary": _STORED,
        "message_count": {"type": "integer"},
        "started_at": _KEYWORD,
        "last_at": _KEYWORD,
        "sha256": _STORED,
        "spawn_key": _KEYWORD,
        "spawn_keys": _KEYWORD,
        "documented": {"type": "boolean"},
        # The state document's body: read whole by id, never searched (no mapping per session id).
        "state": {"type": "object", "enabled": False},
    },
}
# Session documents (the `session-doc` ranker, ranking.py): one per session version,
# `<authority>|<gen>|d`, written in the same bulk as its messages, so it follows the generations as
# they do. The session-level filters are copied onto it, as onto each message.
DOCUMENT_MAPPING = {
    "dynamic": "strict",
    "properties": {
        **_SESSION_VERSION,
        "project": _KEYWORD,
        "source": _KEYWORD,
        "cwd": _KEYWORD,
        "message_count": {"type": "integer"},
        "subagent": {"type": "boolean"},
        "text": {"type": "text", "analyzer": "recall_english"},
    },
}
# Added to the sessions index of a deployment made before the documents (put_mapping on first use):
# a session version whose document was written carries `documented: true`; the backfill looks for the
# others.
DOCUMENTED_FIELD = {"properties": {"documented": {"type": "boolean"}}}
TOPIC_MAPPING = {
    "dynamic": "strict",
    "properties": {
        "authority": _KEYWORD,
        "session_id": _KEYWORD,
        "start_uuid": _KEYWORD,
        "label": {"type": "text", "analyzer": "recall_english"},
        "seq": {"type": "long"},
    },
}

ROW_FIELDS = ["session_id", "pos", "uuid", "role", "kind", "text", "ts", "envelope", "human"]
SESSION_FIELDS = [
    "session_id",
    "source",
    "project",
    "cwd",
    "message_count",
    "started_at",
    "last_at",
    "parent_session",
    "agent",
    "summary",
    "sha256",
    "spawn_key",
    "spawn_keys",
]

# ---- the query language, compiled ------------------------------------------------------------------


def leaf(term: Term, field: str) -> dict[str, Any]:
    """One term over `field`: a phrase of its analysed tokens, like an FTS5 quoted string. A prefix
    (`zephyrc*`) is FTS5's: the query text is analysed (stemmed) and its last token matches every
    indexed token it starts (match_bool_prefix: no expansion limit on that token); on the trigram
    subfield a prefix is a substring, as in SQLite's trigram table."""
    if term.prefix and not field.endswith(".tri"):
        if _WORD_SPLIT.search(term.text.strip()):
            return {"match_phrase_prefix": {field: {"query": term.text, "max_expansions": PREFIX_EXPANSIONS}}}
        return {"match_bool_prefix": {field: {"query": term.text}}}
    return {"match_phrase": {field: {"query": term.text}}}


def compile_node(node: Node, field: str, keep: Callable[[Term], bool] | None = None) -> dict[str, Any] | None:
    """The query tree as an OpenSearch query over `field` (the same shape as query.to_fts5). Every
    term is a phrase of its analysed tokens, like an FTS5 quoted string. `keep` drops leaves the
    field cannot match (trigrams need three characters): an OR loses the leaf, an AND or the kept
    side of a NOT becomes unmatchable."""
    if isinstance(node, Term):
        if keep is not None and not keep(node):
            return None
        return leaf(node, field)
    if isinstance(node, Not):
        left = compile_node(node.keep, field, keep)
        right = compile_node(node.drop, field, keep)
        if left is None:
            return None
        return left if right is None else {"bool": {"must": [left], "must_not": [right]}}
    parts = [compile_node(item, field, keep) for item in node.items]
    if isinstance(node, And):
        if any(p is None for p in parts):
            return None
        return {"bool": {"must": parts}}
    kept = [p for p in parts if p is not None]
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else {"bool": {"should": kept, "minimum_should_match": 1}}


def term_clause(index: int, term: Term, field: str) -> dict[str, Any]:
    """One positive term, named `t<index>` (matched_queries: coverage), scored bm25 + the weight."""
    return {
        "function_score": {
            "query": leaf(term, field),
            "functions": [{"weight": COVERAGE_WEIGHT}],
            "boost_mode": "sum",
            "_name": f"t{index}",
        }
    }


def visibility_query(visibility: Visibility) -> dict[str, Any]:
    """Visibility.shows as a query: text always, thinking and tools/envelopes when asked."""
    shown: list[dict[str, Any]] = [{"bool": {"filter": [{"term": {"kind": "text"}}, {"term": {"envelope": False}}]}}]
    if visibility.thinking:
        shown.append({"bool": {"filter": [{"term": {"kind": "thinking"}}, {"term": {"envelope": False}}]}})
    if visibility.tools:
        shown.append({"bool": {"should": [{"term": {"kind": "tool"}}, {"term": {"envelope": True}}]}})
    return {"bool": {"should": shown, "minimum_should_match": 1}}


def filter_clauses(f: SearchFilter) -> list[dict[str, Any]]:
    """SearchFilter.matches pushed down (the session's fields are on every message)."""
    out = [visibility_query(f.visibility)]
    if f.role:
        out.append({"term": {"role": f.role}})
    bounds = {}
    if f.since:
        bounds["gte"] = f.since
    if f.before:
        bounds["lte"] = f.before
    if bounds:  # a message without a time has no `ts` and never passes a bound
        out.append({"range": {"ts": bounds}})
    return out + document_filters(f)


def document_filters(f: SearchFilter) -> list[dict[str, Any]]:
    """The session-level part of SearchFilter.matches (copied onto each message and each session
    document)."""
    out: list[dict[str, Any]] = []
    if f.min_messages:
        out.append({"range": {"message_count": {"gte": f.min_messages}}})
    if f.project:
        out.append({"term": {"project": f.project}})
    if f.source:
        out.append({"term": {"source": f.source}})
    if not f.subagents:
        out.append({"bool": {"must_not": [{"term": {"subagent": True}}]}})
    if f.places is not None:
        out.append(_places(f.places))
    return out


def _places(places: frozenset[tuple[str, str]]) -> dict[str, Any]:
    return {
        "bool": {
            "should": [
                {"bool": {"filter": [{"term": {"project": p}}, {"term": {"cwd": c}}]}} for p, c in sorted(places)
            ],
            "minimum_should_match": 1,
        }
    }


# ---- documents -------------------------------------------------------------------------------------


def row_of(source: dict[str, Any]) -> Row:
    return Row(
        session_id=source["session_id"],
        pos=int(source["pos"]),
        uuid=source["uuid"],
        role=source["role"],
        kind=source["kind"],
        text=source["text"],
        timestamp=source.get("ts") or "",
        envelope=bool(source.get("envelope")),
        human=bool(source.get("human")),
    )


def session_info_of(source: dict[str, Any]) -> SessionInfo:
    return SessionInfo(
        session_id=source["session_id"],
        source=source["source"],
        project=source["project"],
        cwd=source["cwd"],
        message_count=int(source["message_count"]),
        started_at=source["started_at"],
        last_at=source["last_at"],
        parent_session=source.get("parent_session"),
        agent=source.get("agent"),
        summary=source.get("summary") or "",
        sha256=source.get("sha256") or "",
        spawn_key=source.get("spawn_key"),
        spawn_keys=tuple(source.get("spawn_keys") or ()),
    )


def sources_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [hit["_source"] for hit in response["hits"]["hits"]]


def total_of(response: dict[str, Any]) -> int:
    return int(response["hits"]["total"]["value"])


def fragment_snippet(text: str, fragment: str) -> str:
    """A highlighted fragment, with `…` where it cuts the message (as FTS5's snippet marks it)."""
    fragment = fragment.strip()
    at = text.find(fragment)
    if at < 0:
        return fragment
    return ("…" if text[:at].strip() else "") + fragment + ("…" if text[at + len(fragment) :].strip() else "")


# ---- the client ------------------------------------------------------------------------------------


def make_client(settings: Settings) -> OpenSearch:
    """From settings: SigV4 (botocore's credentials; service `es` for a domain, `aoss` for a
    serverless collection) when `opensearch_aws_service` is set; otherwise the URL, with basic auth
    from `opensearch_username`/`opensearch_password` or from the URL's userinfo."""
    from opensearchpy import OpenSearch, Urllib3HttpConnection

    if not settings.opensearch_url:
        raise ValueError("opensearch_url is not set")
    parts = urlsplit(settings.opensearch_url)
    host = parts.hostname or ""
    netloc = host if ":" not in host else f"[{host}]"
    if parts.port:
        netloc += f":{parts.port}"
    url = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    options: dict[str, Any] = {
        "hosts": [url],
        "connection_class": Urllib3HttpConnection,
        "timeout": 20,
        "max_retries": 2,
        "retry_on_timeout": False,  # a timed-out write may have landed: the caller decides
        "http_compress": True,
    }
    if settings.opensearch_aws_service:
        import boto3
        from opensearchpy import Urllib3AWSV4SignerAuth

        credentials = boto3.session.Session().get_credentials()
        if credentials is None:
            raise ValueError("no AWS credentials to sign OpenSearch requests with")
        options["http_auth"] = Urllib3AWSV4SignerAuth(credentials, settings.region, settings.opensearch_aws_service)
    elif settings.opensearch_username:
        options["http_auth"] = (settings.opensearch_username, settings.opensearch_password or "")
    elif parts.username:
        options["http_auth"] = (unquote(parts.username), unquote(parts.password or ""))
    return OpenSearch(**options)


@contextmanager
def engine_errors(*, write: bool = False, query: bool = False) -> Iterator[None]:
    """OpenSearch failures as domain errors: 429 is `throttled`; a lost connection or a 5xx is
    `unavailable` for a read and `commit_unknown` for a write (it may have landed); a 400 on a
    search is the query's fault (`invalid_argument`)."""
    from opensearchpy.exceptions import ConnectionError as OSConnectionError
    from opensearchpy.exceptions import TransportError

    try:
        yield
    except OSConnectionError as exc:  # ConnectionTimeout and SSLError included
        cls = CommitUnknown if write else Unavailable
        raise cls("the search engine did not answer; retry", cause=type(exc).__name__) from exc
    except TransportError as exc:
        status = exc.status_code if isinstance(exc.status_code, int) else 0
        if status == 429:
            raise Throttled("the search engine is busy; retry with backoff") from exc
        if query and status == 400:
            raise InvalidArgument(f"the query cannot be searched: {exc.error}", field="q") from None
        if status >= 500 or status == 0:
            cls = CommitUnknown if write else Unavailable
            raise cls("the search engine failed; retry", status=status, error=str(exc.error)) from exc
        raise
