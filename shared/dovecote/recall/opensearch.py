"""The cloud SearchIndex: OpenSearch (opensearch-py), held to the same contract and suite as SQLite FTS5.

Layout: three indices per deployment, shared by every authority (`<prefix>-messages`,
`<prefix>-sessions`, `<prefix>-topics`).
- messages: one document per indexed message, `<authority>|<gen>|<pos>`. `text` is analysed like the
  reference's `porter unicode61` (split on everything that is not a letter, a digit or a private-use
  character, lowercased, accents folded, Porter-stemmed: English stems, so "reconciling" finds
  "reconciled"), with a `text.tri` subfield of character trigrams (the substring fallback, as
  SQLite's trigram table: a phrase of trigrams is a literal substring, spaces included). The
  session's filterable fields (project, source, cwd, message count) are copied onto each message,
  so every SearchFilter is pushed down without a join.
- sessions: one document per session version, `<authority>|<gen>|s`, plus one state document per
  authority, `<authority>|state` (below).
- topics: one document per (authority, session, start uuid), upserted by add_topic.

Authority isolation: one `authority` keyword on every document, and every request is built by the
one function that adds the authority term (`_visible`/`_owned`), with `routing=<authority>` so an
authority's documents share one shard. Chosen over an index per authority because the number of
authorities is unbounded and every index costs shards, mappings and cluster state (a domain holds
at most 1,000 shards per node; a serverless collection has an index quota), while one shard per
authority makes every aggregation below exact. Ids start with the authority, so nothing of one
authority can overwrite another's. Matching never crosses authorities; bm25 statistics are
per shard, so another authority's documents on the same shard shift idf (the order of hits, never
which documents match): an index per authority would be the price of removing that.

Atomic replace (what readers see): every session version is a generation `gen` allocated from the
authority's state document, which also lists the hidden generations (`pending`: being written;
`dead`: replaced, awaiting deletion) and the floor below which everything is gone
(delete_authority). Each reading method GETs the state once (a real-time GET: never stale) and
filters every request it makes by `floor <= gen < next_gen`, gen not hidden; so within one call a
session is one whole version. replace_session:
1. allocates gen g (one scripted update of the state: g pending);
2. bulk-indexes the session document and its messages under g, the last request with
   `refresh=wait_for`, so they are searchable before anyone may see them;
3. flips in one scripted update of the state: g leaves `pending`, the version readers saw goes to
   `dead`. A concurrent replace of the same session is ordered by `flipped` (the newest flipped
   generation of a session that still has one pending): the last flip wins, and exactly one
   version is ever visible;
4. deletes the topics whose start message did not survive;
5. collects garbage: generations dead for longer than GRACE_SECONDS (a reader that took its
   snapshot before the flip may still be reading them) are deleted with a scroll + bulk delete
   (`_delete_by_query` lives in the reindex module, which the test node does not load), then
   dropped from the state. A generation pending for
   ABANDON_SECONDS (its writer died) is made dead first; a flip of a generation that is no longer
   pending is refused.
A write that fails before the flip leaves only hidden documents; the retry writes a new generation.
State updates are serialized per authority by the node (a scripted update, retried on conflict);
one that loses the race STATE_RETRIES times is `throttled`, with nothing applied.

Refresh: the contract says a replace that returned is searchable, so the write that makes a
generation visible to search waits for a refresh (`refresh="wait_for"`, the default; `"true"`
forces one, cheaper for a lone writer, costlier for the cluster under load; bench/recall.py
measures both). State updates need none: readers GET the state in real time.

Ranking is ranking.py's, as for every engine. The search asks for what it reads: the bool query
filters by the boolean tree (non-scoring) and scores each positive term in its own named clause,
bm25 + COVERAGE_WEIGHT, so the score orders by coverage then relevance, and `matched_queries` gives
each hit's exact terms. A `sampler` keeps the best `max_candidates` messages (SQLite's candidate
ceiling); a `terms` aggregation over them gives every matching session (an exact distinct-session
total: one shard) with `top_hits` of the rows its ranker reads (message 1, top2 2, session 3), the
newest matching row for sort=newest, and per-term counts for the session ranker's union.
`track_total_hits` = ceiling + 1 says whether the ceiling was hit (then the total is a lower
bound). The relevance handed to the ranker is the score minus the coverage weight: bm25 rounded to
float32 precision (about 1e-4 at coverage 1), a tie within that falls to insertion order.

Round trips (each reading method but session_topics without topics: + 1 real-time GET of the state):
- replace_session: 1 allocate + 1 lookup of the live version + 1 bulk per ~4 MB (the last waits for
  a refresh) + 1 flip + 1 topic lookup (+ 1 bulk delete when topics go) (+ garbage collection
  when a dead generation is older than the grace: 1 scroll per 1,000 documents + 1 bulk delete
  each + 1 state update);
- search: 1 msearch (candidates, and the withheld count when asked) (+ 1 for the trigram tier) +
  1 msearch (the returned rows with highlighted snippets, their sessions);
- session, message, turn_start, subagents: 1 search; resolve_sessions, resolve_messages: 1 msearch;
  scopes: 1 per 1,000 (project, cwd) pairs; printed_ref: 1 search (its neighbours, as key-ordered
  terms aggregations over both indices);
- window: 1 msearch (+ 1 search when `around` moves the centre); outline: 1 msearch;
- session_topics: 1 search (+ the state, 1 search of the session and 1 of the start messages when
  the session has topics); search_topics: per page of topics 1 msearch + 2 searches (the pages'
  sessions and start messages);
- add_topic: 1 index (waits for a refresh); delete_authority: 1 state update (the authority is
  empty to readers from here) + 1 scroll + 1 bulk delete per 1,000 documents in each index.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit, urlunsplit

from dovecote.platform.errors import CommitUnknown, InvalidArgument, Throttled, Unavailable
from dovecote.recall.model import (
    AMBIGUITY_CANDIDATES,
    REF_PREFIX,
    Row,
    Session,
    SessionInfo,
    Visibility,
    format_ref,
    printed_session,
    session_prefix_matches,
)
from dovecote.recall.ports import (
    IndexQuery,
    OutlineRows,
    Resolution,
    ScopeRow,
    SearchFilter,
    SearchPage,
    SessionHit,
    TopicRow,
    Window,
    outline_rows,
)
from dovecote.recall.query import And, Node, Not, Query, Term
from dovecote.recall.ranking import Candidate, rank_sessions
from dovecote.recall.sqlite import RANKER_ROWS, SNIPPET_CHARS, substring_snippet

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
MESSAGE_MAPPING = {
    "dynamic": "strict",
    "properties": {
        "authority": _KEYWORD,
        "gen": {"type": "long"},
        "rowid": {"type": "long"},
        "session_id": _KEYWORD,
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
    },
}
SESSION_MAPPING = {
    "dynamic": "strict",
    "properties": {
        "authority": _KEYWORD,
        "gen": {"type": "long"},
        "session_id": _KEYWORD,
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
        # The state document's body: read whole by id, never searched (no mapping per session id).
        "state": {"type": "object", "enabled": False},
    },
}
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

_ROW_FIELDS = ["session_id", "pos", "uuid", "role", "kind", "text", "ts", "envelope", "human"]
_SESSION_FIELDS = [
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

# ---- the state document's scripts (painless: each is one atomic update of one document) -----------

_ALLOCATE = """
def s = ctx._source.state;
long g = ((Number) s.next_gen).longValue();
s.next_gen = g + 1;
s.pending[String.valueOf(g)] = [params.sid, params.now];
"""
_FLIP = """
def s = ctx._source.state;
String g = String.valueOf(params.gen);
if (!s.pending.containsKey(g)) { ctx.op = 'noop'; return; }
s.pending.remove(g);
List kill = new ArrayList();
if (s.flipped.containsKey(params.sid)) { kill.add(s.flipped[params.sid]); } else { kill.addAll(params.prev); }
for (def k : kill) {
  long v = ((Number) k).longValue();
  if (v != params.gen) { s.dead[String.valueOf(v)] = params.now; }
}
boolean others = false;
for (def e : s.pending.values()) { if (e[0] == params.sid) { others = true; } }
if (others) { s.flipped[params.sid] = params.gen; } else { s.flipped.remove(params.sid); }
"""
_ABORT = """
def s = ctx._source.state;
boolean changed = false;
for (def g : params.gens) {
  if (s.pending.containsKey(g)) { s.pending.remove(g); s.dead[g] = params.at; changed = true; }
}
if (!changed) { ctx.op = 'noop'; }
"""
_COLLECT = """
def s = ctx._source.state;
for (def g : params.gens) { s.dead.remove(g); }
Set busy = new HashSet();
for (def e : s.pending.values()) { busy.add(e[0]); }
s.flipped.keySet().removeIf(k -> !busy.contains(k));
"""
_RESET = """
def s = ctx._source.state;
for (def g : s.pending.keySet()) { s.dead[g] = params.now; }
s.pending = new HashMap();
s.flipped = new HashMap();
s.floor = s.next_gen;
"""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one reading call may see of an authority: floor <= gen < next_gen, gen not hidden."""

    floor: int
    next_gen: int
    hidden: tuple[int, ...]
    pending: dict[str, Any]
    dead: dict[str, Any]

    @classmethod
    def of(cls, source: dict[str, Any] | None) -> Snapshot:
        state = (source or {}).get("state") or {}
        pending = dict(state.get("pending") or {})
        dead = dict(state.get("dead") or {})
        hidden = tuple(sorted(int(g) for g in (*pending, *dead)))
        return cls(int(state.get("floor") or 0), int(state.get("next_gen") or 0), hidden, pending, dead)


