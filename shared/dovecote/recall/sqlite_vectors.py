"""The embedded engine's vector tier: one vector per conversation message, in the same database as the
lexical index (tables in sqlite_schema.py), scored by exact cosine.

- What is embedded: text and thinking rows that are not envelopes and not blank (CONVERSATION). Tool
  rows and envelopes are not: the tier is about what people and agents said. `candidate_msgs` counts
  the same rows, so coverage can reach 100 %.
- Storage: a vector belongs to a text. `embeddings` holds one float32 little-endian blob per
  (authority, model key, SHA-256 of the text); `message_digests` maps a row to its digest once
  embedded (a trigger drops it with the row). A re-ingested session gets new row ids but finds its
  unchanged texts' vectors by digest without calling the embedder again; a new model key finds none
  and re-embeds.
- Embedding runs off the request path (the transcript indexer, and the local runtime's backfill),
  in batches: the rows are read under the engine's lock, the embedder runs without it, and the
  vectors are written in one transaction that keeps only the rows still holding the text embedded.
- Scoring: sqlite-vec's `vec_distance_cosine` in the statement that applies the search's filters,
  with the best message per session and the top k sessions chosen in SQL. When sqlite-vec cannot
  load (sqlite_driver.py), numpy computes the same exact cosine over the same blobs (logged once at
  open). Exact, not approximate: at 100k messages the scan is tens of milliseconds (docs/benchmarks/notes.md).
"""

from __future__ import annotations

import hashlib
import json
import threading
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dovecote.recall.fusion import Ranked, fuse, model_key
from dovecote.recall.results import VectorCoverage
from dovecote.recall.sqlite_driver import load_sqlite_vec

if TYPE_CHECKING:
    from dovecote.embedding.ports import Embedder
    from dovecote.recall.ports import SemanticQuery

CONVERSATION = "m.kind IN ('text', 'thinking') AND m.envelope = 0 AND trim(m.text) != ''"
EMBED_BATCH = 64
# A session is near only with a positive cosine: an orthogonal or opposite message is no anchor (with
# the hashing fake, one that shares no word; with a model, an unrelated text scores about 0).
MIN_COSINE = 0.0
_JOIN = (
    "JOIN message_digests d ON d.id = m.id "
    "JOIN embeddings e ON e.authority = m.authority AND e.model = ? AND e.digest = d.digest"
)


@dataclass(frozen=True, slots=True)
class Scope:
    """The search's filters as SQL over `messages m` (and `sessions s` when `joins` names it)."""

    joins: str
    where: list[str]
    params: list[Any]


@dataclass(frozen=True, slots=True)
class FusedPage:
    shown: list[tuple[str, int, int, float]]  # (session, rowid of its hit, coverage, fused score), best first
    total: int
    lower_bound: bool
    tier: str  # "vector" when only the vectors found something, else ""
    coverage: VectorCoverage


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pack(vector: Sequence[float]) -> bytes:
    return array("f", vector).tobytes()  # float32, native order: sqlite-vec reads the same layout


