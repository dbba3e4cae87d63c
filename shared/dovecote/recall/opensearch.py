"""The cloud SearchIndex: OpenSearch (opensearch-py), held to the same contract and suite as SQLite FTS5.

Layout: four indices per deployment, shared by every authority (`<prefix>-messages`,
`<prefix>-sessions`, `<prefix>-topics`, `<prefix>-documents`).
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
- documents: the session documents (the `session-doc` ranker, ranking.py), one per session version,
  `<authority>|<gen>|d`, written in the same bulk as the version's messages, so they follow the
  generations (hidden while pending, collected when dead) with the session-level filters copied on.
  An index made before them gets them from fill_session_docs (the store's backfill, run by the
  transcript indexer's schedule): it flags each visible session version `documented` (an update,
  404 when the version was collected meanwhile: then nothing is written) and writes its document.

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
each hit's exact terms. The candidates are the best `max_candidates` messages (SQLite's candidate
ceiling) as plain hits (score desc, rowid asc), grouped by session here: every matching session
(an exact distinct-session total while the ceiling is not hit), the rows its ranker reads, the
newest matching row for sort=newest, and per-term counts for the session ranker's union; a
filter-only search beside it gives the newest matching timestamp. (A ceiling above the search
window, 10,000, takes a sampler + terms aggregation with top_hits per session: the same rows, one
top_hits fetch per session, 3-4x slower at 500.) `track_total_hits` = ceiling + 1 says whether the
ceiling was hit (then the total is a lower bound). The relevance handed to the ranker is the score
minus the coverage weight: bm25 rounded to float32 precision (about 1e-4 at coverage 1), a tie
within that falls to insertion order.

Round trips (each reading method but session_topics without topics: + 1 real-time GET of the state):
- replace_session: 1 allocate + 1 lookup of the live version + 1 bulk per ~4 MB (the last waits for
  a refresh) + 1 flip + 1 topic lookup (+ 1 bulk delete when topics go) (+ garbage collection
  when a dead generation is older than the grace: 1 scroll per 1,000 documents + 1 bulk delete
  each + 1 state update);
- search with the semantic tier (opensearch_vectors.py: a knn_vector field per dimension, written after
  the lexical index): + 1 msearch (the coverage count and the filtered knn query);
- search: 1 msearch (candidates, the withheld count when asked, and the session documents' best 30
  for `session-doc`) (+ 1 for the trigram tier) + 1
  msearch (the returned rows with highlighted snippets, their sessions, their sessions' topics) + 1
  msearch (the page's printed-ref neighbours, which need each row's uuid: one search of each index;
  the topics' start positions when there are topics) (+ 1 msearch per prefix length tried for a
  subagent thread's ref): a fixed number for the whole page (the service used to ask for each hit's
  ref and topics apart, a state GET and 2 searches per hit: 30 requests for a search of 8 hits; 6
  now, scopes included);
- session, message, turn_start, subagents: 1 search; resolve_sessions, resolve_messages: 1 msearch;
  scopes: 1 per 1,000 (project, cwd) pairs (a shorter page is the last); printed_ref: 1 msearch
  (its neighbours, as key-ordered terms aggregations: one search of each index);
- window: 1 msearch (+ 1 search when `around` moves the centre); outline: 1 msearch;
- session_topics: 1 search (+ the state, 1 search of the session and 1 of the start messages when
  the session has topics); search_topics: per page of topics 1 msearch + 2 searches (the pages'
  sessions and start messages);
- add_topic: 1 index (waits for a refresh); delete_authority: 1 state update (the authority is
  empty to readers from here) + 1 scroll + 1 bulk delete per 1,000 documents in each index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Self, Unpack

from dovecote.recall.model import (
    AMBIGUITY_CANDIDATES,
    Row,
    Session,
    SessionInfo,
    Visibility,
)
from dovecote.recall.opensearch_mapping import (
    MAX_WINDOW,
    ROW_FIELDS,
    SESSION_FIELDS,
    leaf,
    make_client,
    row_of,
    session_info_of,
    sources_of,
    total_of,
    visibility_query,
)
from dovecote.recall.opensearch_search import OpenSearchSearch
from dovecote.recall.opensearch_store import OpenSearchStore, Snapshot, StoreOptions
from dovecote.recall.opensearch_vectors import OpenSearchVectors
from dovecote.recall.ports import (
    IndexQuery,
    OutlineRows,
    Resolution,
    ScopeRow,
    SearchPage,
    TopicRow,
    Window,
    outline_rows,
)
from dovecote.recall.query import Query

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from dovecote.embedding.ports import Embedder
    from dovecote.platform.settings import Settings


class OpenSearchIndex:
    """The SearchIndex (ports.py) on OpenSearch, composed: the store (opensearch_store: the indices,
    their mapping, generations and writes, and the requests every part makes), the vector tier
    (opensearch_vectors) and the search (opensearch_search) over it; here the reads (sessions and
    refs, windows and outlines, topics), and each other port method delegated in one line."""

    name = "opensearch"

    def __init__(self, client: OpenSearch, **options: Unpack[StoreOptions]) -> None:
        self.store = OpenSearchStore(client, **options)
        self.vectors = OpenSearchVectors(self.store)
        self.searches = OpenSearchSearch(self.store, self.vectors)

    @classmethod
    def from_settings(cls, settings: Settings) -> Self:
        dimension = settings.embed_dimension if settings.embedder == "bedrock" else None
        return cls(make_client(settings), index_prefix=settings.opensearch_index_prefix, vector_dimension=dimension)

    # ---- delegated: indices, writes, search, the vector tier, the session documents -------------

    def close(self) -> None:
        self.store.close()

    def ensure_indices(self) -> None:
        self.store.ensure()

    def drop_indices(self) -> None:
        self.store.drop_indices()

    def replace_session(self, authority: str, session: Session, *, sha256: str) -> None:
        self.store.replace_session(authority, session, sha256=sha256)

    def delete_authority(self, authority: str) -> None:
        self.store.delete_authority(authority)

    def add_topic(self, authority: str, session_id: str, start_uuid: str, label: str) -> None:
        self.store.add_topic(authority, session_id, start_uuid, label)

    def fill_session_docs(self, authority: str | None = None, *, limit: int | None = None) -> int:
        return self.store.fill_session_docs(authority, limit=limit)

    def search(self, authority: str, query: IndexQuery) -> SearchPage:
        return self.searches.search(authority, query)

    def document_order(self, authority: str, query: IndexQuery) -> list[str]:
        return self.searches.document_order(authority, query)

    def embed_pending(self, embedder: Embedder, *, authority: str | None = None, limit: int | None = None) -> int:
        return self.vectors.embed_pending(embedder, authority=authority, limit=limit)

    def pending_vectors(self, model: str, authority: str | None = None) -> int:
        return self.vectors.pending_vectors(model, authority)

    # ---- sessions and refs ------------------------------------------------------------------------

    def _session_docs(self, authority: str, snap: Snapshot, ids: Iterable[str]) -> dict[str, SessionInfo]:
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        found = self.store.find(
            self.store.sessions,
            authority,
            {
                "query": self.store.visible(authority, snap, {"terms": {"session_id": wanted}}),
                "size": len(wanted),
                "_source": SESSION_FIELDS,
            },
        )
        return {s["session_id"]: session_info_of(s) for s in sources_of(found)}

    def session(self, authority: str, session_id: str) -> SessionInfo | None:
        snap = self.store.snapshot(authority)
        return self._session_docs(authority, snap, [session_id]).get(session_id)

    def resolve_sessions(self, authority: str, prefix: str) -> Resolution:
        snap = self.store.snapshot(authority)
        return self.searches.resolve_sessions_in(authority, snap, prefix)

    def resolve_messages(self, authority: str, session_id: str, prefix: str) -> Resolution:
        prefix = prefix.lower()
        if not prefix:
            return Resolution([], 0)
        snap = self.store.snapshot(authority)
        in_session = {"term": {"session_id": session_id}}
        responses = self.store.find_many(
            authority,
            [
                (
                    self.store.messages,
                    {
                        "query": self.store.visible(
                            authority, snap, in_session, {"prefix": {"uuid": {"value": prefix}}}
                        ),
                        "size": AMBIGUITY_CANDIDATES,
                        "track_total_hits": True,
                        "sort": [{"uuid": "asc"}],
                        "_source": ["uuid"],
                    },
                ),
                (
                    self.store.messages,
                    {
                        "query": self.store.visible(authority, snap, in_session, {"term": {"uuid": prefix}}),
                        "size": 0,
                        "track_total_hits": True,
                    },
                ),
            ],
        )
        total = total_of(responses[0])
        if total > 1 and total_of(responses[1]):
            return Resolution([prefix], 1)
        return Resolution([s["uuid"] for s in sources_of(responses[0])], total)

    def _first_message(
        self, authority: str, session_id: str, clause: dict[str, Any], **search: Any
    ) -> dict[str, Any] | None:
        """The first visible message of the session that matches `clause` (in `search`'s sort)."""
        snap = self.store.snapshot(authority)
        query = self.store.visible(authority, snap, {"term": {"session_id": session_id}}, clause)
        rows = sources_of(self.store.find(self.store.messages, authority, {"query": query, "size": 1, **search}))
        return rows[0] if rows else None

    def message(self, authority: str, session_id: str, uuid: str) -> Row | None:
        found = self._first_message(authority, session_id, {"term": {"uuid": uuid}}, _source=ROW_FIELDS)
        return row_of(found) if found is not None else None

    def printed_ref(self, authority: str, session_id: str, uuid: str) -> str:
        snap = self.store.snapshot(authority)
        pairs = [(session_id, uuid)]
        return self.searches.refs_from(
            authority, snap, pairs, self.store.find_many(authority, self.searches.refs_search(authority, snap, pairs))
        )[0]

    def turn_start(self, authority: str, session_id: str) -> int | None:
        found = self._first_message(
            authority, session_id, {"term": {"human": True}}, sort=[{"pos": "desc"}], _source=["pos"]
        )
        return int(found["pos"]) if found is not None else None

    def subagents(self, authority: str, session: SessionInfo) -> list[SessionInfo]:
        snap = self.store.snapshot(authority)
        linked: list[dict[str, Any]] = [{"term": {"parent_session": session.session_id}}]
        if session.spawn_keys:
            linked.append({"terms": {"spawn_key": list(session.spawn_keys)}})
        found = self.store.find(
            self.store.sessions,
            authority,
            {
                "query": self.store.visible(authority, snap, {"bool": {"should": linked, "minimum_should_match": 1}}),
                "size": MAX_WINDOW,
                "sort": [{"started_at": "asc"}, {"session_id": "asc"}],
                "_source": SESSION_FIELDS,
            },
        )
        return [session_info_of(s) for s in sources_of(found)]

    def scopes(self, authority: str) -> list[ScopeRow]:
        snap = self.store.snapshot(authority)
        rows: list[ScopeRow] = []
        after: dict[str, Any] | None = None
        while True:
            composite: dict[str, Any] = {
                "size": 1000,
                "sources": [{"project": {"terms": {"field": "project"}}}, {"cwd": {"terms": {"field": "cwd"}}}],
            }
            if after is not None:
                composite["after"] = after
            found = self.store.find(
                self.store.sessions,
                authority,
                {
                    "query": self.store.visible(authority, snap),
                    "size": 0,
                    "aggs": {"places": {"composite": composite}},
                },
            )
            places = found["aggregations"]["places"]
            rows += [ScopeRow(b["key"]["project"], b["key"]["cwd"], int(b["doc_count"])) for b in places["buckets"]]
            after = places.get("after_key")
            # A short page is the last: the composite still gives an after_key, whose page is empty.
            if len(places["buckets"]) < composite["size"] or after is None:
                break
        return sorted(rows, key=lambda r: (r.project, r.cwd))

    # ---- read and outline -------------------------------------------------------------------------

    def window(
        self, authority: str, session_id: str, anchor_pos: int, *, radius: int, around: int, visibility: Visibility
    ) -> Window:
        snap = self.store.snapshot(authority)
        shown = {
            "bool": {"should": [visibility_query(visibility), {"term": {"pos": anchor_pos}}], "minimum_should_match": 1}
        }

        def scope(*clauses: dict[str, Any]) -> dict[str, Any]:
            return self.store.visible(authority, snap, {"term": {"session_id": session_id}}, shown, *clauses)

        centre = anchor_pos
        if around:
            centre = self._moved_centre(authority, scope, anchor_pos, around)

        def side(bound: str, order: str) -> tuple[str, dict[str, Any]]:
            """The `radius` nearest visible messages on one side of the centre, nearest first."""
            query = scope({"range": {"pos": {bound: centre}}})
            body = {"query": query, "size": radius, "sort": [{"pos": order}], "track_total_hits": True}
            return self.store.messages, {**body, "_source": ROW_FIELDS}

        before, middle, after = self.store.find_many(
            authority,
            [
                side("lt", "desc"),
                (self.store.messages, {"query": scope({"term": {"pos": centre}}), "size": 1, "_source": ROW_FIELDS}),
                side("gt", "asc"),
            ],
        )
        earlier = [row_of(s) for s in sources_of(before)]
        later = [row_of(s) for s in sources_of(after)]
        rows = [*reversed(earlier), *(row_of(s) for s in sources_of(middle)), *later]
        if not rows:
            return Window([], 0, 0)
        return Window(rows, total_of(before) - len(earlier), total_of(after) - len(later))

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
            stepped, last = self.store.find_many(
                authority, [(self.store.messages, {**body, "from": skip}), (self.store.messages, edge)]
            )
            hits = sources_of(stepped) or sources_of(last)
            return int(hits[0]["pos"]) if hits else anchor_pos
        # Past the result window: walk with search_after (a session holds at most 10 M rows).
        after: list[Any] | None = None
        remaining = skip
        while True:
            page_body: dict[str, Any] = {**body, "size": min(MAX_WINDOW, remaining + 1)}
            if after is not None:
                page_body["search_after"] = after
            hits = self.store.find(self.store.messages, authority, page_body)["hits"]["hits"]
            if not hits:
                fallback = sources_of(self.store.find(self.store.messages, authority, edge))
                return int(fallback[0]["pos"]) if fallback else anchor_pos
            if remaining < len(hits):
                return int(hits[remaining]["_source"]["pos"])
            remaining -= len(hits)
            after = hits[-1]["sort"]

    def outline(
        self, authority: str, session_id: str, *, visibility: Visibility, scan: int, bookend: int
    ) -> OutlineRows:
        snap = self.store.snapshot(authority)
        in_session = self.store.visible(authority, snap, {"term": {"session_id": session_id}})
        head, tail = self.store.find_many(
            authority,
            [
                (
                    self.store.messages,
                    {"query": in_session, "size": scan, "sort": [{"pos": "asc"}], "_source": ROW_FIELDS},
                ),
                (
                    self.store.messages,
                    {"query": in_session, "size": scan, "sort": [{"pos": "desc"}], "_source": ROW_FIELDS},
                ),
            ],
        )
        return outline_rows(
            [row_of(s) for s in sources_of(head)], [row_of(s) for s in sources_of(tail)], visibility, bookend
        )

    # ---- topics -----------------------------------------------------------------------------------

    def session_topics(self, authority: str, session_id: str) -> list[TopicRow]:
        """Topics are not versioned: a label counts while its start message exists in the visible
        version. Most sessions have none, and then one search answers (search asks for every hit)."""
        self.store.ensure()
        topics = self.store.find(
            self.store.topics,
            authority,
            {
                "query": self.store.owned(authority, {"term": {"session_id": session_id}}),
                "size": MAX_WINDOW,
                "_source": ["start_uuid", "label"],
            },
        )
        labels = {t["start_uuid"]: t["label"] for t in sources_of(topics)}
        if not labels:
            return []
        snap = self.store.snapshot(authority)
        info = self._session_docs(authority, snap, [session_id]).get(session_id)
        if info is None:
            return []
        session = info
        starts = self.searches.starts(authority, snap, ((session_id, u) for u in labels))
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
        snap = self.store.snapshot(authority)
        if query is None:
            scope = self.store.owned(authority)
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
                    self.store.topics,
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
                searches.append(
                    (self.store.topics, {"query": self.store.owned(authority), "size": 0, "track_total_hits": 1})
                )
            responses = self.store.find_many(authority, searches)
            if start == 0:
                tagged = total_of(responses[1]) > 0
                if not tagged:
                    return [], False
            page = sources_of(responses[0])
            if not page:
                break
            sessions = self._session_docs(authority, snap, (t["session_id"] for t in page))
            starts = self.searches.starts(authority, snap, ((t["session_id"], t["start_uuid"]) for t in page))
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
