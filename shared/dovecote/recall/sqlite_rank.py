"""The SQLite engine's ranking statement: the filter pushed down as SQL, and one statement that takes
the matches to the page's ranked sessions (see dovecote.recall.sqlite for the engine, and
dovecote.recall.ranking for the rule it reproduces)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dovecote.recall.engine_rules import trigram_leaf
from dovecote.recall.model import Visibility
from dovecote.recall.ports import IndexQuery
from dovecote.recall.query import Or, to_fts5
from dovecote.recall.ranking import DOC_DEPTH, Candidate, fuse_documents, rank_sessions, uses_documents

Execute = Callable[[str, list[Any]], list[Any]]
SCAN_FACTOR = 2  # a broad search scores this many times the ceiling from the word index before the lookups


@dataclass(frozen=True, slots=True)
class Ranked:
    shown: list[tuple[str, int, int, float]]  # (session, rowid of its hit, coverage, score), best first
    total: int  # distinct sessions
    truncated: bool  # the candidate ceiling was hit
    withheld: int
    newest: str
    tier: str = ""  # set by the fusion when only the vectors found something


def visibility_sql(visibility: Visibility, alias: str = "m") -> str:
    clauses = [f"({alias}.kind = 'text' AND {alias}.envelope = 0)"]
    if visibility.thinking:
        clauses.append(f"({alias}.kind = 'thinking' AND {alias}.envelope = 0)")
    if visibility.tools:
        clauses.append(f"({alias}.kind = 'tool' OR {alias}.envelope = 1)")
    return "(" + " OR ".join(clauses) + ")"


# SearchFilter fields pushed down as SQL, each with its value as the one parameter (when set).
FILTER_SQL = (
    ("role", "m.role = ?"),
    ("since", "m.ts != '' AND m.ts >= ?"),
    ("before", "m.ts != '' AND m.ts <= ?"),
    ("min_messages", "s.message_count >= ?"),
    ("project", "s.project = ?"),
    ("source", "s.source = ?"),
)

PLACES_SQL = "(s.project, s.cwd) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))"


def sessions_join(query: IndexQuery) -> str:
    f = query.filter
    if f.min_messages or f.project or f.source or f.places is not None:
        return " JOIN sessions s ON s.authority = m.authority AND s.session_id = m.session_id"
    return ""


def where_clause(authority: str, query: IndexQuery, table: str, expression: str | None) -> tuple[list[str], list[Any]]:
    """The filter pushed down: SearchFilter.matches as SQL (with the MATCH when an expression is given)."""
    f = query.filter
    where = ["m.authority = ?", visibility_sql(f.visibility)]
    params: list[Any] = [authority]
    if expression is not None:
        where.insert(0, f"{table} MATCH ?")
        params.insert(0, expression)
    if not f.subagents:
        where.append("m.sub = 0")
    for name, clause in FILTER_SQL:
        value = getattr(f, name)
        if value:
            where.append(clause)
            params.append(value)
    if f.places is not None:
        where.append(PLACES_SQL)
        params.append(json.dumps(sorted(f.places)))
    return where, params


def match_source(table: str, query: IndexQuery) -> str:
    """The sessions table is joined only for a session-level filter: the lookup per match costs
    as much as the bm25 ranking itself on a common word."""
    return f"FROM {table} JOIN messages m ON m.id = {table}.rowid{sessions_join(query)}"


def ranked(execute: Execute, authority: str, query: IndexQuery, table: str, expression: str | None) -> Ranked:
    """The page's sessions: the best `max_candidates` matches by bm25 (ties: insertion order) with the
    query terms each matches, read in one statement, then ranking.rank_sessions over them, the rule
    every engine shares (only the page's `limit` sessions are kept). Also the distinct-session
    total, whether the ceiling was hit and the newest matching timestamp; the matches withheld as
    the caller's live turn are counted apart.

    The grouping is Python's: over 2,000 candidates a dict and a sort cost a few ms, where the window
    functions that did it in SQL cost 20-30 ms (bench/recall.py at 100k messages)."""
    if expression is None:
        return Ranked([], 0, False, 0, "")
    where, params = where_clause(authority, query, table, expression)
    source = match_source(table, query)
    withheld = 0
    if query.withhold is not None:
        hold = [query.withhold.session_id, query.withhold.from_pos]
        withheld = execute(
            f"SELECT COUNT(*) {source} WHERE {' AND '.join(where)} AND m.session_id = ? AND m.pos >= ?",  # noqa: S608
            [*params, *hold],
        )[0][0]
        where = [*where, "NOT (m.session_id = ? AND m.pos >= ?)"]
        params = [*params, *hold]
    keep = trigram_leaf if table == "messages_tri" else None
    flags: list[str] = []
    flag_params: list[Any] = []
    terms = query.query.terms
    for bit, term in enumerate(terms):
        term_expression = to_fts5(term, keep) if len(terms) > 1 else expression
        if term_expression is None:
            continue
        if len(terms) == 1:
            flags.append("1")
        else:
            # One posting-list read per term; bit i says the candidate matches term i.
            flags.append(f"((h.id IN (SELECT rowid FROM {table} WHERE {table} MATCH ?)) << {bit})")  # noqa: S608
            flag_params.append(term_expression)
    ceiling = query.max_candidates
    read = (
        "hits AS (SELECT * FROM hits_all ORDER BY score, id LIMIT ?) "  # noqa: S608
        f"SELECT h.id, h.sid, h.pos, h.ts, h.score, {' | '.join(flags) or '0'}, (SELECT COUNT(*) FROM hits_all), "
        "{scanned} FROM hits h ORDER BY h.score, h.id"
    )
    rows: list[Any] = []
    if _broad(query):
        # The best `scan` matches by bm25 from the word index alone, then the row lookup and the
        # filter for those only: when more than the ceiling of them pass, they are exactly the best
        # filtered matches (one total order: score, then rowid), at a lookup per kept row instead
        # of one per match (at 1M messages a common word matches 50k+).
        scan = SCAN_FACTOR * (ceiling + 1)
        head = (
            f"WITH top AS (SELECT rowid AS id, bm25({table}) AS score FROM {table} WHERE {where[0]} "  # noqa: S608
            "ORDER BY score, rowid LIMIT ?), hits_all AS (SELECT m.id AS id, m.session_id AS sid, m.pos AS pos, "
            f"m.ts AS ts, top.score AS score FROM top JOIN messages m ON m.id = top.id "
            f"WHERE {' AND '.join(where[1:])} ORDER BY score, m.id LIMIT ?), "
        )
        sql = head + read.replace("{scanned}", "(SELECT COUNT(*) FROM top)")
        rows = execute(sql, [params[0], scan, *params[1:], ceiling + 1, ceiling, *flag_params])
        if rows and rows[0][7] == scan and rows[0][6] <= ceiling:
            rows = []  # the filter kept too few of them: every match, below
    if not rows:
        head = (
            f"WITH hits_all AS (SELECT m.id AS id, m.session_id AS sid, m.pos AS pos, m.ts AS ts, "  # noqa: S608
            f"bm25({table}) AS score {source} WHERE {' AND '.join(where)} ORDER BY score, m.id LIMIT ?), "
        )
        sql = head + read.replace("{scanned}", "0")
        rows = execute(sql, [*params, ceiling + 1, ceiling, *flag_params])
    if not rows:
        return Ranked([], 0, False, withheld, "")
    term_sets = {mask: frozenset(i for i in range(len(terms)) if mask >> i & 1) for mask in {r[5] for r in rows}}
    candidates = [Candidate(r[0], r[1], r[2], r[3], -r[4], term_sets[r[5]]) for r in rows]
    order = rank_sessions(candidates, ranker=query.ranker, sort=query.sort)
    if table == "messages_fts" and uses_documents(query.ranker, query.sort):
        order = fuse_documents(order, document_order(execute, authority, query))
    shown = [(r.best.session_id, r.best.rowid, r.coverage, r.score) for r in order[: query.limit]]
    return Ranked(shown, len(order), rows[0][6] > ceiling, withheld, max(r[3] for r in rows))


def document_order(execute: Execute, authority: str, query: IndexQuery) -> list[str]:
    """The session documents' order for the query's terms (OR-ed), best DOC_DEPTH first by bm25
    (ties: insertion order), among the sessions the session-level filters keep (ranking.py)."""
    terms = query.query.terms
    expression = to_fts5(Or(terms) if len(terms) > 1 else terms[0])
    f = query.filter
    where = ["session_docs_fts MATCH ?", "d.authority = ?"]
    params: list[Any] = [expression, authority]
    if not f.subagents:
        where.append("d.sub = 0")
    join = ""
    if f.min_messages or f.project or f.source or f.places is not None:
        join = " JOIN sessions s ON s.authority = d.authority AND s.session_id = d.session_id"
        for name, clause in FILTER_SQL:
            value = getattr(f, name)
            if value and clause.startswith("s."):
                where.append(clause)
                params.append(value)
        if f.places is not None:
            where.append(PLACES_SQL)
            params.append(json.dumps(sorted(f.places)))
    rows = execute(
        f"SELECT d.session_id FROM session_docs_fts JOIN session_docs d ON d.id = session_docs_fts.rowid{join} "  # noqa: S608
        f"WHERE {' AND '.join(where)} ORDER BY bm25(session_docs_fts), d.id LIMIT ?",
        [*params, DOC_DEPTH],
    )
    return [r[0] for r in rows]


def _broad(query: IndexQuery) -> bool:
    """A filter that keeps most matches (visibility, subagents and the authority only), for which the
    two-step read rarely falls back to joining every match."""
    f = query.filter
    narrow = (f.role, f.since, f.before, f.min_messages, f.project, f.source)
    return not any(narrow) and f.places is None and query.withhold is None