class SqliteVectors:
    def __init__(self, db: Any, lock: threading.RLock) -> None:
        self._db = db
        self._lock = lock
        self.sqlite_vec = load_sqlite_vec(db)  # its version, or '' (numpy scores instead)
        # (model, authority) → the connection's total_changes when a pass found nothing pending: the
        # engine's one connection makes every write in this process, so an unchanged count means
        # nothing new to embed, and the local runtime's backfill can poll often for free.
        self._settled: dict[tuple[str, str | None], int] = {}
        # One pass at a time (the indexer and the local runtime's backfill may both start one): a second
        # would embed the same rows again. It returns at once; the running pass embeds them.
        self._passing = threading.Lock()

    # ---- writes ---------------------------------------------------------------------------------

    def pending_vectors(self, model: str, authority: str | None = None) -> int:
        where, params = self._pending_where(model, authority)
        with self._lock:
            return int(
                self._db.execute(
                    f"SELECT COUNT(*) FROM messages m LEFT JOIN message_digests d ON d.id = m.id WHERE {where}",  # noqa: S608
                    params,
                ).fetchone()[0]
            )

    @staticmethod
    def _pending_where(model: str, authority: str | None) -> tuple[str, list[Any]]:
        where = [
            CONVERSATION,
            "NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.authority = m.authority AND e.model = ? "
            "AND e.digest = d.digest)",
        ]
        params: list[Any] = [model]
        if authority is not None:
            where.append("m.authority = ?")
            params.append(authority)
        return " AND ".join(where), params

    def embed_pending(
        self, embedder: Embedder, *, authority: str | None = None, limit: int | None = None, batch: int = EMBED_BATCH
    ) -> int:
        """Embed messages lacking a vector of the embedder's model, oldest first, `batch` texts per call
        to the embedder, until none is left (or `limit` messages were looked at). Returns how many
        messages got a vector (0 at once when another pass is running). An embedder failure propagates;
        what was written before it stays."""
        if not self._passing.acquire(blocking=False):
            return 0
        try:
            return self._embed_pending(embedder, authority, limit, batch)
        finally:
            self._passing.release()

    def _embed_pending(self, embedder: Embedder, authority: str | None, limit: int | None, batch: int) -> int:
        info = embedder.info
        model = model_key(info.model_id, info.dimension)
        where, params = self._pending_where(model, authority)
        with self._lock:
            if self._settled.get((model, authority)) == self._db.total_changes:
                return 0
        after, seen, done = 0, 0, 0
        while limit is None or seen < limit:
            size = batch if limit is None else min(batch, limit - seen)
            with self._lock:
                rows = self._db.execute(
                    f"SELECT m.id, m.authority, m.text FROM messages m LEFT JOIN message_digests d ON d.id = m.id "  # noqa: S608
                    f"WHERE {where} AND m.id > ? ORDER BY m.id LIMIT ?",
                    [*params, after, size],
                ).fetchall()
                if not rows and after == 0:
                    self._settled[(model, authority)] = self._db.total_changes
            if not rows:
                break
            after, seen = rows[-1][0], seen + len(rows)
            done += self._embed_rows(embedder, model, rows)
        return done

    def _embed_rows(self, embedder: Embedder, model: str, rows: list[tuple[int, str, str]]) -> int:
        digests = {rowid: digest(text) for rowid, _, text in rows}
        with self._lock:
            known = {
                (a, h)
                for a, h in self._db.execute(
                    "SELECT authority, digest FROM embeddings WHERE model = ? AND digest IN "
                    "(SELECT value FROM json_each(?))",
                    (model, json.dumps(sorted(set(digests.values())))),
                )
            }
        wanted: dict[tuple[str, str], str] = {}
        for rowid, authority, text in rows:
            if (authority, digests[rowid]) not in known:
                wanted.setdefault((authority, digests[rowid]), text)
        keys = list(wanted)
        vectors = embedder.embed([wanted[k] for k in keys]) if keys else []  # outside the lock: seconds
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO embeddings (authority, model, digest, vec) VALUES (?, ?, ?, ?)",
                    [(a, model, h, pack(v)) for (a, h), v in zip(keys, vectors, strict=True)],
                )
                before = self._db.total_changes
                # Only rows that still hold the text embedded: a re-ingest meanwhile replaced the others
                # (and may have reused their ids).
                self._db.executemany(
                    "INSERT OR REPLACE INTO message_digests (id, digest) SELECT ?, ? "
                    "WHERE EXISTS (SELECT 1 FROM messages WHERE id = ? AND text = ?)",
                    [(rowid, digests[rowid], rowid, text) for rowid, _, text in rows],
                )
                written = self._db.total_changes - before
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return int(written)

    # ---- search ---------------------------------------------------------------------------------

    def coverage(self, scope: Scope, model: str) -> VectorCoverage:
        """The conversation messages the search selects, and how many have a vector of `model`."""
        total, vectored = self._db.execute(
            "SELECT COUNT(*), COUNT(e.digest) FROM messages m LEFT JOIN message_digests d ON d.id = m.id "  # noqa: S608
            "LEFT JOIN embeddings e ON e.authority = m.authority AND e.model = ? AND e.digest = d.digest "
            f"{scope.joins} WHERE {' AND '.join([*scope.where, CONVERSATION])}",
            [model, *scope.params],
        ).fetchone()
        return VectorCoverage(ran=True, candidate_msgs=total, vectored_msgs=vectored, missing_msgs=total - vectored)

    def fused_page(
        self,
        scope: Scope,
        semantic: SemanticQuery,
        limit: int,
        lexical_shown: list[tuple[str, int, int, float]],
        lexical_total: int,
    ) -> FusedPage:
        """The lexical ranking (read deeper than the page) fused with the `limit` nearest sessions
        (dovecote.recall.fusion), cut to the page. The total adds the sessions only the vectors found;
        it is a lower bound when the lexical list was deeper than what was read (one of those may be
        in it)."""
        coverage = self.coverage(scope, semantic.model)
        nearest = self.nearest(scope, semantic.model, semantic.vector, limit)
        lexical = [Ranked(sid, rowid, score, cov) for sid, rowid, cov, score in lexical_shown]
        fused = fuse(lexical, nearest, method=semantic.fusion, lexical_share=semantic.weight)
        seen = {r.session for r in lexical}
        only_vectors = sum(1 for r in nearest if r.session not in seen)
        shown = [(f.session, f.row, f.coverage, f.score) for f in fused[:limit]]
        return FusedPage(
            shown=shown,
            total=lexical_total + only_vectors,
            lower_bound=lexical_total > len(lexical) and only_vectors > 0,
            tier="vector" if not lexical and shown else "",
            coverage=coverage,
        )

    def nearest(self, scope: Scope, model: str, vector: Sequence[float], k: int) -> list[Ranked]:
        """The k sessions holding the messages closest to `vector` (cosine), each with its closest
        message, best first (sessions tied: the lower row id first)."""
        if k <= 0 or not any(vector):
            return []
        where = " AND ".join([*scope.where, CONVERSATION])
        if self.sqlite_vec:
            rows = self._db.execute(
                "WITH scored AS (SELECT m.id AS id, m.session_id AS sid, "  # noqa: S608
                f"1.0 - vec_distance_cosine(e.vec, ?) AS cos FROM messages m {_JOIN} {scope.joins} WHERE {where}), "
                # One row per session, its closest (SQLite's documented bare column of MAX()): no window
                # over every message. Ties between a session's messages go to either; its score is the same.
                "best AS (SELECT sid, id, MAX(cos) AS cos FROM scored GROUP BY sid) "
                "SELECT sid, id, cos FROM best WHERE cos > ? ORDER BY cos DESC, id LIMIT ?",
                [pack(vector), model, *scope.params, MIN_COSINE, k],
            ).fetchall()
            return [Ranked(sid, rowid, float(cos)) for sid, rowid, cos in rows]
        return self._nearest_numpy(scope, where, model, vector, k)

    def _nearest_numpy(self, scope: Scope, where: str, model: str, vector: Sequence[float], k: int) -> list[Ranked]:
        import numpy as np

        rows = self._db.execute(
            f"SELECT m.id, m.session_id, e.vec FROM messages m {_JOIN} {scope.joins} WHERE {where}",  # noqa: S608
            [model, *scope.params],
        ).fetchall()
        if not rows:
            return []
        matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        query = np.asarray(vector, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(query))
        cosines = (matrix @ query) / np.where(norms > 0, norms, 1.0)
        best: dict[str, tuple[float, int]] = {}
        for (rowid, sid, _), cos in zip(rows, cosines.tolist(), strict=True):
            if sid not in best or (cos, -rowid) > (best[sid][0], -best[sid][1]):
                best[sid] = (cos, rowid)
        near = [item for item in best.items() if item[1][0] > MIN_COSINE]
        ordered = sorted(near, key=lambda item: (-item[1][0], item[1][1]))[:k]
        return [Ranked(sid, rowid, cos) for sid, (cos, rowid) in ordered]


class VectorTierMethods:
    """The engine's VectorTier methods (ports.py), over its `vectors`."""

    vectors: SqliteVectors

    def embed_pending(self, embedder: Embedder, *, authority: str | None = None, limit: int | None = None) -> int:
        return self.vectors.embed_pending(embedder, authority=authority, limit=limit)

    def pending_vectors(self, model: str, authority: str | None = None) -> int:
        return self.vectors.pending_vectors(model, authority)


__all__ = ["CONVERSATION", "FusedPage", "Scope", "SqliteVectors", "VectorTierMethods", "digest", "pack"]
