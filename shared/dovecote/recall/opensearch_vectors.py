"""The OpenSearch engine's semantic tier (ports.VectorTier) over its store, as the SQLite engine's
(sqlite_vectors.py) on a k-NN index.

- What is embedded and counted: conversation messages (opensearch_store.conversation, the SQLite
  engine's CONVERSATION), which carry a `digest` (SHA-256 of the text) from the lexical write.
- Storage: the vector on the message document itself, in the knn_vector field of its dimension
  (opensearch_mapping.vector_field: Lucene HNSW, cosine), with `vector_model` (fusion.model_key).
  A message pending is a visible conversation message whose `vector_model` is not the embedder's:
  a change of model (or of Titan's dimension) makes every message pending again, and re-embeds.
- Embedding runs off the request path (the transcript indexer after the lexical write, and its
  schedule): a page of pending messages (oldest row first), one search for vectors of the same
  model already stored for the same digests (a re-ingested session's new generation, an unchanged
  text elsewhere: not sent to the embedder again), the embedder for the rest, one bulk of partial
  updates. A message whose generation was collected meanwhile is skipped (404). The last bulk waits
  for the refresh, as every write here: a pass that returned is what the next search counts.
- Search: `coverage` counts the search's conversation messages and those with a vector of the model
  (one msearch with the nearest sessions); `nearest` is a `knn` query on the vector field with the
  search's filters inside it (the plugin's filtered search, exact while the filter selects fewer
  messages than k), collapsed on session_id: the closest message of each of the nearest sessions.
  Lucene's cosine score is (1 + cos) / 2; the fusion gets the cosine back.
  The k nearest messages hold at most k sessions: KNN_MESSAGES_PER_SESSION × the sessions wanted are
  read, so a session with many close messages cannot crowd out the rest (an approximation the SQLite
  engine's exact scan does not need: it groups every message).

Round trips: embed_pending, per page of EMBED_BATCH pending messages: 1 search (the page) + 1 search
(stored vectors of its digests) + 1 bulk; + 1 GET of the state per authority, + 1 mapping update per
process and dimension; with no authority given, + 1 search for the authorities. A semantic search
adds 1 msearch (coverage and the knn) to the lexical search's.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dovecote.platform.errors import CommitUnknown, Throttled, Unavailable
from dovecote.recall.fusion import Ranked, model_key
from dovecote.recall.opensearch_mapping import engine_errors, filter_clauses, vector_field, vector_mapping
from dovecote.recall.opensearch_store import OpenSearchStore, Snapshot
from dovecote.recall.ports import IndexQuery
from dovecote.recall.results import VectorCoverage

if TYPE_CHECKING:
    from dovecote.embedding.ports import Embedder

EMBED_BATCH = 64
# As the SQLite engine's: a session is near only with a positive cosine.
MIN_COSINE = 0.0
KNN_MESSAGES_PER_SESSION = 10
KNN_MIN_MESSAGES = 100
KNN_MAX = 10_000  # the plugin's largest k


@dataclass(frozen=True, slots=True)
class NearestRow:
    """A vector anchor: the session's closest message (its rowid and position) and the cosine."""

    session_id: str
    rowid: int
    pos: int
    cosine: float


def cosine_of(score: float) -> float:
    """Lucene's cosinesimil score back to the cosine."""
    return 2.0 * float(score) - 1.0


def compact(x: float) -> float:
    """A component at float32's precision (7 significant digits), which is what the k-NN index keeps:
    the vector's JSON in `_source` is then about 11 bytes a dimension, not a double's 20."""
    return float(f"{float(x):.7g}")


def conversation_clause() -> dict[str, Any]:
    return {"exists": {"field": "digest"}}


def withheld_clause(query: IndexQuery) -> list[dict[str, Any]]:
    if query.withhold is None:
        return []
    return [
        {
            "bool": {
                "filter": [
                    {"term": {"session_id": query.withhold.session_id}},
                    {"range": {"pos": {"gte": query.withhold.from_pos}}},
                ]
            }
        }
    ]


def knn_body(scope: dict[str, Any], model: str, vector: Sequence[float], sessions: int) -> dict[str, Any]:
    """The nearest-sessions search: `scope` (the search's filters, as a bool query) inside the knn
    query, so only the messages it selects are candidates; one hit per session (its closest)."""
    k = min(KNN_MAX, max(KNN_MIN_MESSAGES, sessions * KNN_MESSAGES_PER_SESSION))
    field = vector_field(len(vector))
    in_model = {"bool": {"filter": [scope, {"term": {"vector_model": model}}]}}
    return {
        "query": {"knn": {field: {"vector": [float(x) for x in vector], "k": k, "filter": in_model}}},
        "size": sessions,
        "collapse": {"field": "session_id"},
        "sort": [{"_score": "desc"}, {"rowid": "asc"}],
        "_source": False,
        "docvalue_fields": ["rowid", "pos"],
    }


