"""The OpenSearch engine's store (held by OpenSearchIndex, which hands it to the search and the
vector tier): the four indices and their mapping (opensearch_mapping), the authority's state
document and its painless scripts, the requests every part makes (the one scope of a read:
`visible`; `find`, `find_many`, `bulk`, scroll), and the writes: replace_session's allocate → bulk
→ flip → collect, delete_authority, add_topic, and the session documents' backfill. See
dovecote.recall.opensearch for the protocol."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from dovecote.platform.errors import InvalidArgument, Throttled, Unavailable
from dovecote.recall.model import (
    Session,
)
from dovecote.recall.ranking import session_document

if TYPE_CHECKING:
    from opensearchpy import OpenSearch
from dovecote.recall.opensearch_mapping import (
    ABANDON_SECONDS,
    ANALYSIS,
    BULK_BYTES,
    BULK_DOCS,
    DOCUMENT_MAPPING,
    DOCUMENTED_FIELD,
    GRACE_SECONDS,
    MAX_WINDOW,
    MESSAGE_SETTINGS,
    POS_LIMIT,
    REFRESH_POLICIES,
    SCROLL_PAGE,
    SESSION_FIELDS,
    SESSION_MAPPING,
    STATE_RETRIES,
    TOPIC_MAPPING,
    engine_errors,
    message_mapping,
    session_info_of,
    sources_of,
)

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


def state_id(authority: str) -> str:
    return f"{authority}|state"


def message_id(authority: str, gen: int, pos: int) -> str:
    return f"{authority}|{gen}|{pos}"


def session_doc_id(authority: str, gen: int) -> str:
    return f"{authority}|{gen}|s"


def conversation(kind: str, envelope: bool, text: str) -> bool:
    """What the semantic tier embeds and counts, as the SQLite engine's CONVERSATION: text and
    thinking rows, not envelopes, not blank (SQLite's trim() strips spaces only)."""
    return kind in ("text", "thinking") and not envelope and text.strip(" ") != ""


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def document_id(authority: str, gen: int) -> str:
    return f"{authority}|{gen}|d"


def document_source(authority: str, gen: int, session: Any, text: str) -> dict[str, Any]:
    """A session version's document (`session` a Session, or a SessionInfo for the backfill)."""
    count = session.message_count if hasattr(session, "message_count") else len(session.messages)
    return {
        "authority": authority,
        "gen": gen,
        "session_id": session.session_id,
        "project": session.project,
        "source": session.source,
        "cwd": session.cwd,
        "message_count": count,
        "subagent": session.agent is not None or session.parent_session is not None,
        "text": text,
    }


def topic_id(authority: str, session_id: str, start_uuid: str) -> str:
    # Session ids reach 400 characters and `_id` holds 512 bytes: a digest of the coordinates.
    return hashlib.sha256(f"{authority}\x00{session_id}\x00{start_uuid}".encode()).hexdigest()


AUTHORITIES_MAX = 10_000  # authorities one pass with no authority given walks (a terms aggregation)


DOCUMENT_FILL_PAGE = 100  # sessions a backfill looks at per search


class StoreOptions(TypedDict, total=False):
    """OpenSearchStore's options, as OpenSearchIndex passes them on."""

    index_prefix: str
    refresh: str  # REFRESH_POLICIES
    shards: int
    clock: Callable[[], float]
    # The configured embedder's dimension: its knn_vector field is in the mapping from the start.
    vector_dimension: int | None


class OpenSearchStore:
    name = "opensearch"

    def __init__(
        self,
        client: OpenSearch,
        *,
        index_prefix: str = "dovecote-recall",
        refresh: str = "wait_for",
        shards: int = 1,
        clock: Callable[[], float] = time.time,
        vector_dimension: int | None = None,
    ) -> None:
        if refresh not in REFRESH_POLICIES:
            raise ValueError(f"refresh must be one of {REFRESH_POLICIES}")
        self.client = client
        self.prefix = index_prefix
        self.messages = f"{index_prefix}-messages"
        self.sessions = f"{index_prefix}-sessions"
        self.topics = f"{index_prefix}-topics"
        self.documents = f"{index_prefix}-documents"
        self.refresh = refresh
        self._shards = shards
        self._clock = clock
        self._ready = False
        self._ready_lock = threading.Lock()
        # The configured embedder's dimension: its knn_vector field is in the mapping from the start
        # (another dimension's is added by the first embedding pass that needs it).
        self.vector_dimension = vector_dimension

    def close(self) -> None:
        self.client.close()

    # ---- indices ----------------------------------------------------------------------------------

    def ensure_indices(self) -> None:
        """Reach the node and create the indices if they are missing (the local runtime calls this
        at start, so a wrong URL fails `dovecote dev` instead of its first search)."""
        self.ensure()

    def ensure(self) -> None:
        """Create the indices on first use (once per process; losing a creation race is fine)."""
        if self._ready:
            return
        with self._ready_lock:
            if self._ready:
                return
            from opensearchpy.exceptions import RequestError

            for index, mapping, extra in (
                (self.messages, message_mapping(self.vector_dimension), MESSAGE_SETTINGS),
                (self.sessions, SESSION_MAPPING, {}),
                (self.topics, TOPIC_MAPPING, {}),
                (self.documents, DOCUMENT_MAPPING, {}),
            ):
                with engine_errors():
                    if self.client.indices.exists(index=index):
                        if index == self.sessions:  # made before the session documents: their flag
                            self.client.indices.put_mapping(index=index, body=DOCUMENTED_FIELD)
                        continue
                    body = {
                        "settings": {"number_of_shards": self._shards, "analysis": ANALYSIS, **extra},
                        "mappings": mapping,
                    }
                    try:
                        self.client.indices.create(index=index, body=body)
                    except RequestError as exc:
                        if exc.error != "resource_already_exists_exception":
                            raise
            self._ready = True

    def drop_indices(self) -> None:
        """Delete the four indices (tests and benchmarks that made their own prefix)."""
        with engine_errors(write=True):
            self.client.indices.delete(
                index=f"{self.messages},{self.sessions},{self.topics},{self.documents}", ignore_unavailable=True
            )
        self._ready = False

    # ---- requests ---------------------------------------------------------------------------------

    def snapshot(self, authority: str) -> Snapshot:
        self.ensure()
        with engine_errors():
            found = self.client.get(index=self.sessions, id=state_id(authority), routing=authority, ignore=[404])
        return Snapshot.of(found.get("_source") if found.get("found") else None)

    @staticmethod
    def visible(authority: str, snap: Snapshot, *clauses: dict[str, Any]) -> dict[str, Any]:
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
    def owned(authority: str, *clauses: dict[str, Any]) -> dict[str, Any]:
        """The scope of unversioned documents (topics) and of garbage collection."""
        return {"bool": {"filter": [{"term": {"authority": authority}}, *clauses]}}

    def find(self, index: str, authority: str, body: dict[str, Any], *, query: bool = False) -> dict[str, Any]:
        with engine_errors(query=query):
            return dict(self.client.search(index=index, body=body, routing=authority))

    def find_many(
        self, authority: str, searches: list[tuple[str, dict[str, Any]]], *, query: bool = False
    ) -> list[dict[str, Any]]:
        lines: list[dict[str, Any]] = []
        for index, body in searches:
            lines += [{"index": index, "routing": authority}, body]
        with engine_errors(query=query):
            responses = self.client.msearch(body=lines)["responses"]
            for response in responses:
                if "error" in response:
                    from opensearchpy.exceptions import TransportError

                    error = response["error"]
                    kind = error.get("type", "error") if isinstance(error, dict) else str(error)
                    raise TransportError(int(response.get("status") or 500), kind, error)
        return [dict(r) for r in responses]

    def update_state(self, authority: str, script: str, params: dict[str, Any]) -> dict[str, Any]:
        """One scripted update of the state document (created on first use), returning it after."""
        initial = {
            "authority": authority,
            "state": {"next_gen": 1, "floor": 0, "pending": {}, "dead": {}, "flipped": {}},
        }
        from opensearchpy.exceptions import ConflictError

        try:
            with engine_errors(write=True):
                return dict(
                    self.client.update(
                        index=self.sessions,
                        id=state_id(authority),
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

    def bulk(self, authority: str, actions: Iterable[tuple[dict[str, Any], dict[str, Any] | None]]) -> None:
        """Bulk requests of ~BULK_BYTES; the last one waits for the refresh that makes them all
        searchable (one shard: a refresh covers every earlier request)."""
        batch: list[str] = []
        size = 0

        def send(final: bool) -> None:
            if not batch:
                return
            with engine_errors(write=True):
                result = self.client.bulk(
                    body="".join(batch), routing=authority, refresh=self.refresh if final else "false"
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

    def authorities(self) -> list[str]:
        """Every authority with messages (a terms aggregation over every shard: passes that walk
        them all, with no authority given)."""
        self.ensure()
        with engine_errors():
            found = self.client.search(
                index=self.messages,
                body={
                    "size": 0,
                    "aggs": {"a": {"terms": {"field": "authority", "size": AUTHORITIES_MAX, "order": {"_key": "asc"}}}},
                },
            )
        return [b["key"] for b in found["aggregations"]["a"]["buckets"]]

    def _scan_ids(self, index: str, authority: str, query: dict[str, Any]) -> Iterator[list[str]]:
        """The ids matching `query`, a page at a time (scroll: `_delete_by_query` is not available)."""
        with engine_errors():
            page = self.client.search(
                index=index,
                body={"query": query, "size": SCROLL_PAGE, "_source": False, "sort": ["_doc"]},
                routing=authority,
                scroll="1m",
            )
        scroll_id = page.get("_scroll_id")
        try:
            while page["hits"]["hits"]:
                yield [hit["_id"] for hit in page["hits"]["hits"]]
                with engine_errors():
                    page = self.client.scroll(scroll_id=scroll_id, scroll="1m")
                scroll_id = page.get("_scroll_id", scroll_id)
        finally:
            if scroll_id:
                with engine_errors():
                    self.client.clear_scroll(scroll_id=scroll_id, ignore=[404])

    def _delete_matching(self, authority: str, indices: Iterable[str], query: dict[str, Any]) -> int:
        """Delete by query, emulated: scroll the ids, bulk-delete them, and wait for the refresh."""
        deleted = 0
        for index in indices:
            for ids in self._scan_ids(index, authority, query):
                self.bulk(
                    authority, (({"delete": {"_index": index, "_id": i, "routing": authority}}, None) for i in ids)
                )
                deleted += len(ids)
        return deleted

    # ---- writes -----------------------------------------------------------------------------------

    def replace_session(self, authority: str, session: Session, *, sha256: str) -> None:
        self.ensure()
        if len(session.messages) >= POS_LIMIT:
            raise InvalidArgument(f"a session holds at most {POS_LIMIT - 1} messages", field="messages")
        now = int(self._clock() * 1000)
        sid = session.session_id
        allocated = self.update_state(authority, _ALLOCATE, {"sid": sid, "now": now})
        snap = Snapshot.of(allocated["get"]["_source"])
        gen = snap.next_gen - 1
        try:
            live = self.find(
                self.sessions,
                authority,
                {
                    "query": self.visible(authority, snap, {"term": {"session_id": sid}}),
                    "size": 10,
                    "_source": ["gen"],
                },
            )
            previous = [int(s["gen"]) for s in sources_of(live)]
            self.bulk(authority, self._documents(authority, gen, session, sha256))
        except BaseException:
            self._abort(authority, gen)
            raise
        flipped = self.update_state(authority, _FLIP, {"sid": sid, "gen": gen, "prev": previous, "now": now})
        if flipped.get("result") == "noop":
            raise Unavailable("the replacement took too long and was abandoned; retry", session_id=sid)
        self._drop_orphan_topics(authority, session)
        self._collect(authority, Snapshot.of(flipped["get"]["_source"]), now)

    def _documents(
        self, authority: str, gen: int, session: Session, sha256: str
    ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        sid = session.session_id
        yield (
            {"index": {"_index": self.sessions, "_id": session_doc_id(authority, gen), "routing": authority}},
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
                "documented": True,
            },
        )
        yield (
            {"index": {"_index": self.documents, "_id": document_id(authority, gen), "routing": authority}},
            document_source(
                authority, gen, session, session_document((m.kind, m.envelope, m.text) for m in session.messages)
            ),
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
            if conversation(m.kind, m.envelope, m.text):
                doc["digest"] = text_digest(m.text)
            yield (
                {"index": {"_index": self.messages, "_id": message_id(authority, gen, pos), "routing": authority}},
                doc,
            )

    def _abort(self, authority: str, gen: int) -> None:
        """A write that failed before its flip: make its generation dead at once (nobody saw it)."""
        at = int(self._clock() * 1000) - GRACE_SECONDS * 1000
        try:
            self.update_state(authority, _ABORT, {"gens": [str(gen)], "at": at})
        except Exception:  # noqa: BLE001, S110 - still pending, hence hidden; abandoned after ABANDON_SECONDS
            pass

    def _drop_orphan_topics(self, authority: str, session: Session) -> None:
        """A topic survives a re-ingest when the message it starts at does."""
        found = self.find(
            self.topics,
            authority,
            {
                "query": self.owned(authority, {"term": {"session_id": session.session_id}}),
                "size": MAX_WINDOW,
                "_source": ["start_uuid"],
            },
        )
        kept = {m.uuid for m in session.messages}
        gone = [hit["_id"] for hit in found["hits"]["hits"] if hit["_source"]["start_uuid"] not in kept]
        if gone:
            self.bulk(
                authority, (({"delete": {"_index": self.topics, "_id": i, "routing": authority}}, None) for i in gone)
            )

    def _collect(self, authority: str, snap: Snapshot, now: int) -> None:
        """Garbage: generations dead for GRACE_SECONDS are deleted, then dropped from the state;
        generations pending for ABANDON_SECONDS are made dead first (their flip will be refused)."""
        abandoned = [g for g, (_, at) in snap.pending.items() if int(at) < now - ABANDON_SECONDS * 1000]
        if abandoned:
            self.update_state(authority, _ABORT, {"gens": abandoned, "at": now})
        ripe = [int(g) for g, at in snap.dead.items() if int(at) < now - GRACE_SECONDS * 1000]
        if not ripe:
            return
        self._delete_matching(
            authority, (self.messages, self.sessions, self.documents), self.owned(authority, {"terms": {"gen": ripe}})
        )
        self.update_state(authority, _COLLECT, {"gens": [str(g) for g in ripe]})

    def delete_authority(self, authority: str) -> None:
        """Atomic for readers: one state update raises the floor past every generation (the
        authority reads as empty from here); then the documents are deleted."""
        self.ensure()
        now = int(self._clock() * 1000)
        state = Snapshot.of(self.update_state(authority, _RESET, {"now": now})["get"]["_source"])
        self._delete_matching(
            authority,
            (self.messages, self.sessions, self.documents),
            self.owned(authority, {"range": {"gen": {"lt": state.floor}}}),
        )
        self._delete_matching(authority, (self.topics,), self.owned(authority))
        self.update_state(authority, _COLLECT, {"gens": [str(g) for g in state.hidden]})

    def add_topic(self, authority: str, session_id: str, start_uuid: str, label: str) -> None:
        self.ensure()
        with engine_errors(write=True):
            self.client.index(
                index=self.topics,
                id=topic_id(authority, session_id, start_uuid),
                routing=authority,
                refresh=self.refresh,
                body={
                    "authority": authority,
                    "session_id": session_id,
                    "start_uuid": start_uuid,
                    "label": label,
                    "seq": time.time_ns(),
                },
            )

    # ---- the session documents' backfill (the migration) ---------------------------------------------------------

    def fill_session_docs(self, authority: str | None = None, *, limit: int | None = None) -> int:
        """The migration to session documents: write the document of every visible session version
        that has none (indexed before them), oldest generation first, until none is left or `limit`
        sessions were written. Each session is first flagged `documented` (an update, which fails
        with 404 when a replace's garbage collection took the version meanwhile: then nothing is
        written, so no document outlives its generation), then its document is written. Safe to
        repeat and to run beside writers. Returns how many documents were written."""
        self.ensure()
        done = 0
        for who in [authority] if authority is not None else self.authorities():
            while limit is None or done < limit:
                snap = self.snapshot(who)
                size = DOCUMENT_FILL_PAGE if limit is None else min(DOCUMENT_FILL_PAGE, limit - done)
                undocumented = self.visible(who, snap)
                undocumented["bool"]["must_not"] = [
                    *undocumented["bool"].get("must_not", []),
                    {"term": {"documented": True}},
                ]
                found = self.find(
                    self.sessions,
                    who,
                    {
                        "query": undocumented,
                        "size": size,
                        "sort": [{"gen": "asc"}],
                        "_source": [*SESSION_FIELDS, "gen"],
                    },
                )
                page = sources_of(found)
                if not page:
                    break
                done += self._fill_page(who, snap, page)
        return done

    def _fill_page(self, authority: str, snap: Snapshot, page: list[dict[str, Any]]) -> int:
        flagged = self._flag_documented(authority, [int(s["gen"]) for s in page])
        actions = []
        for source in page:
            gen = int(source["gen"])
            if gen not in flagged:
                continue
            text = session_document(self._conversation_rows(authority, snap, gen))
            actions.append(
                (
                    {"index": {"_index": self.documents, "_id": document_id(authority, gen), "routing": authority}},
                    document_source(authority, gen, session_info_of(source), text),
                )
            )
        self.bulk(authority, actions)
        return len(actions)

    def _flag_documented(self, authority: str, gens: list[int]) -> set[int]:
        lines = []
        for gen in gens:
            lines.append(json.dumps({"update": {"_index": self.sessions, "_id": session_doc_id(authority, gen)}}))
            lines.append(json.dumps({"doc": {"documented": True}}))
        with engine_errors(write=True):
            result = self.client.bulk(body="\n".join(lines) + "\n", routing=authority, refresh=self.refresh)
        flagged = set()
        for gen, item in zip(gens, result["items"], strict=True):
            status = item["update"].get("status", 200)
            if status < 300:
                flagged.add(gen)
            elif status != 404:  # 404: collected meanwhile (a replace made it dead)
                raise Unavailable(
                    "the search engine refused a write; retry", error=str(item["update"].get("error"))[:300]
                )
        return flagged

    def _conversation_rows(self, authority: str, snap: Snapshot, gen: int) -> list[tuple[str, bool, str]]:
        """(kind, envelope, text) of a session version's rows in file order, a page at a time."""
        rows: list[tuple[str, bool, str]] = []
        after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {
                "query": self.visible(authority, snap, {"term": {"gen": gen}}),
                "size": MAX_WINDOW,
                "sort": [{"pos": "asc"}],
                "_source": ["kind", "envelope", "text"],
            }
            if after is not None:
                body["search_after"] = after
            hits = self.find(self.messages, authority, body)["hits"]["hits"]
            rows += [(h["_source"]["kind"], bool(h["_source"].get("envelope")), h["_source"]["text"]) for h in hits]
            if len(hits) < MAX_WINDOW:
                return rows
            after = hits[-1]["sort"]
