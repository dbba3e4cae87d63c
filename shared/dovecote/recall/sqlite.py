"""The embedded SearchIndex: SQLite FTS5, the reference's engine, and recall's local default.

Layout (one database file, or `:memory:`):
- `sessions`: one row per (authority, session) with its metadata and the SHA-256 of the file it came
  from (unchanged files are skipped at ingest).
- `messages`: one row per indexed message; `id` is the insertion order (ties keep it) and `pos` the
  file order within the session.
- `messages_fts` (tokenizer `porter unicode61`: words, stemmed) and `messages_tri` (`trigram`:
  substrings, the fallback when the word index finds nothing) index `messages.text` as external
  content tables, kept in step by triggers inside the writing transaction.
- `topics` + `topics_fts`: segment labels.
- `session_docs` + `session_docs_fts` (`porter unicode61`): one document per session, the text of its
  conversation rows, with its own bm25 statistics (the `session-doc` ranker), replaced and deleted
  with the session in the same transaction; a database made before them gets them on open
  (sqlite_schema.fill_session_docs).

Consistency: one connection, serialized by a lock (the local runtime and the tests call it from many
threads). replace_session is one transaction (`BEGIN IMMEDIATE … COMMIT`), so a reader sees the old
session or the new one, never a mix. File databases use WAL, so another process's readers do not
block on a writer.

Cost of a search (profiled at 100k messages, bench/recall.py): one statement (sqlite_rank.py) reads
the candidates: bm25 for every match of the FTS5 MATCH (about 3 µs of CPU per match: the docsize
and position-list reads), the row lookup for the filter (1-2 µs; a broad search looks up only the
best 2 × MAX_CANDIDATES), the best MAX_CANDIDATES kept, one posting-list read per query term for
the bits of coverage; then
ranking.rank_sessions groups them in Python (the window functions that did it in SQL cost more
than the dict and the sort); then one statement each for the page's rows, sessions, snippets, refs
and topics (not a few per hit).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from dovecote.platform.errors import InvalidArgument
from dovecote.recall import engine_rules as rules
from dovecote.recall.model import (
    AMBIGUITY_CANDIDATES,
    Row,
    Session,
    SessionInfo,
    Visibility,
    format_ref,
    session_prefix_matches,
)
from dovecote.recall.ports import (
    IndexQuery,
    OutlineRows,
    Resolution,
    ScopeRow,
    SearchPage,
    SemanticQuery,
    SessionHit,
    TopicRow,
    Window,
    outline_rows,
)
from dovecote.recall.query import Or, Query, to_fts5
from dovecote.recall.ranking import Candidate, session_document
from dovecote.recall.results import VectorCoverage
from dovecote.recall.sqlite_driver import OperationalError, connect
from dovecote.recall.sqlite_rank import (
    Ranked,
    document_order,
    match_source,
    ranked,
    sessions_join,
    visibility_sql,
    where_clause,
)
from dovecote.recall.sqlite_schema import check_sqlite, create_schema, fill_session_docs
from dovecote.recall.sqlite_vectors import Scope, SqliteVectors, VectorTierMethods

SNIPPET_TOKENS = 24
MMAP_BYTES = 1 << 30
CACHE_KIB = 64 * 1024
_TOP = "\U0010ffff"
FUSION_DEPTH = 50  # lexical sessions read for a fusion (a page is at most MAX_SEARCH_LIMIT; default 8)
_SESSION_FIELDS = tuple(f.name for f in fields(SessionInfo))  # the sessions columns of the same names
_SESSION_COLUMNS = ", ".join(_SESSION_FIELDS)
_ROW_COLUMNS = "session_id, pos, uuid, role, kind, text, ts, envelope, human"


def _session_info(row: tuple[Any, ...]) -> SessionInfo:
    values = dict(zip(_SESSION_FIELDS, row, strict=True))
    values["spawn_keys"] = tuple(json.loads(values["spawn_keys"] or "[]"))
    return SessionInfo(**values)


def _row(row: tuple[Any, ...]) -> Row:
    return Row(*row[:7], *map(bool, row[7:9]))  # _ROW_COLUMNS fill Row's fields in order; the last two are flags


class SqliteSearchIndex(VectorTierMethods):
    name = "sqlite-fts5"

    def __init__(self, path: str | Path = ":memory:") -> None:
        check_sqlite()
        target = str(path)
        if target != ":memory:":
            Path(target).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = connect(target)
        if target != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            # A search reads every match's row and docsize entry at random: map the file and keep a
            # larger page cache than the 2 MB default (about 10 % off a broad search at 100k).
            self._db.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
            self._db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        create_schema(self._db)
        self.vectors = SqliteVectors(self._db, self._lock)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ---- writes ---------------------------------------------------------------------------------

    def replace_session(self, authority: str, session: Session, *, sha256: str) -> None:
        depth = session.session_id.count("/")
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "DELETE FROM messages WHERE authority = ? AND session_id = ?", (authority, session.session_id)
                )
                self._db.execute(
                    "DELETE FROM sessions WHERE authority = ? AND session_id = ?", (authority, session.session_id)
                )
                self._db.execute(
                    "INSERT INTO sessions (authority, session_id, sid_lower, depth, source, project, cwd, "
                    "parent_session, agent, summary, message_count, started_at, last_at, sha256, "
                    "spawn_key, spawn_keys) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        authority,
                        session.session_id,
                        session.session_id.lower(),
                        depth,
                        session.source,
                        session.project,
                        session.cwd,
                        session.parent_session,
                        session.agent,
                        session.summary,
                        len(session.messages),
                        session.started_at,
                        session.last_at,
                        sha256,
                        session.spawn_key,
                        json.dumps(list(session.spawn_keys)),
                    ),
                )
                sub = int(session.agent is not None or session.parent_session is not None)
                self._db.executemany(
                    "INSERT INTO messages (authority, session_id, pos, uuid, role, kind, envelope, human, ts, text, "
                    "sub) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            authority,
                            session.session_id,
                            pos,
                            m.uuid,
                            m.role,
                            m.kind,
                            int(m.envelope),
                            int(m.human),
                            m.timestamp,
                            m.text,
                            sub,
                        )
                        for pos, m in enumerate(session.messages)
                    ],
                )
                self._db.execute(
                    "DELETE FROM session_docs WHERE authority = ? AND session_id = ?", (authority, session.session_id)
                )
                self._db.execute(
                    "INSERT INTO session_docs (authority, session_id, sub, text) VALUES (?, ?, ?, ?)",
                    (
                        authority,
                        session.session_id,
                        sub,
                        session_document((m.kind, m.envelope, m.text) for m in session.messages),
                    ),
                )
                # A topic survives a re-ingest when the message it starts at does.
                self._db.execute(
                    "DELETE FROM topics WHERE authority = ? AND session_id = ? AND start_uuid NOT IN "
                    "(SELECT uuid FROM messages WHERE authority = ? AND session_id = ?)",
                    (authority, session.session_id, authority, session.session_id),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def delete_authority(self, authority: str) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for table in ("messages", "sessions", "session_docs", "topics", "embeddings"):
                    self._db.execute(f"DELETE FROM {table} WHERE authority = ?", (authority,))  # noqa: S608
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def add_topic(self, authority: str, session_id: str, start_uuid: str, label: str) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "DELETE FROM topics WHERE authority = ? AND session_id = ? AND start_uuid = ?",
                    (authority, session_id, start_uuid),
                )
                self._db.execute(
                    "INSERT INTO topics (authority, session_id, start_uuid, label) VALUES (?, ?, ?, ?)",
                    (authority, session_id, start_uuid, label),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    # ---- sessions and refs ----------------------------------------------------------------------

    def _sessions(self, authority: str, ids: Iterable[str]) -> dict[str, SessionInfo]:
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        rows = self._db.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE authority = ? "  # noqa: S608
            "AND session_id IN (SELECT value FROM json_each(?))",
            (authority, json.dumps(wanted)),
        ).fetchall()
        return {row[0]: _session_info(row) for row in rows}

    def session(self, authority: str, session_id: str) -> SessionInfo | None:
        with self._lock:
            return self._sessions(authority, [session_id]).get(session_id)

    def resolve_sessions(self, authority: str, prefix: str) -> Resolution:
        with self._lock:
            exact = self._db.execute(
                "SELECT session_id FROM sessions WHERE authority = ? AND session_id = ?", (authority, prefix)
            ).fetchone()
            if exact:
                return Resolution([exact[0]], 1)
            segments = prefix.lower().split("/")
            if not prefix or not all(segments):
                return Resolution([], 0)
            depth = len(segments) - 1
            bounds = (authority, depth, segments[0], segments[0] + _TOP)
            where = "authority = ? AND depth = ? AND sid_lower >= ? AND sid_lower < ?"
            if depth == 0:
                total = self._count("sessions", where, bounds)
                return Resolution(self._first("session_id", "sessions", where, bounds, "sid_lower, session_id"), total)
            matched = sorted(
                r[0]
                for r in self._db.execute(f"SELECT session_id FROM sessions WHERE {where}", bounds)  # noqa: S608
                if session_prefix_matches(prefix, r[0])
            )
            return Resolution(matched[:AMBIGUITY_CANDIDATES], len(matched))

    def resolve_messages(self, authority: str, session_id: str, prefix: str) -> Resolution:
        prefix = prefix.lower()
        with self._lock:
            if not prefix:
                return Resolution([], 0)
            bounds = (authority, session_id, prefix, prefix + _TOP)
            where = "authority = ? AND session_id = ? AND uuid >= ? AND uuid < ?"
            total = self._count("messages", where, bounds)
            if (
                total > 1
                and self._db.execute(
                    "SELECT 1 FROM messages WHERE authority = ? AND session_id = ? AND uuid = ?",
                    (authority, session_id, prefix),
                ).fetchone()
            ):
                return Resolution([prefix], 1)
            return Resolution(self._first("uuid", "messages", where, bounds, "uuid"), total)

    # The resolvers' prefix ranges: `where` is one of their fixed clauses, `bounds` its parameters.

    def _count(self, table: str, where: str, bounds: tuple[Any, ...]) -> int:
        return int(self._db.execute(f"SELECT COUNT(*) FROM {table} WHERE {where}", bounds).fetchone()[0])  # noqa: S608

    def _first(self, column: str, table: str, where: str, bounds: tuple[Any, ...], order: str) -> list[str]:
        """The first AMBIGUITY_CANDIDATES values of `column` in the range, in `order`."""
        query = f"SELECT {column} FROM {table} WHERE {where} ORDER BY {order} LIMIT ?"  # noqa: S608
        return [r[0] for r in self._db.execute(query, (*bounds, AMBIGUITY_CANDIDATES))]

    def message(self, authority: str, session_id: str, uuid: str) -> Row | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {_ROW_COLUMNS} FROM messages WHERE authority = ? AND session_id = ? AND uuid = ?",  # noqa: S608
                (authority, session_id, uuid),
            ).fetchone()
        return _row(row) if row else None

    def printed_ref(self, authority: str, session_id: str, uuid: str) -> str:
        with self._lock:
            return format_ref(
                session_id, uuid, self._session_len(authority, session_id), self._uuid_len(authority, session_id, uuid)
            )

    def _session_len(self, authority: str, session_id: str) -> int:
        if "/" in session_id:
            return rules.nested_session_length(session_id, lambda prefix: self.resolve_sessions(authority, prefix))
        lowered = session_id.lower()
        neighbours = self._db.execute(
            "SELECT sid_lower FROM (SELECT sid_lower FROM sessions WHERE authority = ? AND depth = 0 "
            "AND sid_lower < ? ORDER BY sid_lower DESC LIMIT 1) UNION ALL "
            "SELECT sid_lower FROM (SELECT sid_lower FROM sessions WHERE authority = ? AND depth = 0 "
            "AND sid_lower >= ? AND session_id != ? ORDER BY sid_lower LIMIT 2)",
            (authority, lowered, authority, lowered, session_id),
        ).fetchall()
        return rules.unique_length(lowered, (n[0] for n in neighbours))

    def _uuid_len(self, authority: str, session_id: str, uuid: str) -> int:
        neighbours = self._db.execute(
            "SELECT uuid FROM (SELECT uuid FROM messages WHERE authority = ? AND session_id = ? AND uuid < ? "
            "ORDER BY uuid DESC LIMIT 1) UNION ALL SELECT uuid FROM (SELECT uuid FROM messages WHERE "
            "authority = ? AND session_id = ? AND uuid > ? ORDER BY uuid LIMIT 1)",
            (authority, session_id, uuid, authority, session_id, uuid),
        ).fetchall()
        return rules.unique_length(uuid, (n[0] for n in neighbours))

    def turn_start(self, authority: str, session_id: str) -> int | None:
        with self._lock:
            row = self._db.execute(
                "SELECT MAX(pos) FROM messages WHERE authority = ? AND session_id = ? AND human = 1",
                (authority, session_id),
            ).fetchone()
        return row[0] if row and row[0] is not None else None

    def subagents(self, authority: str, session: SessionInfo) -> list[SessionInfo]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE authority = ? AND (parent_session = ? OR "  # noqa: S608
                "(spawn_key IS NOT NULL AND spawn_key IN (SELECT value FROM json_each(?)))) "
                "ORDER BY started_at, session_id",
                (authority, session.session_id, json.dumps(list(session.spawn_keys))),
            ).fetchall()
        return [_session_info(r) for r in rows]

    def scopes(self, authority: str) -> list[ScopeRow]:
        with self._lock:
            rows = self._db.execute(
                "SELECT project, cwd, COUNT(*) FROM sessions WHERE authority = ? GROUP BY project, cwd "
                "ORDER BY project, cwd",
                (authority,),
            ).fetchall()
        return [ScopeRow(project=r[0], cwd=r[1], sessions=r[2]) for r in rows]

    # ---- search ---------------------------------------------------------------------------------

    def search(self, authority: str, query: IndexQuery) -> SearchPage:
        semantic = query.semantic if not query.sort else None
        # Fused, the lexical list is read deeper than the page: a session low in it may rise.
        lexical = replace(query, limit=max(query.limit, FUSION_DEPTH)) if semantic else query
        with self._lock:
            expression = to_fts5(query.query.root)
            table = "messages_fts"
            found = ranked(self._execute, authority, lexical, table, expression)
            if not found.shown and not found.withheld:
                trigram = to_fts5(query.query.root, rules.trigram_leaf)
                if trigram is not None:
                    table = "messages_tri"
                    found = ranked(self._execute, authority, lexical, table, trigram)
            coverage = None
            if semantic is not None:
                found, coverage = self._fused(authority, query, semantic, found)
            ids = [rowid for _, rowid, _, _ in found.shown]
            rows = self._rows_by_id(ids)
            sessions = self._sessions(authority, [sid for sid, _, _, _ in found.shown])
            snippets = self._snippets(table, rows, query.query)
            refs = self._refs(authority, [(rows[i].session_id, rows[i].uuid) for i in ids])
            topics = self._topic_starts(authority, [rows[i].session_id for i in ids])
            hits = [
                SessionHit(
                    session=sessions[sid],
                    row=rows[rowid],
                    snippet=snippets[rowid],
                    score=score,
                    coverage=coverage,
                    ref=refs[(sid, rows[rowid].uuid)],
                    topic=rules.topic_at(topics.get(sid, ()), rows[rowid].pos),
                )
                for sid, rowid, coverage, score in found.shown
            ]
            return SearchPage(
                hits=hits,
                total_sessions=found.total,
                total_is_lower_bound=found.truncated,
                newest=found.newest,
                withheld=found.withheld,
                tier=found.tier or ("word" if table == "messages_fts" else "trigram"),
                vectors=coverage,
            )

    def fill_session_docs(self, authority: str | None = None, *, limit: int | None = None) -> int:
        """SessionDocuments.fill_session_docs: the migration runs when a database is opened, so this
        finds something only in a database changed behind the engine's back (every session, in one
        transaction: `authority` and `limit` do not narrow it)."""
        with self._lock:
            return fill_session_docs(self._db)

    def document_order(self, authority: str, query: IndexQuery) -> list[str]:
        """The session documents' order for the query (ranking.py's `session-doc`): what a search
        fuses, on its own (the conformance suite holds both engines to it)."""
        with self._lock:
            return document_order(self._execute, authority, query)

    def _fused(
        self, authority: str, query: IndexQuery, semantic: SemanticQuery, found: Ranked
    ) -> tuple[Ranked, VectorCoverage]:
        where, params = where_clause(authority, query, "", None)
        if query.withhold is not None:
            where.append("NOT (m.session_id = ? AND m.pos >= ?)")
            params += [query.withhold.session_id, query.withhold.from_pos]
        page = self.vectors.fused_page(
            Scope(sessions_join(query), where, params), semantic, query.limit, found.shown, found.total
        )
        lower = found.truncated or page.lower_bound
        return Ranked(page.shown, page.total, lower, found.withheld, found.newest, page.tier), page.coverage

    def _execute(self, sql: str, params: list[Any]) -> list[Any]:
        try:
            return self._db.execute(sql, params).fetchall()
        except OperationalError as exc:
            raise InvalidArgument(f"the query cannot be searched: {exc}", field="q") from None

    def reference_candidates(self, authority: str, query: IndexQuery) -> list[Candidate]:
        """Every match of the word index, unreduced, with its coverage computed in Python: the
        slow, obvious definition the reduced `_candidates` is checked against (tests only)."""
        expression = to_fts5(query.query.root)
        assert expression is not None  # noqa: S101 - a test helper
        where, params = where_clause(authority, query, "messages_fts", expression)
        if query.withhold is not None:
            where.append("NOT (m.session_id = ? AND m.pos >= ?)")
            params += [query.withhold.session_id, query.withhold.from_pos]
        rows = self._execute(
            "SELECT m.id, m.session_id, m.pos, m.ts, bm25(messages_fts) AS score "  # noqa: S608
            f"{match_source('messages_fts', query)} WHERE {' AND '.join(where)} ORDER BY score, m.id",
            params,
        )
        coverage = self._coverage("messages_fts", query.query, {r[0] for r in rows})
        return [Candidate(r[0], r[1], r[2], r[3], -r[4], coverage.get(r[0], frozenset())) for r in rows]

    def _coverage(self, table: str, query: Query, rowids: set[int]) -> dict[int, frozenset[int]]:
        if not rowids:
            return {}
        if len(query.terms) == 1:
            return dict.fromkeys(rowids, frozenset({0}))
        matched: dict[int, set[int]] = {}
        keep = rules.trigram_leaf if table == "messages_tri" else None
        for index, term in enumerate(query.terms):
            expression = to_fts5(term, keep)
            if expression is None:
                continue
            for (rowid,) in self._db.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", (expression,)):  # noqa: S608
                if rowid in rowids:
                    matched.setdefault(rowid, set()).add(index)
        return {rowid: frozenset(terms) for rowid, terms in matched.items()}

    def _rows_by_id(self, ids: list[int]) -> dict[int, Row]:
        if not ids:
            return {}
        rows = self._db.execute(
            f"SELECT id, {_ROW_COLUMNS} FROM messages WHERE id IN (SELECT value FROM json_each(?))",  # noqa: S608
            (json.dumps(ids),),
        ).fetchall()
        return {r[0]: _row(r[1:]) for r in rows}

    def _snippets(self, table: str, rows: dict[int, Row], query: Query) -> dict[int, str]:
        """The page's snippets in one statement (FTS5 seeks each rowid of the IN list)."""
        if table == "messages_tri":
            return {i: rules.substring_snippet(r.text, [t.text for t in query.terms]) for i, r in rows.items()}
        expression = to_fts5(Or(query.terms) if len(query.terms) > 1 else query.terms[0])
        found = dict(
            self._db.execute(
                f"SELECT rowid, snippet({table}, 0, '', '', '…', ?) FROM {table} "  # noqa: S608
                f"WHERE {table} MATCH ? AND rowid IN (SELECT value FROM json_each(?))",
                (SNIPPET_TOKENS, expression, json.dumps(list(rows))),
            ).fetchall()
        )
        return {i: found.get(i) or r.text[: rules.SNIPPET_CHARS] for i, r in rows.items()}

    def _refs(self, authority: str, messages: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """printed_ref for a page of (session, uuid) in one statement: each message's sort-order
        neighbours (its uuid's in the session, its top-level session id's among the authority's)."""
        wanted = list(dict.fromkeys(messages))
        if not wanted:
            return {}
        found = self._db.execute(
            "WITH page(sid, uuid) AS (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') "
            "FROM json_each(?2)) SELECT sid, uuid, "
            "(SELECT m.uuid FROM messages m WHERE m.authority = ?1 AND m.session_id = sid AND m.uuid < page.uuid "
            " ORDER BY m.uuid DESC LIMIT 1), "
            "(SELECT m.uuid FROM messages m WHERE m.authority = ?1 AND m.session_id = sid AND m.uuid > page.uuid "
            " ORDER BY m.uuid LIMIT 1), "
            "(SELECT sid_lower FROM sessions WHERE authority = ?1 AND depth = 0 AND sid_lower < lower(sid) "
            " ORDER BY sid_lower DESC LIMIT 1), "
            "(SELECT json_group_array(sid_lower) FROM (SELECT sid_lower FROM sessions WHERE authority = ?1 "
            " AND depth = 0 AND sid_lower >= lower(sid) AND session_id != sid ORDER BY sid_lower LIMIT 2)) "
            "FROM page",
            (authority, json.dumps(wanted)),
        ).fetchall()
        out = {}
        for session_id, uuid, uuid_before, uuid_after, sid_before, sid_after in found:
            if "/" in session_id:
                session_len = self._session_len(authority, session_id)
            else:
                near = [n for n in (sid_before, *json.loads(sid_after)) if n is not None]
                session_len = rules.unique_length(session_id.lower(), near)
            uuid_len = rules.unique_length(uuid, [n for n in (uuid_before, uuid_after) if n is not None])
            out[(session_id, uuid)] = format_ref(session_id, uuid, session_len, uuid_len)
        return out

    def _topic_starts(self, authority: str, session_ids: list[str]) -> dict[str, list[tuple[int, str]]]:
        """(start position, label) of every live topic of the page's sessions, in one statement."""
        out: dict[str, list[tuple[int, str]]] = {}
        for session_id, pos, label in self._db.execute(
            "SELECT t.session_id, m.pos, t.label FROM topics t JOIN messages m ON m.authority = t.authority "
            "AND m.session_id = t.session_id AND m.uuid = t.start_uuid "
            "WHERE t.authority = ? AND t.session_id IN (SELECT value FROM json_each(?))",
            (authority, json.dumps(list(dict.fromkeys(session_ids)))),
        ):
            out.setdefault(session_id, []).append((pos, label))
        return out

    # ---- read and outline -----------------------------------------------------------------------

    def window(
        self, authority: str, session_id: str, anchor_pos: int, *, radius: int, around: int, visibility: Visibility
    ) -> Window:
        shown = f"({visibility_sql(visibility)} OR m.pos = ?)"
        base = f"FROM messages m WHERE m.authority = ? AND m.session_id = ? AND {shown}"  # noqa: S608
        args = (authority, session_id, anchor_pos)
        with self._lock:
            centre = anchor_pos
            if around > 0:
                row = (
                    self._db.execute(
                        f"SELECT m.pos {base} AND m.pos > ? ORDER BY m.pos LIMIT 1 OFFSET ?",  # noqa: S608
                        (*args, anchor_pos, around - 1),
                    ).fetchone()
                    or self._db.execute(f"SELECT MAX(m.pos) {base}", args).fetchone()  # noqa: S608
                )
                centre = row[0]
            elif around < 0:
                row = (
                    self._db.execute(
                        f"SELECT m.pos {base} AND m.pos < ? ORDER BY m.pos DESC LIMIT 1 OFFSET ?",  # noqa: S608
                        (*args, anchor_pos, -around - 1),
                    ).fetchone()
                    or self._db.execute(f"SELECT MIN(m.pos) {base}", args).fetchone()  # noqa: S608
                )
                centre = row[0]
            columns = ", ".join("m." + c.strip() for c in _ROW_COLUMNS.split(","))
            before = self._db.execute(
                f"SELECT {columns} {base} AND m.pos < ? ORDER BY m.pos DESC LIMIT ?",  # noqa: S608
                (*args, centre, radius),
            ).fetchall()
            middle = self._db.execute(f"SELECT {columns} {base} AND m.pos = ?", (*args, centre)).fetchall()  # noqa: S608
            after = self._db.execute(
                f"SELECT {columns} {base} AND m.pos > ? ORDER BY m.pos LIMIT ?",  # noqa: S608
                (*args, centre, radius),
            ).fetchall()
            rows = [_row(r) for r in [*reversed(before), *middle, *after]]
            if not rows:
                return Window([], 0, 0)
            outside_before = self._db.execute(
                f"SELECT COUNT(*) {base} AND m.pos < ?",  # noqa: S608
                (*args, rows[0].pos),
            ).fetchone()[0]
            outside_after = self._db.execute(
                f"SELECT COUNT(*) {base} AND m.pos > ?",  # noqa: S608
                (*args, rows[-1].pos),
            ).fetchone()[0]
        return Window(rows, outside_before, outside_after)

    def outline(
        self, authority: str, session_id: str, *, visibility: Visibility, scan: int, bookend: int
    ) -> OutlineRows:
        with self._lock:
            head = self._db.execute(
                f"SELECT {_ROW_COLUMNS} FROM messages WHERE authority = ? AND session_id = ? ORDER BY pos LIMIT ?",  # noqa: S608
                (authority, session_id, scan),
            ).fetchall()
            tail = self._db.execute(
                f"SELECT {_ROW_COLUMNS} FROM messages WHERE authority = ? AND session_id = ? "  # noqa: S608
                "ORDER BY pos DESC LIMIT ?",
                (authority, session_id, scan),
            ).fetchall()
        return outline_rows([_row(r) for r in head], [_row(r) for r in tail], visibility, bookend)

    # ---- topics ---------------------------------------------------------------------------------

    def session_topics(self, authority: str, session_id: str) -> list[TopicRow]:
        with self._lock:
            rows = self._db.execute(
                "SELECT t.session_id, t.start_uuid, m.pos, t.label FROM topics t JOIN messages m ON "
                "m.authority = t.authority AND m.session_id = t.session_id AND m.uuid = t.start_uuid "
                "WHERE t.authority = ? AND t.session_id = ? ORDER BY m.pos",
                (authority, session_id),
            ).fetchall()
            info = self._sessions(authority, [session_id]).get(session_id)
        if info is None:
            return []
        return [TopicRow(session=info, start_uuid=r[1], start_pos=r[2], label=r[3]) for r in rows]

    def search_topics(
        self, authority: str, query: Query | None, *, limit: int, project: str
    ) -> tuple[list[TopicRow], bool]:
        with self._lock:
            tagged = self._db.execute("SELECT 1 FROM topics WHERE authority = ? LIMIT 1", (authority,)).fetchone()
            if not tagged:
                return [], False
            where = ["t.authority = ?"]
            params: list[Any] = [authority]
            if project:
                where.append("s.project = ?")
                params.append(project)
            joins = (
                "JOIN sessions s ON s.authority = t.authority AND s.session_id = t.session_id "
                "JOIN messages m ON m.authority = t.authority AND m.session_id = t.session_id AND m.uuid = t.start_uuid"
            )
            if query is None:
                sql = (
                    f"SELECT t.session_id, t.start_uuid, m.pos, t.label FROM topics t {joins} "  # noqa: S608
                    f"WHERE {' AND '.join(where)} ORDER BY t.id DESC LIMIT ?"
                )
                rows = self._db.execute(sql, (*params, limit)).fetchall()
            else:
                words = to_fts5(Or(query.terms) if len(query.terms) > 1 else query.terms[0])
                sql = (
                    f"SELECT t.session_id, t.start_uuid, m.pos, t.label FROM topics_fts f "  # noqa: S608
                    f"JOIN topics t ON t.id = f.rowid {joins} WHERE topics_fts MATCH ? AND {' AND '.join(where)} "
                    "ORDER BY bm25(topics_fts), t.id LIMIT ?"
                )
                rows = self._db.execute(sql, (words, *params, limit)).fetchall()
            sessions = self._sessions(authority, [r[0] for r in rows])
        return [TopicRow(session=sessions[r[0]], start_uuid=r[1], start_pos=r[2], label=r[3]) for r in rows], True


_SHARED: dict[str, SqliteSearchIndex] = {}
_SHARED_LOCK = threading.Lock()


def shared_index(path: str) -> SqliteSearchIndex:
    """One engine per database per process: the API and the indexer of the local runtime run in one
    process and must see the same `:memory:` database."""
    with _SHARED_LOCK:
        if path not in _SHARED:
            _SHARED[path] = SqliteSearchIndex(path)
        return _SHARED[path]
