"""The OpenSearch engine's search, over its store (and its vector tier when asked). One msearch asks
for the candidates (the best messages as plain hits, grouped by session here, the newest matching
timestamp, and for `session-doc` the session documents' order), then one msearch for the shown
rows, their highlighted snippets and their sessions. Also the page reads the engine's other reads
share: printed refs, session prefixes, topic starts."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from dovecote.recall.engine_rules import (
    RANKER_ROWS,
    SNIPPET_CHARS,
    nested_session_length,
    substring_snippet,
    topic_at,
    trigram_leaf,
    unique_length,
)
from dovecote.recall.fusion import Ranked, fuse
from dovecote.recall.model import (
    AMBIGUITY_CANDIDATES,
    REF_PREFIX,
    Row,
    SessionInfo,
    format_ref,
    session_prefix_matches,
)
from dovecote.recall.ports import (
    IndexQuery,
    Resolution,
    SearchPage,
    SessionHit,
)
from dovecote.recall.query import Term
from dovecote.recall.ranking import DOC_DEPTH, DOCUMENT_RANKER, Candidate, fuse_documents, rank_sessions, uses_documents
from dovecote.recall.ranking import Ranked as RankedSession
from dovecote.recall.results import VectorCoverage

if TYPE_CHECKING:
    pass
from dovecote.recall.opensearch_mapping import (
    COVERAGE_WEIGHT,
    MAX_WINDOW,
    POS_LIMIT,
    ROW_FIELDS,
    SESSION_FIELDS,
    SNIPPET_FRAGMENT,
    compile_node,
    document_filters,
    filter_clauses,
    fragment_snippet,
    leaf,
    row_of,
    session_info_of,
    sources_of,
    term_clause,
    total_of,
)
from dovecote.recall.opensearch_store import (
    OpenSearchStore,
    Snapshot,
    message_id,
)
from dovecote.recall.opensearch_vectors import OpenSearchVectors

# Lexical sessions a fusion reads, as the SQLite engine's sqlite.FUSION_DEPTH (the weighted fusion
# normalises over the list read, so both engines read the same depth).
FUSION_DEPTH = 50


class OpenSearchSearch:
    """A search over the store's indices (with the vector tier's nearest sessions when asked), and
    the page reads it shares with the engine's other reads (refs, session prefixes, topic starts)."""

    def __init__(self, store: OpenSearchStore, vectors: OpenSearchVectors) -> None:
        self.store = store
        self.vectors = vectors

    # ---- search -----------------------------------------------------------------------------------

    def search(self, authority: str, query: IndexQuery) -> SearchPage:
        snap = self.store.snapshot(authority)
        tier, field, keep = "word", "text", None
        # The session documents' order (`session-doc`) is asked in the candidates' msearch.
        extra = [self._documents_search(authority, snap, query)] if uses_documents(query.ranker, query.sort) else []
        candidates, truncated, withheld, newest, answers = self._candidates(authority, snap, query, field, keep, extra)
        documents = [hit["fields"]["session_id"][0] for hit in answers[0]["hits"]["hits"]] if answers else None
        if not candidates and not withheld:
            tier, field, keep = "trigram", "text.tri", trigram_leaf
            candidates, truncated, withheld, newest, _ = self._candidates(authority, snap, query, field, keep, [])
            documents = None  # the substring tier has no documents
        ranked = rank_sessions(candidates, ranker=query.ranker, sort=query.sort)
        if documents is not None:
            ranked = fuse_documents(ranked, documents)
        coverage = None
        if query.semantic is not None and not query.sort:
            fused = self._fused(authority, snap, query, ranked)
            shown, total, coverage = fused.shown, fused.total, fused.coverage
            reported = "vector" if not ranked and shown else tier
        else:
            shown, total, reported = [(r.best, r.score, r.coverage) for r in ranked[: query.limit]], len(ranked), tier
        hits: list[SessionHit] = []
        if shown:
            page = self._details(authority, snap, query, [best for best, _, _ in shown], tier)
            for best, score, matched in shown:
                row = page.rows[best.rowid]
                hits.append(
                    SessionHit(
                        session=page.sessions[row.session_id],
                        row=row,
                        snippet=page.snippets[best.rowid],
                        score=score,
                        coverage=matched,
                        ref=page.refs[best.rowid],
                        topic=topic_at(page.topics.get(row.session_id, ()), row.pos),
                    )
                )
        return SearchPage(
            hits=hits,
            total_sessions=total,
            total_is_lower_bound=truncated,
            newest=newest,
            withheld=withheld,
            tier=reported,
            vectors=coverage,
        )

    def _fused(self, authority: str, snap: Snapshot, query: IndexQuery, ranked: list[RankedSession]) -> _FusedPage:
        """The lexical ranking (FUSION_DEPTH deep, as the SQLite engine reads it) fused with the
        `limit` nearest sessions (dovecote.recall.fusion), cut to the page. The total adds the
        sessions only the vectors found (exact: every matching session is ranked here)."""
        semantic = query.semantic
        assert semantic is not None
        coverage, nearest = self.vectors.vector_anchors(authority, snap, query, query.limit)
        lexical = [
            Ranked(r.best.session_id, r.best, r.score, r.coverage) for r in ranked[: max(query.limit, FUSION_DEPTH)]
        ]
        anchors = [
            Ranked(n.session_id, Candidate(n.rowid, n.session_id, n.pos, "", n.cosine, frozenset()), n.cosine)
            for n in nearest
        ]
        fused = fuse(lexical, anchors, method=semantic.fusion, lexical_share=semantic.weight)
        matched = {r.best.session_id for r in ranked}
        only_vectors = sum(1 for n in nearest if n.session_id not in matched)
        shown = [(f.row, f.score, f.coverage) for f in fused[: query.limit]]
        return _FusedPage(shown, len(ranked) + only_vectors, coverage)

    def document_order(self, authority: str, query: IndexQuery) -> list[str]:
        """The session documents' order for the query (ranking.py's `session-doc`): what a search
        fuses, on its own (the conformance suite holds both engines to it)."""
        snap = self.store.snapshot(authority)
        index, body = self._documents_search(authority, snap, query)
        return [
            hit["fields"]["session_id"][0]
            for hit in self.store.find(index, authority, body, query=True)["hits"]["hits"]
        ]

    def _documents_search(self, authority: str, snap: Snapshot, query: IndexQuery) -> tuple[str, dict[str, Any]]:
        """The session documents' best DOC_DEPTH for the query's terms (OR-ed, each scored bm25 and
        summed, as FTS5's bm25 sums its phrases), among the sessions the session-level filters keep
        (ties: insertion order, the generation)."""
        words = [leaf(t, "text") for t in query.query.terms]
        scope = self.store.visible(authority, snap, *document_filters(query.filter))
        body = {
            "query": {"bool": {"filter": [scope], "should": words, "minimum_should_match": 1}},
            "size": DOC_DEPTH,
            "sort": [{"_score": "desc"}, {"gen": "asc"}],
            "track_total_hits": False,
            "_source": False,
            "docvalue_fields": ["session_id"],
        }
        return self.store.documents, body

    def _candidates(
        self,
        authority: str,
        snap: Snapshot,
        query: IndexQuery,
        field: str,
        keep: Callable[[Term], bool] | None,
        extra: list[tuple[str, dict[str, Any]]],
    ) -> tuple[list[Candidate], bool, int, str, list[dict[str, Any]]]:
        """The sessions matching the query, each with the rows its ranker reads (see the module
        docstring), whether the candidate ceiling was hit, the matches withheld as the caller's
        live turn, and the newest matching timestamp; with the answers to `extra`, searches sent in
        the same msearch (none when no term is left to match). A ceiling above MAX_WINDOW (a search
        returns at most that many hits) is read through a sampler (`_sampled_search`), else as plain
        hits (`_hits_searches`)."""
        # The visible matching filter, the caller's live turn (held out, and counted by the first
        # search) and the scored query.
        root = compile_node(query.query.root, field, keep)
        if root is None:
            return [], False, 0, "", []
        terms = query.query.terms
        clauses = [term_clause(i, t, field) for i, t in enumerate(terms) if keep is None or keep(t)]
        matching = self.store.visible(authority, snap, root, *filter_clauses(query.filter))
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
            count_held = {"query": {"bool": {"filter": [matching, held]}}, "size": 0, "track_total_hits": True}
            searches.append((self.store.messages, count_held))
        scored: dict[str, Any] = {"bool": {"filter": [matching], "should": clauses}}
        if held is not None:
            scored["bool"]["must_not"] = [held]
        sampled = query.max_candidates > MAX_WINDOW
        if sampled:
            searches.append((self.store.messages, _sampled_search(query, field, keep, scored)))
        else:
            searches += [(self.store.messages, body) for body in _hits_searches(query, matching, held, scored)]
        answers, responses = _split(self.store.find_many(authority, [*extra, *searches], query=True), len(extra))
        withheld = total_of(responses[0]) if held is not None else 0
        found = responses[-1]
        truncated = total_of(found) > query.max_candidates
        newest_buckets = (found if sampled else responses[-2])["aggregations"]["newest"]["buckets"]
        newest = newest_buckets[0]["key"] if newest_buckets else ""
        scored_rows = _sampled_rows(query, found) if sampled else _hit_rows(query, found)
        return _engine_order(scored_rows), truncated, withheld, newest, answers

    def _details(self, authority: str, snap: Snapshot, query: IndexQuery, best: list[Candidate], tier: str) -> _Details:
        """What the page prints, in one msearch: the returned rows with their highlighted snippets,
        their sessions, each row's printed-ref neighbours and the topics of those sessions; then,
        only when those sessions have topics, one search of the topics' start positions."""
        doc_ids = [message_id(authority, c.rowid // POS_LIMIT, c.rowid % POS_LIMIT) for c in best]
        rows_body: dict[str, Any] = {
            "query": self.store.visible(authority, snap, {"ids": {"values": doc_ids}}),
            "size": len(doc_ids),
            "_source": [*ROW_FIELDS, "rowid"],
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
            "query": self.store.visible(authority, snap, {"terms": {"session_id": session_ids}}),
            "size": len(session_ids),
            "_source": SESSION_FIELDS,
        }
        # Topics are not versioned: a label counts while its start message exists (checked below).
        topics_body = {
            "query": self.store.owned(authority, {"terms": {"session_id": session_ids}}),
            "size": MAX_WINDOW,
            "_source": ["session_id", "start_uuid", "label"],
        }
        self.store.ensure()
        rows_found, sessions_found, topics_found = self.store.find_many(
            authority,
            [(self.store.messages, rows_body), (self.store.sessions, sessions_body), (self.store.topics, topics_body)],
        )
        rows: dict[int, Row] = {}
        snippets: dict[int, str] = {}
        for hit in rows_found["hits"]["hits"]:
            rowid = int(hit["_source"]["rowid"])
            row = row_of(hit["_source"])
            rows[rowid] = row
            fragments = (hit.get("highlight") or {}).get("text") or []
            if tier == "word" and fragments:
                snippets[rowid] = fragment_snippet(row.text, fragments[0])
            elif tier == "word":
                snippets[rowid] = row.text[:SNIPPET_CHARS]
            else:
                snippets[rowid] = substring_snippet(row.text, [t.text for t in terms])
        sessions = {s["session_id"]: session_info_of(s) for s in sources_of(sessions_found)}
        # The refs need each row's uuid, which only the rows search gives: a second msearch, with
        # the topics' start positions when those sessions have topics.
        labels = {(t["session_id"], t["start_uuid"]): t["label"] for t in sources_of(topics_found)}
        pairs = [(row.session_id, row.uuid) for row in rows.values()]
        searches = self.refs_search(authority, snap, pairs)
        refs_at = len(searches)
        if labels:
            searches.append(self.starts_search(authority, snap, labels))
        responses = self.store.find_many(authority, searches)
        refs = dict(zip(rows, self.refs_from(authority, snap, pairs, responses[:refs_at]), strict=True))
        topics: dict[str, list[tuple[int, str]]] = {}
        if labels:
            for (session_id, uuid), pos in _starts_from(responses[-1], labels).items():
                topics.setdefault(session_id, []).append((pos, labels[(session_id, uuid)]))
        return _Details(rows, snippets, sessions, refs, topics)

    # ---- refs, sessions and topic starts (search reads them for a whole page) -------------------

    def resolve_sessions_in(self, authority: str, snap: Snapshot, prefix: str) -> Resolution:
        segments = prefix.lower().split("/")
        searches = [
            (
                self.store.sessions,
                {
                    "query": self.store.visible(authority, snap, {"term": {"session_id": prefix}}),
                    "size": 1,
                    "_source": ["session_id"],
                },
            )
        ]
        valid = bool(prefix) and all(segments)
        depth = len(segments) - 1
        if valid:
            scope = self.store.visible(
                authority, snap, {"term": {"depth": depth}}, {"prefix": {"sid_lower": {"value": segments[0]}}}
            )
            searches.append(
                (
                    self.store.sessions,
                    {
                        "query": scope,
                        "size": AMBIGUITY_CANDIDATES if depth == 0 else MAX_WINDOW,
                        "track_total_hits": True,
                        "sort": [{"sid_lower": "asc"}, {"session_id": "asc"}],
                        "_source": ["session_id"],
                    },
                )
            )
        responses = self.store.find_many(authority, searches)
        exact = sources_of(responses[0])
        if exact:
            return Resolution([exact[0]["session_id"]], 1)
        if not valid:
            return Resolution([], 0)
        ids = [s["session_id"] for s in sources_of(responses[1])]
        if depth == 0:
            return Resolution(ids, total_of(responses[1]))
        matched = sorted(i for i in ids if session_prefix_matches(prefix, i))
        return Resolution(matched[:AMBIGUITY_CANDIDATES], len(matched))

    def refs_search(
        self, authority: str, snap: Snapshot, messages: list[tuple[str, str]]
    ) -> list[tuple[str, dict[str, Any]]]:
        """The searches printed refs are made from (read by _refs_from): each message's neighbours
        in sort order, its uuid's within its session and its top-level session id's among the
        authority's, each a `terms` aggregation of size 1 (2 after) ordered by key; the whole page's
        uuid neighbours in one search of the messages, its session neighbours in one of the sessions.

        Only a neighbour sharing the first REF_PREFIX characters can lengthen a ref, so every range
        stays inside that prefix: a keyword range enumerates every term it spans (an open `uuid < x`
        over 100k uuids cost ~25 ms a hit), and the aggregations see a few documents."""

        def neighbour(
            field: str, bound: dict[str, Any], order: str, size: int, *more: dict[str, Any]
        ) -> dict[str, Any]:
            return {
                "filter": {"bool": {"filter": [{"range": {field: bound}}, *more]}},
                "aggs": {
                    "near": {"terms": {"field": field, "size": size, "order": {"_key": order}, "execution_hint": "map"}}
                },
            }

        uuid_scopes, uuid_aggs, sid_scopes, sid_aggs = [], {}, [], {}
        for n, (session_id, uuid) in enumerate(messages):
            in_session = {"term": {"session_id": session_id}}
            head = uuid[:REF_PREFIX]
            uuid_scopes.append(
                {"bool": {"filter": [in_session, {"range": {"uuid": {"gte": head, "lt": _past(head)}}}]}}
            )
            uuid_aggs[f"{n}_uuid_before"] = neighbour("uuid", {"gte": head, "lt": uuid}, "desc", 1, in_session)
            uuid_aggs[f"{n}_uuid_after"] = neighbour("uuid", {"gt": uuid, "lt": _past(head)}, "asc", 1, in_session)
            if "/" not in session_id:  # a thread's session part is resolved apart (_refs_from)
                lowered = session_id.lower()
                head = lowered[:REF_PREFIX]
                sid_scopes.append({"range": {"sid_lower": {"gte": head, "lt": _past(head)}}})
                other = {"bool": {"must_not": [in_session]}}
                sid_aggs[f"{n}_sid_before"] = neighbour("sid_lower", {"gte": head, "lt": lowered}, "desc", 1)
                sid_aggs[f"{n}_sid_after"] = neighbour(
                    "sid_lower", {"gte": lowered, "lt": _past(head)}, "asc", 2, other
                )

        def body(scopes: list[dict[str, Any]], *more: dict[str, Any], aggs: dict[str, Any]) -> dict[str, Any]:
            anyof = {"bool": {"should": scopes, "minimum_should_match": 1}}
            return {"query": self.store.visible(authority, snap, anyof, *more), "size": 0, "aggs": aggs}

        searches = [(self.store.messages, body(uuid_scopes, aggs=uuid_aggs))]
        if sid_aggs:
            searches.append((self.store.sessions, body(sid_scopes, {"term": {"depth": 0}}, aggs=sid_aggs)))
        return searches

    def refs_from(
        self, authority: str, snap: Snapshot, messages: list[tuple[str, str]], responses: list[dict[str, Any]]
    ) -> list[str]:
        """The printed refs from _refs_search's responses, in order (a subagent thread's session part
        is lengthened by resolving its prefixes: 1 msearch per length tried)."""
        found = {**responses[0]["aggregations"], **(responses[1]["aggregations"] if len(responses) > 1 else {})}

        def values(n: int, *names: str) -> list[str]:
            return [b["key"] for name in names for b in found.get(f"{n}_{name}", {}).get("near", {}).get("buckets", [])]

        out = []
        for n, (session_id, uuid) in enumerate(messages):
            uuid_len = unique_length(uuid, values(n, "uuid_before", "uuid_after"))
            if "/" not in session_id:
                session_len = unique_length(session_id.lower(), values(n, "sid_before", "sid_after"))
            else:
                session_len = nested_session_length(session_id, lambda p: self.resolve_sessions_in(authority, snap, p))
            out.append(format_ref(session_id, uuid, session_len, uuid_len))
        return out

    def starts_search(
        self, authority: str, snap: Snapshot, pairs: Iterable[tuple[str, str]]
    ) -> tuple[str, dict[str, Any]]:
        """The search for the position of each (session, start uuid) that exists in the visible
        version (_starts_from reads its answer)."""
        wanted = sorted(set(pairs))
        body = {
            "query": self.store.visible(
                authority,
                snap,
                {"terms": {"session_id": sorted({s for s, _ in wanted})}},
                {"terms": {"uuid": sorted({u for _, u in wanted})}},
            ),
            "size": min(MAX_WINDOW, len(wanted) * 2),
            "_source": ["session_id", "uuid", "pos"],
        }
        return self.store.messages, body

    def starts(self, authority: str, snap: Snapshot, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
        wanted = set(pairs)
        if not wanted:
            return {}
        index, body = self.starts_search(authority, snap, wanted)
        return _starts_from(self.store.find(index, authority, body), wanted)


def _hits_searches(
    query: IndexQuery, matching: dict[str, Any], held: dict[str, Any] | None, scored: dict[str, Any]
) -> list[dict[str, Any]]:
    """The newest matching timestamp, filter-only (no scoring); then the best max_candidates rows as
    plain hits, grouped by session by `_hit_rows`. A sampler + terms aggregation with top_hits per
    session read the same rows, at the cost of one top_hits fetch per session (docs/benchmarks/notes.md#recall)."""
    return [
        {
            "query": {"bool": {"filter": [matching], "must_not": [held] if held is not None else []}},
            "size": 0,
            "track_total_hits": False,
            "aggs": {"newest": {"terms": {"field": "ts", "size": 1, "order": {"_key": "desc"}}}},
        },
        {
            "query": scored,
            "size": query.max_candidates,
            "sort": [{"_score": "desc"}, {"rowid": "asc"}],
            "track_scores": True,
            "track_total_hits": query.max_candidates + 1,
            "_source": False,
            "docvalue_fields": ["rowid", "pos", "ts", "session_id"],
        },
    ]


def _hit_rows(query: IndexQuery, found: dict[str, Any]) -> list[tuple[float, Candidate]]:
    """The candidates of `_hits_searches`'s answer, each with its engine score."""
    terms = query.query.terms
    # The hits come best first (score desc, rowid asc): each session's rows in ranker order.
    sessions: dict[str, list[tuple[float, int, int, str, frozenset[int]]]] = {}
    for hit in found["hits"]["hits"]:
        values = hit["fields"]
        sessions.setdefault(values["session_id"][0], []).append(
            (
                float(hit["_score"]),
                int(values["rowid"][0]),
                int(values["pos"][0]),
                (values.get("ts") or [""])[0],
                _terms_of(tuple(hit.get("matched_queries") or [])),
            )
        )
    rows_read = RANKER_ROWS[query.ranker]
    scored_rows: list[tuple[float, Candidate]] = []
    # Sessions in a terms aggregation's order (rows desc, id asc): rowids repeat across the
    # sessions of one generation, so equal (score, rowid) pairs keep this order.
    for sid, rows in sorted(sessions.items(), key=lambda item: (-len(item[1]), item[0])):
        union = None
        if query.ranker in ("session", DOCUMENT_RANKER) and len(terms) > 1:
            union = frozenset().union(*(r[4] for r in rows))
        session_score = None
        if query.ranker == "fused":
            # Every row's score, less the coverage weight of every (row, term) match.
            matches = sum(len(r[4]) for r in rows) if len(terms) > 1 else len(rows)
            session_score = sum(r[0] for r in rows) - matches * COVERAGE_WEIGHT
        picked = list(rows[:rows_read])
        if query.sort in ("newest", "oldest"):  # the row the sort picks per session (ranking.py)
            # ts then rowid ascending; a missing ts is last for newest, first for oldest.
            dated = [r for r in rows if r[3]]
            if query.sort == "newest" and dated:
                latest = max(r[3] for r in dated)
                pick = min((r for r in dated if r[3] == latest), key=lambda r: r[1])
            else:
                pick = min(rows, key=lambda r: (r[3], r[1]))
            if pick not in picked:
                picked.append(pick)
        for encoded, rowid, pos, ts, matched in picked:
            scored_rows.append((encoded, _candidate(encoded, rowid, sid, pos, ts, matched, union, session_score)))
    return scored_rows


def _sampled_search(
    query: IndexQuery, field: str, keep: Callable[[Term], bool] | None, scored: dict[str, Any]
) -> dict[str, Any]:
    """The candidates for a ceiling above MAX_WINDOW: a sampler of the best max_candidates messages,
    a terms aggregation of their sessions with top_hits of the rows each ranker reads (one top_hits
    fetch per session: slower), and the newest matching timestamp."""
    terms = query.query.terms
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
    if query.ranker in ("session", "fused", DOCUMENT_RANKER) and len(terms) > 1:
        for i, term in enumerate(terms):
            if keep is None or keep(term):
                per_session[f"t{i}"] = {"filter": leaf(term, field)}
    if query.ranker == "fused":  # every matching row's score: bm25 + the weight per term matched
        per_session["total"] = {"sum": {"script": {"source": "_score"}}}
    return {
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
    }


def _sampled_rows(query: IndexQuery, found: dict[str, Any]) -> list[tuple[float, Candidate]]:
    """The candidates of `_sampled_search`'s answer, each with its engine score."""
    terms = query.query.terms
    scored_rows: list[tuple[float, Candidate]] = []
    for bucket in found["aggregations"]["sample"]["sessions"]["buckets"]:
        sid = bucket["key"]
        union = None
        if query.ranker in ("session", DOCUMENT_RANKER) and len(terms) > 1:
            union = frozenset(i for i in range(len(terms)) if bucket.get(f"t{i}", {}).get("doc_count"))
        session_score = None
        if query.ranker == "fused":
            # Less the coverage weight of every (row, term) match: one per row for one term.
            matches = sum(bucket.get(f"t{i}", {}).get("doc_count", 0) for i in range(len(terms)))
            matches = matches if len(terms) > 1 else int(bucket["doc_count"])
            session_score = float(bucket["total"]["value"]) - matches * COVERAGE_WEIGHT
        seen: set[int] = set()
        hits = bucket["top"]["hits"]["hits"] + (bucket["picked"]["hits"]["hits"] if "picked" in bucket else [])
        for hit in hits:
            values = hit["fields"]
            rowid = int(values["rowid"][0])
            if rowid in seen:
                continue
            seen.add(rowid)
            matched = _terms_of(tuple(hit.get("matched_queries") or []))
            encoded = float(hit["_score"] if hit.get("_score") is not None else hit["sort"][0])
            pos, ts = int(values["pos"][0]), (values.get("ts") or [""])[0]
            scored_rows.append((encoded, _candidate(encoded, rowid, sid, pos, ts, matched, union, session_score)))
    return scored_rows


def _split(responses: list[dict[str, Any]], n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """An msearch's answers to the first `n` searches, and to the rest."""
    return responses[:n], responses[n:]


def _past(prefix: str) -> str:
    """A bound above every string that starts with `prefix` (ids are ASCII)."""
    return prefix + "\U0010ffff"


def _starts_from(found: dict[str, Any], wanted: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
    want = set(wanted)
    return {
        (s["session_id"], s["uuid"]): int(s["pos"]) for s in sources_of(found) if (s["session_id"], s["uuid"]) in want
    }


@dataclass(frozen=True, slots=True)
class _FusedPage:
    shown: list[tuple[Candidate, float, int]]  # (the row shown, fused score, coverage), best first
    total: int
    coverage: VectorCoverage


@dataclass(frozen=True, slots=True)
class _Details:
    """What a search page prints, by rowid (rows, snippets, refs) or session id."""

    rows: dict[int, Row]
    snippets: dict[int, str]
    sessions: dict[str, SessionInfo]
    refs: dict[int, str]
    topics: dict[str, list[tuple[int, str]]]  # (start position, label) of the sessions' live topics


def _candidate(
    encoded: float,
    rowid: int,
    session_id: str,
    pos: int,
    timestamp: str,
    matched: frozenset[int],
    union: frozenset[int] | None,
    session_score: float | None,
) -> Candidate:
    """A row for the ranker: its engine score (`encoded`) less the coverage weight of its matches."""
    return Candidate(
        rowid=rowid,
        session_id=session_id,
        pos=pos,
        timestamp=timestamp,
        score=encoded - len(matched) * COVERAGE_WEIGHT,
        terms=matched,
        session_terms=union,
        session_score=session_score,
    )


def _engine_order(scored_rows: list[tuple[float, Candidate]]) -> list[Candidate]:
    """The engine's relevance order (coverage, then bm25), ties in insertion order."""
    scored_rows.sort(key=lambda pair: (-pair[0], pair[1].rowid))
    return [c for _, c in scored_rows]


@lru_cache(maxsize=4096)
def _terms_of(names: tuple[str, ...]) -> frozenset[int]:
    """The query terms a hit matched, from its `matched_queries` names (`t<i>`): many rows share a set."""
    return frozenset(int(n[1:]) for n in names if n.startswith("t"))