def _state_id(authority: str) -> str:
    return f"{authority}|state"


def _message_id(authority: str, gen: int, pos: int) -> str:
    return f"{authority}|{gen}|{pos}"


def _session_doc_id(authority: str, gen: int) -> str:
    return f"{authority}|{gen}|s"


def _topic_id(authority: str, session_id: str, start_uuid: str) -> str:
    # Session ids reach 400 characters and `_id` holds 512 bytes: a digest of the coordinates.
    return hashlib.sha256(f"{authority}\x00{session_id}\x00{start_uuid}".encode()).hexdigest()


def _lcp(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


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


def _trigram_leaf(term: Term) -> bool:
    return len(term.text) >= 3


def _term_clause(index: int, term: Term, field: str) -> dict[str, Any]:
    """One positive term, named `t<index>` (matched_queries: coverage), scored bm25 + the weight."""
    return {
        "function_score": {
            "query": leaf(term, field),
            "functions": [{"weight": COVERAGE_WEIGHT}],
            "boost_mode": "sum",
            "_name": f"t{index}",
        }
    }


def _visibility(visibility: Visibility) -> dict[str, Any]:
    """Visibility.shows as a query: text always, thinking and tools/envelopes when asked."""
    shown: list[dict[str, Any]] = [{"bool": {"filter": [{"term": {"kind": "text"}}, {"term": {"envelope": False}}]}}]
    if visibility.thinking:
        shown.append({"bool": {"filter": [{"term": {"kind": "thinking"}}, {"term": {"envelope": False}}]}})
    if visibility.tools:
        shown.append({"bool": {"should": [{"term": {"kind": "tool"}}, {"term": {"envelope": True}}]}})
    return {"bool": {"should": shown, "minimum_should_match": 1}}


def _filter_clauses(f: SearchFilter) -> list[dict[str, Any]]:
    """SearchFilter.matches pushed down (the session's fields are on every message)."""
    out = [_visibility(f.visibility)]
    if f.role:
        out.append({"term": {"role": f.role}})
    bounds = {}
    if f.since:
        bounds["gte"] = f.since
    if f.before:
        bounds["lte"] = f.before
    if bounds:  # a message without a time has no `ts` and never passes a bound
        out.append({"range": {"ts": bounds}})
    if f.min_messages:
        out.append({"range": {"message_count": {"gte": f.min_messages}}})
    if f.project:
        out.append({"term": {"project": f.project}})
    if f.source:
        out.append({"term": {"source": f.source}})
    if not f.subagents:
        out.append({"bool": {"must_not": [{"term": {"subagent": True}}]}})
    if f.places is not None:
        out.append(
            {
                "bool": {
                    "should": [
                        {"bool": {"filter": [{"term": {"project": p}}, {"term": {"cwd": c}}]}}
                        for p, c in sorted(f.places)
                    ],
                    "minimum_should_match": 1,
                }
            }
        )
    return out


# ---- documents -------------------------------------------------------------------------------------


def _row(source: dict[str, Any]) -> Row:
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


def _session_info(source: dict[str, Any]) -> SessionInfo:
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


def _sources(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [hit["_source"] for hit in response["hits"]["hits"]]


def _total(response: dict[str, Any]) -> int:
    return int(response["hits"]["total"]["value"])


def _fragment_snippet(text: str, fragment: str) -> str:
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
def _errors(*, write: bool = False, query: bool = False) -> Iterator[None]:
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


class OpenSearchIndex:
    name = "opensearch"

    def __init__(
        self,
        client: OpenSearch,
        *,
        index_prefix: str = "dovecote-recall",
        refresh: str = "wait_for",
        shards: int = 1,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if refresh not in REFRESH_POLICIES:
            raise ValueError(f"refresh must be one of {REFRESH_POLICIES}")
        self._client = client
        self.prefix = index_prefix
        self.messages = f"{index_prefix}-messages"
        self.sessions = f"{index_prefix}-sessions"
        self.topics = f"{index_prefix}-topics"
        self._refresh = refresh
        self._shards = shards
        self._clock = clock
        self._ready = False
        self._ready_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenSearchIndex:
        return cls(make_client(settings), index_prefix=settings.opensearch_index_prefix)

    def close(self) -> None:
        self._client.close()

    # ---- indices ----------------------------------------------------------------------------------

    def ensure_indices(self) -> None:
        """Reach the node and create the indices if they are missing (the local runtime calls this
        at start, so a wrong URL fails `dovecote dev` instead of its first search)."""
        self._ensure()

    def _ensure(self) -> None:
        """Create the indices on first use (once per process; losing a creation race is fine)."""
        if self._ready:
            return
        with self._ready_lock:
            if self._ready:
                return
            from opensearchpy.exceptions import RequestError

            for index, mapping in (
                (self.messages, MESSAGE_MAPPING),
                (self.sessions, SESSION_MAPPING),
                (self.topics, TOPIC_MAPPING),
            ):
                with _errors():
                    if self._client.indices.exists(index=index):
                        continue
                    body = {
                        "settings": {"number_of_shards": self._shards, "analysis": ANALYSIS},
                        "mappings": mapping,
                    }
                    try:
                        self._client.indices.create(index=index, body=body)
                    except RequestError as exc:
                        if exc.error != "resource_already_exists_exception":
                            raise
            self._ready = True

    def drop_indices(self) -> None:
        """Delete the three indices (tests and benchmarks that made their own prefix)."""
        with _errors(write=True):
            self._client.indices.delete(index=f"{self.messages},{self.sessions},{self.topics}", ignore_unavailable=True)
        self._ready = False

    # ---- requests ---------------------------------------------------------------------------------

    def _snapshot(self, authority: str) -> Snapshot:
        self._ensure()
        with _errors():
            found = self._client.get(index=self.sessions, id=_state_id(authority), routing=authority, ignore=[404])
        return Snapshot.of(found.get("_source") if found.get("found") else None)

    @staticmethod
    def _visible(authority: str, snap: Snapshot, *clauses: dict[str, Any]) -> dict[str, Any]:
        """The one scope of every read of versioned documents: this authority, this snapshot."""
        query: dict[str, Any] = {
            "filter": [
                {"term": {"authority": authority}},
                {"range": {"gen": {"gte": snap.floor, "lt": snap.next_gen}}},
                *clauses,
            ]
        }
        if snap.hidden:
            query["must_not"] = [{"terms": {"gen": list(snap.hidden)}}]
        return {"bool": query}

    @staticmethod
    def _owned(authority: str, *clauses: dict[str, Any]) -> dict[str, Any]:
        """The scope of unversioned documents (topics) and of garbage collection."""
        return {"bool": {"filter": [{"term": {"authority": authority}}, *clauses]}}

    def _search(self, index: str, authority: str, body: dict[str, Any], *, query: bool = False) -> dict[str, Any]:
        with _errors(query=query):
            return dict(self._client.search(index=index, body=body, routing=authority))

    def _msearch(
        self, authority: str, searches: list[tuple[str, dict[str, Any]]], *, query: bool = False
    ) -> list[dict[str, Any]]:
        lines: list[dict[str, Any]] = []
        for index, body in searches:
            lines += [{"index": index, "routing": authority}, body]
        with _errors(query=query):
            responses = self._client.msearch(body=lines)["responses"]
            for response in responses:
                if "error" in response:
                    from opensearchpy.exceptions import TransportError

                    error = response["error"]
                    kind = error.get("type", "error") if isinstance(error, dict) else str(error)
                    raise TransportError(int(response.get("status") or 500), kind, error)
        return [dict(r) for r in responses]

    def _update_state(self, authority: str, script: str, params: dict[str, Any]) -> dict[str, Any]:
        """One scripted update of the state document (created on first use), returning it after."""
        initial = {
            "authority": authority,
            "state": {"next_gen": 1, "floor": 0, "pending": {}, "dead": {}, "flipped": {}},
        }
        from opensearchpy.exceptions import ConflictError

        try:
            with _errors(write=True):
                return dict(
                    self._client.update(
                        index=self.sessions,
                        id=_state_id(authority),
                        routing=authority,
                        body={
                            "script": {"lang": "painless", "source": script, "params": params},
                            "upsert": initial,
                            "scripted_upsert": True,
                        },
                        params={"retry_on_conflict": STATE_RETRIES, "_source": "true"},
                    )
                )
        except ConflictError as exc:  # lost the race STATE_RETRIES times: nothing was applied
            raise Throttled("too many concurrent writes to this authority's recall index; retry") from exc

    def _bulk(self, authority: str, actions: Iterable[tuple[dict[str, Any], dict[str, Any] | None]]) -> None:
        """Bulk requests of ~BULK_BYTES; the last one waits for the refresh that makes them all
        searchable (one shard: a refresh covers every earlier request)."""
        batch: list[str] = []
        size = 0

        def send(final: bool) -> None:
            if not batch:
                return
            with _errors(write=True):
                result = self._client.bulk(
                    body="".join(batch), routing=authority, refresh=self._refresh if final else "false"
                )
            if result.get("errors"):
                failed = next(item[op] for item in result["items"] for op in item if item[op].get("status", 200) >= 300)
                if failed.get("status") == 429:
                    raise Throttled("the search engine is busy; retry with backoff")
                raise Unavailable("the search engine refused a write; retry", error=str(failed.get("error"))[:300])

        for meta, doc in actions:
            lines = json.dumps(meta) + "\n" + (json.dumps(doc) + "\n" if doc is not None else "")
            batch.append(lines)
            size += len(lines)
            if size >= BULK_BYTES or len(batch) >= BULK_DOCS:
                send(final=False)
                batch, size = [], 0
        send(final=True)

    def _scan_ids(self, index: str, authority: str, query: dict[str, Any]) -> Iterator[list[str]]:
        """The ids matching `query`, a page at a time (scroll: `_delete_by_query` is not available)."""
        with _errors():
            page = self._client.search(
                index=index,
                body={"query": query, "size": SCROLL_PAGE, "_source": False, "sort": ["_doc"]},
                routing=authority,
                scroll="1m",
            )
        scroll_id = page.get("_scroll_id")
        try:
            while page["hits"]["hits"]:
                yield [hit["_id"] for hit in page["hits"]["hits"]]
                with _errors():
                    page = self._client.scroll(scroll_id=scroll_id, scroll="1m")
                scroll_id = page.get("_scroll_id", scroll_id)
        finally:
            if scroll_id:
                with _errors():
                    self._client.clear_scroll(scroll_id=scroll_id, ignore=[404])

    def _delete_matching(self, authority: str, indices: Iterable[str], query: dict[str, Any]) -> int:
        """Delete by query, emulated: scroll the ids, bulk-delete them, and wait for the refresh."""
        deleted = 0
        for index in indices:
            for ids in self._scan_ids(index, authority, query):
                self._bulk(
                    authority, (({"delete": {"_index": index, "_id": i, "routing": authority}}, None) for i in ids)
                )
                deleted += len(ids)
        return deleted

    # ---- writes -----------------------------------------------------------------------------------

    def replace_session(self, authority: str, session: Session, *, sha256: str) -> None:
        self._ensure()
        if len(session.messages) >= POS_LIMIT:
            raise InvalidArgument(f"a session holds at most {POS_LIMIT - 1} messages", field="messages")
        now = int(self._clock() * 1000)
        sid = session.session_id
        allocated = self._update_state(authority, _ALLOCATE, {"sid": sid, "now": now})
        snap = Snapshot.of(allocated["get"]["_source"])
        gen = snap.next_gen - 1
        try:
            live = self._search(
                self.sessions,
                authority,
                {
                    "query": self._visible(authority, snap, {"term": {"session_id": sid}}),
                    "size": 10,
                    "_source": ["gen"],
                },
            )
            previous = [int(s["gen"]) for s in _sources(live)]
            self._bulk(authority, self._documents(authority, gen, session, sha256))
        except BaseException:
            self._abort(authority, gen)
            raise
        flipped = self._update_state(authority, _FLIP, {"sid": sid, "gen": gen, "prev": previous, "now": now})
        if flipped.get("result") == "noop":
            raise Unavailable("the replacement took too long and was abandoned; retry", session_id=sid)
        self._drop_orphan_topics(authority, session)
        self._collect(authority, Snapshot.of(flipped["get"]["_source"]), now)

    def _documents(
        self, authority: str, gen: int, session: Session, sha256: str
    ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        sid = session.session_id
        yield (
            {"index": {"_index": self.sessions, "_id": _session_doc_id(authority, gen), "routing": authority}},
            {
                "authority": authority,
                "gen": gen,
                "session_id": sid,
                "sid_lower": sid.lower(),
                "depth": sid.count("/"),
                "source": session.source,
                "project": session.project,
                "cwd": session.cwd,
                "parent_session": session.parent_session,
                "agent": session.agent,
                "summary": session.summary,
                "message_count": len(session.messages),
                "started_at": session.started_at,
                "last_at": session.last_at,
                "sha256": sha256,
                "spawn_key": session.spawn_key,
                "spawn_keys": list(session.spawn_keys),
            },
        )
        for pos, m in enumerate(session.messages):
            doc: dict[str, Any] = {
                "authority": authority,
                "gen": gen,
                "rowid": gen * POS_LIMIT + pos,
                "session_id": sid,
                "pos": pos,
                "uuid": m.uuid,
                "role": m.role,
                "kind": m.kind,
                "envelope": m.envelope,
                "human": m.human,
                "text": m.text,
                "project": session.project,
                "source": session.source,
                "cwd": session.cwd,
                "message_count": len(session.messages),
                "subagent": session.agent is not None or session.parent_session is not None,
            }
            if m.timestamp:
                doc["ts"] = m.timestamp
            yield (
                {"index": {"_index": self.messages, "_id": _message_id(authority, gen, pos), "routing": authority}},
                doc,
            )

    def _abort(self, authority: str, gen: int) -> None:
        """A write that failed before its flip: make its generation dead at once (nobody saw it)."""
        at = int(self._clock() * 1000) - GRACE_SECONDS * 1000
        try:
            self._update_state(authority, _ABORT, {"gens": [str(gen)], "at": at})
        except Exception:  # noqa: BLE001, S110 - still pending, hence hidden; abandoned after ABANDON_SECONDS
            pass

    def _drop_orphan_topics(self, authority: str, session: Session) -> None:
        """A topic survives a re-ingest when the message it starts at does."""
        found = self._search(
            self.topics,
            authority,
            {
                "query": self._owned(authority, {"term": {"session_id": session.session_id}}),
                "size": MAX_WINDOW,
                "_source": ["start_uuid"],
            },
        )
        kept = {m.uuid for m in session.messages}
        gone = [hit["_id"] for hit in found["hits"]["hits"] if hit["_source"]["start_uuid"] not in kept]
        if gone:
            self._bulk(
                authority, (({"delete": {"_index": self.topics, "_id": i, "routing": authority}}, None) for i in gone)
            )

    def _collect(self, authority: str, snap: Snapshot, now: int) -> None:
        """Garbage: generations dead for GRACE_SECONDS are deleted, then dropped from the state;
        generations pending for ABANDON_SECONDS are made dead first (their flip will be refused)."""
        abandoned = [g for g, (_, at) in snap.pending.items() if int(at) < now - ABANDON_SECONDS * 1000]
        if abandoned:
            self._update_state(authority, _ABORT, {"gens": abandoned, "at": now})
        ripe = [int(g) for g, at in snap.dead.items() if int(at) < now - GRACE_SECONDS * 1000]
        if not ripe:
            return
        self._delete_matching(
            authority, (self.messages, self.sessions), self._owned(authority, {"terms": {"gen": ripe}})
        )
        self._update_state(authority, _COLLECT, {"gens": [str(g) for g in ripe]})

    def delete_authority(self, authority: str) -> None:
        """Atomic for readers: one state update raises the floor past every generation (the
        authority reads as empty from here); then the documents are deleted."""
        self._ensure()
        now = int(self._clock() * 1000)
        state = Snapshot.of(self._update_state(authority, _RESET, {"now": now})["get"]["_source"])
        self._delete_matching(
            authority, (self.messages, self.sessions), self._owned(authority, {"range": {"gen": {"lt": state.floor}}})
        )
        self._delete_matching(authority, (self.topics,), self._owned(authority))
        self._update_state(authority, _COLLECT, {"gens": [str(g) for g in state.hidden]})

    def add_topic(self, authority: str, session_id: str, start_uuid: str, label: str) -> None:
        self._ensure()
        with _errors(write=True):
            self._client.index(
                index=self.topics,
                id=_topic_id(authority, session_id, start_uuid),
                routing=authority,
                refresh=self._refresh,
                body={
                    "authority": authority,
                    "session_id": session_id,
                    "start_uuid": start_uuid,
                    "label": label,
                    "seq": time.time_ns(),
                },
            )

    # ---- sessions and refs ------------------------------------------------------------------------

    def _session_docs(self, authority: str, snap: Snapshot, ids: Iterable[str]) -> dict[str, SessionInfo]:
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        found = self._search(
            self.sessions,
            authority,
            {
                "query": self._visible(authority, snap, {"terms": {"session_id": wanted}}),
                "size": len(wanted),
                "_source": _SESSION_FIELDS,
            },
        )
        return {s["session_id"]: _session_info(s) for s in _sources(found)}

    def session(self, authority: str, session_id: str) -> SessionInfo | None:
        snap = self._snapshot(authority)
        return self._session_docs(authority, snap, [session_id]).get(session_id)

    def resolve_sessions(self, authority: str, prefix: str) -> Resolution:
        snap = self._snapshot(authority)
        return self._resolve_sessions(authority, snap, prefix)

    def _resolve_sessions(self, authority: str, snap: Snapshot, prefix: str) -> Resolution:
        segments = prefix.lower().split("/")
        searches = [
            (
                self.sessions,
                {
                    "query": self._visible(authority, snap, {"term": {"session_id": prefix}}),
                    "size": 1,
                    "_source": ["session_id"],
                },
            )
        ]
        valid = bool(prefix) and all(segments)
        depth = len(segments) - 1
        if valid:
            scope = self._visible(
                authority, snap, {"term": {"depth": depth}}, {"prefix": {"sid_lower": {"value": segments[0]}}}
            )
            searches.append(
                (
                    self.sessions,
                    {
                        "query": scope,
                        "size": AMBIGUITY_CANDIDATES if depth == 0 else MAX_WINDOW,
                        "track_total_hits": True,
                        "sort": [{"sid_lower": "asc"}, {"session_id": "asc"}],
                        "_source": ["session_id"],
                    },
                )
            )
        responses = self._msearch(authority, searches)
        exact = _sources(responses[0])
        if exact:
            return Resolution([exact[0]["session_id"]], 1)
        if not valid:
            return Resolution([], 0)
        ids = [s["session_id"] for s in _sources(responses[1])]
        if depth == 0:
            return Resolution(ids, _total(responses[1]))
        matched = sorted(i for i in ids if session_prefix_matches(prefix, i))
        return Resolution(matched[:AMBIGUITY_CANDIDATES], len(matched))

    def resolve_messages(self, authority: str, session_id: str, prefix: str) -> Resolution:
        prefix = prefix.lower()
        if not prefix:
            return Resolution([], 0)
        snap = self._snapshot(authority)
        in_session = {"term": {"session_id": session_id}}
        responses = self._msearch(
            authority,
            [
                (
                    self.messages,
                    {
                        "query": self._visible(authority, snap, in_session, {"prefix": {"uuid": {"value": prefix}}}),
                        "size": AMBIGUITY_CANDIDATES,
                        "track_total_hits": True,
                        "sort": [{"uuid": "asc"}],
                        "_source": ["uuid"],
                    },
                ),
                (
                    self.messages,
                    {
                        "query": self._visible(authority, snap, in_session, {"term": {"uuid": prefix}}),
                        "size": 0,
                        "track_total_hits": True,
                    },
                ),
            ],
        )
        total = _total(responses[0])
        if total > 1 and _total(responses[1]):
            return Resolution([prefix], 1)
        return Resolution([s["uuid"] for s in _sources(responses[0])], total)

    def message(self, authority: str, session_id: str, uuid: str) -> Row | None:
        snap = self._snapshot(authority)
        found = self._search(
            self.messages,
            authority,
            {
                "query": self._visible(authority, snap, {"term": {"session_id": session_id}}, {"term": {"uuid": uuid}}),
                "size": 1,
                "_source": _ROW_FIELDS,
            },
        )
        rows = _sources(found)
        return _row(rows[0]) if rows else None

    def printed_ref(self, authority: str, session_id: str, uuid: str) -> str:
        """The shortest unique prefixes, from the neighbours in sort order: one search over both
        indices, each neighbour a `terms` aggregation of size 1 (2 after) ordered by key."""
        snap = self._snapshot(authority)
        lowered = session_id.lower()
        top_level = "/" not in session_id
        scopes = [self._visible(authority, snap, {"term": {"session_id": session_id}})]
        if top_level:
            scopes.append(self._visible(authority, snap, {"term": {"depth": 0}}))

        def neighbour(
            field: str, bound: dict[str, Any], order: str, size: int, *more: dict[str, Any]
        ) -> dict[str, Any]:
            return {
                "filter": {"bool": {"filter": [{"range": {field: bound}}, *more]}},
                "aggs": {"near": {"terms": {"field": field, "size": size, "order": {"_key": order}}}},
            }

        in_session = {"term": {"session_id": session_id}}
        aggs = {
            "uuid_before": neighbour("uuid", {"lt": uuid}, "desc", 1, in_session),
            "uuid_after": neighbour("uuid", {"gt": uuid}, "asc", 1, in_session),
        }
        if top_level:
            depth0 = {"term": {"depth": 0}}
            other = {"bool": {"must_not": [in_session]}}
            aggs["sid_before"] = neighbour("sid_lower", {"lt": lowered}, "desc", 1, depth0)
            aggs["sid_after"] = neighbour("sid_lower", {"gte": lowered}, "asc", 2, depth0, other)
        found = self._search(
            f"{self.messages},{self.sessions}",
            authority,
            {"query": {"bool": {"should": scopes, "minimum_should_match": 1}}, "size": 0, "aggs": aggs},
        )["aggregations"]

        def values(name: str) -> list[str]:
            return [b["key"] for b in found[name]["near"]["buckets"]] if name in found else []

        uuid_need = max((_lcp(uuid, v) + 1 for v in values("uuid_before") + values("uuid_after")), default=0)
        uuid_len = min(len(uuid), max(REF_PREFIX, uuid_need))
        longest = max(len(s) for s in session_id.split("/"))
        if top_level:
            need = max((_lcp(lowered, v) + 1 for v in values("sid_before") + values("sid_after")), default=0)
            session_len = min(longest, max(REF_PREFIX, need))
        else:
            session_len = REF_PREFIX
            while session_len < longest:
                found = self._resolve_sessions(authority, snap, printed_session(session_id, session_len, "/"))
                if found.ids == [session_id] and found.total == 1:
                    break
                session_len += 1
            session_len = min(session_len, longest)
        return format_ref(session_id, uuid, session_len, uuid_len)

    def turn_start(self, authority: str, session_id: str) -> int | None:
        snap = self._snapshot(authority)
        found = self._search(
            self.messages,
            authority,
            {
                "query": self._visible(
                    authority, snap, {"term": {"session_id": session_id}}, {"term": {"human": True}}
                ),
                "size": 1,
                "sort": [{"pos": "desc"}],
                "_source": ["pos"],
            },
        )
        rows = _sources(found)
        return int(rows[0]["pos"]) if rows else None

    def subagents(self, authority: str, session: SessionInfo) -> list[SessionInfo]:
        snap = self._snapshot(authority)
        linked: list[dict[str, Any]] = [{"term": {"parent_session": session.session_id}}]
        if session.spawn_keys:
            linked.append({"terms": {"spawn_key": list(session.spawn_keys)}})
        found = self._search(
            self.sessions,
            authority,
            {
                "query": self._visible(authority, snap, {"bool": {"should": linked, "minimum_should_match": 1}}),
                "size": MAX_WINDOW,
                "sort": [{"started_at": "asc"}, {"session_id": "asc"}],
                "_source": _SESSION_FIELDS,
            },
        )
        return [_session_info(s) for s in _sources(found)]

    def scopes(self, authority: str) -> list[ScopeRow]:
        snap = self._snapshot(authority)
        rows: list[ScopeRow] = []
        after: dict[str, Any] | None = None
        while True:
            composite: dict[str, Any] = {
                "size": 1000,
                "sources": [{"project": {"terms": {"field": "project"}}}, {"cwd": {"terms": {"field": "cwd"}}}],
            }
            if after is not None:
                composite["after"] = after
            found = self._search(
                self.sessions,
                authority,
                {
                    "query": self._visible(authority, snap),
                    "size": 0,
                    "aggs": {"places": {"composite": composite}},
                },
            )
            places = found["aggregations"]["places"]
            rows += [ScopeRow(b["key"]["project"], b["key"]["cwd"], int(b["doc_count"])) for b in places["buckets"]]
            after = places.get("after_key")
            if not places["buckets"] or after is None:
                break
        return sorted(rows, key=lambda r: (r.project, r.cwd))

    # ---- search -----------------------------------------------------------------------------------

    def search(self, authority: str, query: IndexQuery) -> SearchPage:
        snap = self._snapshot(authority)
        tier, field, keep = "word", "text", None
        candidates, truncated, withheld, newest = self._candidates(authority, snap, query, field, keep)
        if not candidates and not withheld:
            tier, field, keep = "trigram", "text.tri", _trigram_leaf
            candidates, truncated, withheld, newest = self._candidates(authority, snap, query, field, keep)
        ranked = rank_sessions(candidates, ranker=query.ranker, sort=query.sort)
        shown = ranked[: query.limit]
        hits: list[SessionHit] = []
        if shown:
            rows, snippets, sessions = self._details(authority, snap, query, [r.best for r in shown], tier)
            for entry in shown:
                row = rows[entry.best.rowid]
                hits.append(
                    SessionHit(
                        session=sessions[row.session_id],
                        row=row,
                        snippet=snippets[entry.best.rowid],
                        score=entry.score,
                        coverage=entry.coverage,
                    )
                )
        return SearchPage(
            hits=hits,
            total_sessions=len(ranked),
            total_is_lower_bound=truncated,
            newest=newest,
            withheld=withheld,
            tier=tier,
        )

    def _candidates(
        self,
        authority: str,
        snap: Snapshot,
        query: IndexQuery,
        field: str,
        keep: Callable[[Term], bool] | None,
    ) -> tuple[list[Candidate], bool, int, str]:
        """The sessions matching the query, each with the rows its ranker reads (see the module
        docstring), whether the candidate ceiling was hit, the matches withheld as the caller's
        live turn, and the newest matching timestamp."""
        root = compile_node(query.query.root, field, keep)
        if root is None:
            return [], False, 0, ""
        terms = query.query.terms
        clauses = [_term_clause(i, t, field) for i, t in enumerate(terms) if keep is None or keep(t)]
        matching = self._visible(authority, snap, root, *_filter_clauses(query.filter))
        searches: list[tuple[str, dict[str, Any]]] = []
        held: dict[str, Any] | None = None
        if query.withhold is not None:
            held = {
                "bool": {
                    "filter": [
                        {"term": {"session_id": query.withhold.session_id}},
                        {"range": {"pos": {"gte": query.withhold.from_pos}}},
                    ]
                }
            }
            searches.append(
                (
                    self.messages,
                    {"query": {"bool": {"filter": [matching, held]}}, "size": 0, "track_total_hits": True},
                )
            )
        scored: dict[str, Any] = {"bool": {"filter": [matching], "should": clauses}}
        if held is not None:
            scored["bool"]["must_not"] = [held]
        per_session: dict[str, Any] = {
            "top": {
                "top_hits": {
                    "size": RANKER_ROWS[query.ranker],
                    "sort": [{"_score": "desc"}, {"rowid": "asc"}],
                    "_source": False,
                    "docvalue_fields": ["rowid", "pos", "ts"],
                }
            }
        }
        if query.sort in ("newest", "oldest"):  # the row the sort picks per session (ranking.py)
            latest = query.sort == "newest"
            per_session["picked"] = {
                "top_hits": {
                    "size": 1,
                    "sort": [
                        {"ts": {"order": "desc" if latest else "asc", "missing": "_last" if latest else "_first"}},
                        {"rowid": "asc"},
                    ],
                    "track_scores": True,
                    "_source": False,
                    "docvalue_fields": ["rowid", "pos", "ts"],
                }
            }
        if query.ranker == "session" and len(terms) > 1:
            for i, term in enumerate(terms):
                if keep is None or keep(term):
                    per_session[f"t{i}"] = {"filter": leaf(term, field)}
        searches.append(
            (
                self.messages,
                {
                    "query": scored,
                    "size": 0,
                    "track_total_hits": query.max_candidates + 1,
                    "aggs": {
                        "newest": {"terms": {"field": "ts", "size": 1, "order": {"_key": "desc"}}},
                        "sample": {
                            "sampler": {"shard_size": query.max_candidates},
                            "aggs": {
                                "sessions": {
                                    "terms": {"field": "session_id", "size": query.max_candidates},
                                    "aggs": per_session,
                                }
                            },
                        },
                    },
                },
            )
        )
        responses = self._msearch(authority, searches, query=True)
        withheld = _total(responses[0]) if held is not None else 0
        found = responses[-1]
        truncated = _total(found) > query.max_candidates
        newest_buckets = found["aggregations"]["newest"]["buckets"]
        newest = newest_buckets[0]["key"] if newest_buckets else ""
        term_sets: dict[tuple[str, ...], frozenset[int]] = {}

        def terms_of(names: list[str]) -> frozenset[int]:
            key = tuple(names)
            if key not in term_sets:
                term_sets[key] = frozenset(int(n[1:]) for n in names if n.startswith("t"))
            return term_sets[key]

        scored_rows: list[tuple[float, Candidate]] = []
        for bucket in found["aggregations"]["sample"]["sessions"]["buckets"]:
            sid = bucket["key"]
            union = None
            if query.ranker == "session" and len(terms) > 1:
                union = frozenset(i for i in range(len(terms)) if bucket.get(f"t{i}", {}).get("doc_count"))
            seen: set[int] = set()
            hits = bucket["top"]["hits"]["hits"] + (bucket["picked"]["hits"]["hits"] if "picked" in bucket else [])
            for hit in hits:
                values = hit["fields"]
                rowid = int(values["rowid"][0])
                if rowid in seen:
                    continue
                seen.add(rowid)
                matched = terms_of(hit.get("matched_queries") or [])
                encoded = float(hit["_score"] if hit.get("_score") is not None else hit["sort"][0])
                candidate = Candidate(
                    rowid=rowid,
                    session_id=sid,
                    pos=int(values["pos"][0]),
                    timestamp=(values.get("ts") or [""])[0],
                    score=encoded - len(matched) * COVERAGE_WEIGHT,
                    terms=matched,
                    session_terms=union,
                )
                scored_rows.append((encoded, candidate))
        # The engine's relevance order (coverage, then bm25), ties in insertion order.
        scored_rows.sort(key=lambda pair: (-pair[0], pair[1].rowid))
        candidates = [c for _, c in scored_rows]
        return candidates, truncated, withheld, newest

    def _details(
        self, authority: str, snap: Snapshot, query: IndexQuery, best: list[Candidate], tier: str
    ) -> tuple[dict[int, Row], dict[int, str], dict[str, SessionInfo]]:
        """The returned rows, their snippets and their sessions: one msearch."""
        doc_ids = [_message_id(authority, c.rowid // POS_LIMIT, c.rowid % POS_LIMIT) for c in best]
        rows_body: dict[str, Any] = {
            "query": self._visible(authority, snap, {"ids": {"values": doc_ids}}),
            "size": len(doc_ids),
            "_source": [*_ROW_FIELDS, "rowid"],
        }
        terms = query.query.terms
        if tier == "word":
            words = [leaf(t, "text") for t in terms]
            rows_body["highlight"] = {
                "pre_tags": [""],
                "post_tags": [""],
                "fields": {
                    "text": {
                        "type": "unified",
                        "highlight_query": {"bool": {"should": words, "minimum_should_match": 1}},
                        "fragment_size": SNIPPET_FRAGMENT,
                        "number_of_fragments": 1,
                    }
                },
            }
        session_ids = list(dict.fromkeys(c.session_id for c in best))
        sessions_body = {
            "query": self._visible(authority, snap, {"terms": {"session_id": session_ids}}),
            "size": len(session_ids),
            "_source": _SESSION_FIELDS,
        }
        rows_found, sessions_found = self._msearch(
            authority, [(self.messages, rows_body), (self.sessions, sessions_body)]
        )
        rows: dict[int, Row] = {}
        snippets: dict[int, str] = {}
        for hit in rows_found["hits"]["hits"]:
            rowid = int(hit["_source"]["rowid"])
            row = _row(hit["_source"])
            rows[rowid] = row
            fragments = (hit.get("highlight") or {}).get("text") or []
            if tier == "word" and fragments:
                snippets[rowid] = _fragment_snippet(row.text, fragments[0])
            elif tier == "word":
                snippets[rowid] = row.text[:SNIPPET_CHARS]
            else:
                snippets[rowid] = substring_snippet(row.text, [t.text for t in terms])
        sessions = {s["session_id"]: _session_info(s) for s in _sources(sessions_found)}
        return rows, snippets, sessions

    # ---- read and outline -------------------------------------------------------------------------

    def window(
        self, authority: str, session_id: str, anchor_pos: int, *, radius: int, around: int, visibility: Visibility
    ) -> Window:
        snap = self._snapshot(authority)
        shown = {
            "bool": {"should": [_visibility(visibility), {"term": {"pos": anchor_pos}}], "minimum_should_match": 1}
        }

        def scope(*clauses: dict[str, Any]) -> dict[str, Any]:
            return self._visible(authority, snap, {"term": {"session_id": session_id}}, shown, *clauses)

        centre = anchor_pos
        if around:
            centre = self._moved_centre(authority, scope, anchor_pos, around)
        before, middle, after = self._msearch(
            authority,
            [
                (
                    self.messages,
                    {
                        "query": scope({"range": {"pos": {"lt": centre}}}),
                        "size": radius,
                        "sort": [{"pos": "desc"}],
                        "track_total_hits": True,
                        "_source": _ROW_FIELDS,
                    },
                ),
                (self.messages, {"query": scope({"term": {"pos": centre}}), "size": 1, "_source": _ROW_FIELDS}),
                (
                    self.messages,
                    {
                        "query": scope({"range": {"pos": {"gt": centre}}}),
                        "size": radius,
                        "sort": [{"pos": "asc"}],
                        "track_total_hits": True,
                        "_source": _ROW_FIELDS,
                    },
                ),
            ],
        )
        earlier = [_row(s) for s in _sources(before)]
        later = [_row(s) for s in _sources(after)]
        rows = [*reversed(earlier), *(_row(s) for s in _sources(middle)), *later]
        if not rows:
            return Window([], 0, 0)
        return Window(rows, _total(before) - len(earlier), _total(after) - len(later))

    def _moved_centre(self, authority: str, scope: Callable[..., dict[str, Any]], anchor_pos: int, around: int) -> int:
        """The displayed row `around` rows after (or before) the anchor; the last (first) one when
        the session ends first."""
        forward = around > 0
        order = "asc" if forward else "desc"
        side = {"range": {"pos": {"gt" if forward else "lt": anchor_pos}}}
        skip = abs(around) - 1
        body: dict[str, Any] = {"query": scope(side), "size": 1, "sort": [{"pos": order}], "_source": ["pos"]}
        edge = {"query": scope(), "size": 1, "sort": [{"pos": "desc" if forward else "asc"}], "_source": ["pos"]}
        if skip < MAX_WINDOW:
            stepped, last = self._msearch(authority, [(self.messages, {**body, "from": skip}), (self.messages, edge)])
            hits = _sources(stepped) or _sources(last)
            return int(hits[0]["pos"]) if hits else anchor_pos
        # Past the result window: walk with search_after (a session holds at most 10 M rows).
        after: list[Any] | None = None
        remaining = skip
        while True:
            page_body: dict[str, Any] = {**body, "size": min(MAX_WINDOW, remaining + 1)}
            if after is not None:
                page_body["search_after"] = after
            hits = self._search(self.messages, authority, page_body)["hits"]["hits"]
            if not hits:
                fallback = _sources(self._search(self.messages, authority, edge))
                return int(fallback[0]["pos"]) if fallback else anchor_pos
            if remaining < len(hits):
                return int(hits[remaining]["_source"]["pos"])
            remaining -= len(hits)
            after = hits[-1]["sort"]

    def outline(
        self, authority: str, session_id: str, *, visibility: Visibility, scan: int, bookend: int
    ) -> OutlineRows:
        snap = self._snapshot(authority)
        in_session = self._visible(authority, snap, {"term": {"session_id": session_id}})
        head, tail = self._msearch(
            authority,
            [
                (self.messages, {"query": in_session, "size": scan, "sort": [{"pos": "asc"}], "_source": _ROW_FIELDS}),
                (self.messages, {"query": in_session, "size": scan, "sort": [{"pos": "desc"}], "_source": _ROW_FIELDS}),
            ],
        )
        return outline_rows([_row(s) for s in _sources(head)], [_row(s) for s in _sources(tail)], visibility, bookend)

    # ---- topics -----------------------------------------------------------------------------------

    def _starts(self, authority: str, snap: Snapshot, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The position of each (session, start uuid) that exists in the visible version."""
        wanted = sorted(set(pairs))
        if not wanted:
            return {}
        found = self._search(
            self.messages,
            authority,
            {
                "query": self._visible(
                    authority,
                    snap,
                    {"terms": {"session_id": sorted({s for s, _ in wanted})}},
                    {"terms": {"uuid": sorted({u for _, u in wanted})}},
                ),
                "size": min(MAX_WINDOW, len(wanted) * 2),
                "_source": ["session_id", "uuid", "pos"],
            },
        )
        want = set(wanted)
        return {
            (s["session_id"], s["uuid"]): int(s["pos"]) for s in _sources(found) if (s["session_id"], s["uuid"]) in want
        }

    def session_topics(self, authority: str, session_id: str) -> list[TopicRow]:
        """Topics are not versioned: a label counts while its start message exists in the visible
        version. Most sessions have none, and then one search answers (search asks for every hit)."""
        self._ensure()
        topics = self._search(
            self.topics,
            authority,
            {
                "query": self._owned(authority, {"term": {"session_id": session_id}}),
                "size": MAX_WINDOW,
                "_source": ["start_uuid", "label"],
            },
        )
        labels = {t["start_uuid"]: t["label"] for t in _sources(topics)}
        if not labels:
            return []
        snap = self._snapshot(authority)
        info = self._session_docs(authority, snap, [session_id]).get(session_id)
        if info is None:
            return []
        session = info
        starts = self._starts(authority, snap, ((session_id, u) for u in labels))
        rows = [
            TopicRow(session=session, start_uuid=uuid, start_pos=starts[(session_id, uuid)], label=label)
            for uuid, label in labels.items()
            if (session_id, uuid) in starts
        ]
        return sorted(rows, key=lambda r: r.start_pos)

    def search_topics(
        self, authority: str, query: Query | None, *, limit: int, project: str
    ) -> tuple[list[TopicRow], bool]:
        """Ranked over the whole authority with one global limit. A topic counts only while its
        session is visible (and in `project`) and its start message exists: pages are read in rank
        order and checked until `limit` rows are found."""
        snap = self._snapshot(authority)
        if query is None:
            scope = self._owned(authority)
            order: list[Any] = [{"seq": "desc"}]
        else:
            words = [leaf(t, "label") for t in query.terms]
            scope = {
                "bool": {
                    "filter": [{"term": {"authority": authority}}],
                    "should": words,
                    "minimum_should_match": 1,
                }
            }
            order = [{"_score": "desc"}, {"seq": "asc"}]
        page_size = max(2 * limit, 20)
        out: list[TopicRow] = []
        tagged = False
        start = 0
        while len(out) < limit and start < MAX_WINDOW:
            searches = [
                (
                    self.topics,
                    {
                        "query": scope,
                        "from": start,
                        "size": min(page_size, MAX_WINDOW - start),
                        "sort": order,
                        "_source": ["session_id", "start_uuid", "label"],
                    },
                )
            ]
            if start == 0:
                searches.append((self.topics, {"query": self._owned(authority), "size": 0, "track_total_hits": 1}))
            responses = self._msearch(authority, searches)
            if start == 0:
                tagged = _total(responses[1]) > 0
                if not tagged:
                    return [], False
            page = _sources(responses[0])
            if not page:
                break
            sessions = self._session_docs(authority, snap, (t["session_id"] for t in page))
            starts = self._starts(authority, snap, ((t["session_id"], t["start_uuid"]) for t in page))
            for topic in page:
                info = sessions.get(topic["session_id"])
                pos = starts.get((topic["session_id"], topic["start_uuid"]))
                if info is None or pos is None or (project and info.project != project):
                    continue
                out.append(TopicRow(session=info, start_uuid=topic["start_uuid"], start_pos=pos, label=topic["label"]))
                if len(out) == limit:
                    break
            start += len(page)
        return out, tagged