def coverage_body(scope: dict[str, Any], model: str) -> dict[str, Any]:
    return {
        "query": scope,
        "size": 0,
        "track_total_hits": True,
        "aggs": {"vectored": {"filter": {"term": {"vector_model": model}}}},
    }


class OpenSearchVectors:
    """The VectorTier methods, and what the search reads for a fusion (opensearch_search), over the
    store's messages index."""

    def __init__(self, store: OpenSearchStore) -> None:
        self.store = store
        self._vector_fields: set[int] = set()
        # One pass at a time in a process (the indexer's run and its schedule may overlap): a second
        # would embed the same messages again. It returns at once; the running pass embeds them.
        self._passing = threading.Lock()

    # ---- writes -----------------------------------------------------------------------------------

    def _ensure_vector_field(self, dimension: int) -> None:
        """Add the dimension's field to the messages index (a no-op when it is there)."""
        self.store.ensure()
        if dimension in self._vector_fields:
            return
        from opensearchpy.exceptions import RequestError

        try:
            with engine_errors(write=True):
                self.store.client.indices.put_mapping(index=self.store.messages, body=vector_mapping(dimension))
        except RequestError as exc:
            # An index made before the tier (no index.knn, a static setting), or a node without the
            # k-NN plugin: the tier cannot run here, which must not fail the indexer's upload.
            raise Unavailable(
                "the messages index cannot hold vectors (made without index.knn, or no k-NN plugin): "
                "delete the recall indices and rebuild them",
                index=self.store.messages,
                error=str(exc.error)[:300],
            ) from exc
        self._vector_fields.add(dimension)

    def _pending_scope(self, authority: str, snap: Snapshot, model: str) -> dict[str, Any]:
        scope = self.store.visible(authority, snap, conversation_clause())
        scope["bool"]["must_not"] = [*scope["bool"].get("must_not", []), {"term": {"vector_model": model}}]
        return scope

    def pending_vectors(self, model: str, authority: str | None = None) -> int:
        total = 0
        for who in [authority] if authority is not None else self.store.authorities():
            snap = self.store.snapshot(who)
            found = self.store.find(
                self.store.messages,
                who,
                {"query": self._pending_scope(who, snap, model), "size": 0, "track_total_hits": True},
            )
            total += int(found["hits"]["total"]["value"])
        return total

    def embed_pending(self, embedder: Embedder, *, authority: str | None = None, limit: int | None = None) -> int:
        """Embed the messages lacking a vector of the embedder's model, oldest row first, until none is
        left (or `limit` messages were looked at). Returns how many got one (0 at once when another
        pass runs). An embedder failure propagates; what was written before it stays."""
        if not self._passing.acquire(blocking=False):
            return 0
        try:
            return self._embed_pending(embedder, authority, limit)
        except (CommitUnknown, Throttled) as exc:
            # Off the request path a write that may have landed is no different from one that did not:
            # a vector written twice is the same vector. The caller retries later, as for an embedder.
            raise Unavailable(f"the search engine did not take the vectors: {exc}", cause=exc.code) from exc
        finally:
            self._passing.release()

    def _embed_pending(self, embedder: Embedder, authority: str | None, limit: int | None) -> int:
        info = embedder.info
        self._ensure_vector_field(info.dimension)
        model = model_key(info.model_id, info.dimension)
        done, seen = 0, 0
        for who in [authority] if authority is not None else self.store.authorities():
            if limit is not None and seen >= limit:
                break
            left = None if limit is None else limit - seen
            looked, written = self._embed_authority(embedder, model, who, left)
            seen, done = seen + looked, done + written
        return done

    def _embed_authority(self, embedder: Embedder, model: str, authority: str, limit: int | None) -> tuple[int, int]:
        snap = self.store.snapshot(authority)
        scope = self._pending_scope(authority, snap, model)
        after: int | None = None
        seen, done = 0, 0
        while limit is None or seen < limit:
            size = EMBED_BATCH if limit is None else min(EMBED_BATCH, limit - seen)
            body: dict[str, Any] = {
                "query": scope,
                "size": size,
                "sort": [{"rowid": "asc"}],
                "_source": ["rowid", "text", "digest"],
            }
            if after is not None:
                body["search_after"] = [after]
            hits = self.store.find(self.store.messages, authority, body)["hits"]["hits"]
            if not hits:
                break
            after, seen = int(hits[-1]["_source"]["rowid"]), seen + len(hits)
            done += self._embed_page(embedder, model, authority, hits)
        return seen, done

    def _embed_page(self, embedder: Embedder, model: str, authority: str, hits: list[dict[str, Any]]) -> int:
        dimension = embedder.info.dimension
        field = vector_field(dimension)
        digests = sorted({hit["_source"]["digest"] for hit in hits})
        stored = self.store.find(
            self.store.messages,
            authority,
            {
                "query": self.store.owned(
                    authority,
                    {"terms": {"digest": digests}},
                    {"term": {"vector_model": model}},
                    {"exists": {"field": field}},
                ),
                "size": len(digests),
                "collapse": {"field": "digest"},
                "_source": ["digest", field],
            },
        )
        known: dict[str, list[float]] = {
            hit["_source"]["digest"]: hit["_source"][field] for hit in stored["hits"]["hits"] if field in hit["_source"]
        }
        wanted: dict[str, str] = {}
        for hit in hits:
            source = hit["_source"]
            if source["digest"] not in known:
                wanted.setdefault(source["digest"], source["text"])
        keys = list(wanted)
        if keys:  # the embedder runs between two requests, holding nothing
            known.update(zip(keys, embedder.embed([wanted[k] for k in keys]), strict=True))
        actions = []
        for hit in hits:
            vector = known[hit["_source"]["digest"]]
            # A zero vector (nothing to embed) has no cosine: the message is done, and never near.
            doc = {"vector_model": model, field: [compact(x) for x in vector] if any(vector) else None}
            actions.append((hit["_id"], doc))
        return self.update_vectors(authority, actions)

    def update_vectors(self, authority: str, actions: list[tuple[str, dict[str, Any]]]) -> int:
        lines = []
        for doc_id, doc in actions:
            lines.append(json.dumps({"update": {"_index": self.store.messages, "_id": doc_id, "routing": authority}}))
            lines.append(json.dumps({"doc": doc}))
        with engine_errors(write=True):
            result = self.store.client.bulk(body="\n".join(lines) + "\n", routing=authority, refresh=self.store.refresh)
        written = 0
        for item in result["items"]:
            status = item["update"].get("status", 200)
            if status < 300:
                written += 1
            elif status == 429:
                raise Throttled("the search engine is busy; retry with backoff")
            elif status != 404:  # 404: the generation was collected meanwhile (a re-ingest replaced it)
                raise Unavailable(
                    "the search engine refused a vector; retry", error=str(item["update"].get("error"))[:300]
                )
        return written

    # ---- search -----------------------------------------------------------------------------------

    def _vector_scope(self, authority: str, snap: Snapshot, query: IndexQuery) -> dict[str, Any]:
        """The search's conversation messages: its filters, less the caller's live turn."""
        scope = self.store.visible(authority, snap, conversation_clause(), *filter_clauses(query.filter))
        held = withheld_clause(query)
        if held:
            scope["bool"]["must_not"] = [*scope["bool"].get("must_not", []), *held]
        return scope

    def vector_anchors(
        self, authority: str, snap: Snapshot, query: IndexQuery, sessions: int
    ) -> tuple[VectorCoverage, list[NearestRow]]:
        """The coverage the search saw and its `sessions` nearest sessions, best first (one msearch;
        without a vector of the model in scope, or a blank question, only the coverage is asked)."""
        semantic = query.semantic
        assert semantic is not None
        scope = self._vector_scope(authority, snap, query)
        searches = [(self.store.messages, coverage_body(scope, semantic.model))]
        asks_knn = sessions > 0 and any(semantic.vector) and self._has_vector_field(len(semantic.vector))
        if asks_knn:
            searches.append((self.store.messages, knn_body(scope, semantic.model, semantic.vector, sessions)))
        responses = self.store.find_many(authority, searches, query=True)
        total = int(responses[0]["hits"]["total"]["value"])
        vectored = int(responses[0]["aggregations"]["vectored"]["doc_count"])
        coverage = VectorCoverage(ran=True, candidate_msgs=total, vectored_msgs=vectored, missing_msgs=total - vectored)
        nearest: list[NearestRow] = []
        for hit in responses[1]["hits"]["hits"] if asks_knn else []:
            cosine = cosine_of(hit["_score"] if hit.get("_score") is not None else hit["sort"][0])
            if cosine > MIN_COSINE:
                values = hit["fields"]
                nearest.append(
                    NearestRow(hit["fields"]["session_id"][0], int(values["rowid"][0]), int(values["pos"][0]), cosine)
                )
        return coverage, nearest

    def _has_vector_field(self, dimension: int) -> bool:
        """Whether the messages index has the dimension's vector field (the mapping is read again
        until it has: the indexer, in another process, adds it with the first vectors)."""
        if dimension in self._vector_fields:
            return True
        self.store.ensure()
        with engine_errors():
            found = self.store.client.indices.get_mapping(index=self.store.messages)
        for mapping in found.values():
            for name, spec in (mapping.get("mappings", {}).get("properties") or {}).items():
                if spec.get("type") == "knn_vector" and name == vector_field(int(spec.get("dimension") or 0)):
                    self._vector_fields.add(int(spec["dimension"]))
        return dimension in self._vector_fields


def nearest_ranked(nearest: list[NearestRow]) -> list[Ranked]:
    return [Ranked(n.session_id, n.rowid, n.cosine) for n in nearest]


__all__ = ["EMBED_BATCH", "NearestRow", "OpenSearchVectors", "coverage_body", "knn_body", "nearest_ranked"]
