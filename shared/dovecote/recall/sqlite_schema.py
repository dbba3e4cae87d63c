"""The embedded engine's tables (see dovecote.recall.sqlite for what each holds), created on open
and migrated in place: the index is derived (a rebuild re-creates it from the archive), but a
local runtime's database should not need one for a new column."""

from __future__ import annotations

from typing import Any

from dovecote.recall.ranking import session_document
from dovecote.recall.sqlite_driver import OperationalError, dbapi

MIN_SQLITE = (3, 34, 0)  # the trigram tokenizer

WORDS = "porter unicode61"  # the word tokenizer (English stems); `trigram` for substrings


def _fts_index(table: str, column: str, **tokenizers: str) -> str:
    """External-content FTS5 tables over `table.column`, one per name (with its tokenizer), kept in
    step with `table` by an insert and a delete trigger."""
    tables = "".join(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5(\n"
        f"    {column}, content='{table}', content_rowid='id', tokenize='{tokenize}'\n);\n"
        for name, tokenize in tokenizers.items()
    )
    added = "".join(
        f"    INSERT INTO {name} (rowid, {column}) VALUES (new.id, new.{column});\n"  # noqa: S608 (constants)
        for name in tokenizers
    )
    deleted = "".join(
        f"    INSERT INTO {name} ({name}, rowid, {column}) VALUES ('delete', old.id, old.{column});\n"  # noqa: S608
        for name in tokenizers
    )
    return (
        f"{tables}CREATE TRIGGER IF NOT EXISTS {table}_ai AFTER INSERT ON {table} BEGIN\n{added}END;\n"
        f"CREATE TRIGGER IF NOT EXISTS {table}_ad AFTER DELETE ON {table} BEGIN\n{deleted}END;\n"
    )


SCHEMA = "".join(
    (
        """
CREATE TABLE IF NOT EXISTS sessions (
    authority TEXT NOT NULL,
    session_id TEXT NOT NULL,
    sid_lower TEXT NOT NULL,
    depth INTEGER NOT NULL,
    source TEXT NOT NULL,
    project TEXT NOT NULL,
    cwd TEXT NOT NULL,
    parent_session TEXT,
    agent TEXT,
    summary TEXT NOT NULL,
    message_count INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    last_at TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    spawn_key TEXT,
    spawn_keys TEXT NOT NULL,
    PRIMARY KEY (authority, session_id)
);
CREATE INDEX IF NOT EXISTS sessions_prefix ON sessions (authority, depth, sid_lower);
CREATE INDEX IF NOT EXISTS sessions_parent ON sessions (authority, parent_session);
CREATE INDEX IF NOT EXISTS sessions_spawn ON sessions (authority, spawn_key);
-- scopes() runs on every search: a covering index instead of a sort of every session (1.4 -> 0.5 ms
-- at 2k sessions).
CREATE INDEX IF NOT EXISTS sessions_places ON sessions (authority, project, cwd);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    authority TEXT NOT NULL,
    session_id TEXT NOT NULL,
    pos INTEGER NOT NULL,
    uuid TEXT NOT NULL,
    role TEXT NOT NULL,
    kind TEXT NOT NULL,
    envelope INTEGER NOT NULL,
    human INTEGER NOT NULL,
    ts TEXT NOT NULL,
    text TEXT NOT NULL,
    sub INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS messages_pos ON messages (authority, session_id, pos);
CREATE UNIQUE INDEX IF NOT EXISTS messages_uuid ON messages (authority, session_id, uuid);
""",
        _fts_index("messages", "text", messages_fts=WORDS, messages_tri="trigram"),
        """\
CREATE TABLE IF NOT EXISTS topics (
    id INTEGER PRIMARY KEY,
    authority TEXT NOT NULL,
    session_id TEXT NOT NULL,
    start_uuid TEXT NOT NULL,
    label TEXT NOT NULL,
    UNIQUE (authority, session_id, start_uuid)
);
""",
        _fts_index("topics", "label", topics_fts=WORDS),
        """\
-- Session documents (the `session-doc` ranker, ranking.py): one row per session, the text of its
-- conversation rows (ranking.session_document), indexed with its own bm25 statistics (a document's
-- length is its session's). Written with the session in replace_session's transaction and deleted
-- with it. `sub` and the session-level filters are read from here and from `sessions`.
CREATE TABLE IF NOT EXISTS session_docs (
    id INTEGER PRIMARY KEY,
    authority TEXT NOT NULL,
    session_id TEXT NOT NULL,
    sub INTEGER NOT NULL,
    text TEXT NOT NULL,
    UNIQUE (authority, session_id)
);
""",
        _fts_index("session_docs", "text", session_docs_fts=WORDS),
        """\
-- The vector tier (dovecote.recall.sqlite_vectors). A vector belongs to a text, not to a row: a
-- re-ingest replaces a session's rows (new ids) and most texts come back unchanged, so their vectors
-- are found again by digest instead of being embedded again. `message_digests` maps a row to its
-- text's digest once embedded; `embeddings` holds one float32 vector per (authority, model, digest).
-- A vector whose text left the index stays until delete_authority (a rebuild): no sweep on the write path.
-- A rowid table with a unique index, not WITHOUT ROWID: the 1.5 KB vectors then stay out of the key's
-- B-tree, and a search's lookup per message costs 2 µs instead of 15 (measured at 10k messages).
CREATE TABLE IF NOT EXISTS message_digests (
    id INTEGER PRIMARY KEY,
    digest TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS embeddings (
    id INTEGER PRIMARY KEY,
    authority TEXT NOT NULL,
    model TEXT NOT NULL,
    digest TEXT NOT NULL,
    vec BLOB NOT NULL,
    UNIQUE (authority, model, digest)
);
CREATE TRIGGER IF NOT EXISTS message_digests_ad AFTER DELETE ON messages BEGIN
    DELETE FROM message_digests WHERE id = old.id;
END;
""",
    )
)


def check_sqlite() -> None:
    """FTS5 with the trigram tokenizer needs SQLite 3.34 or newer, compiled with FTS5."""
    if dbapi.sqlite_version_info < MIN_SQLITE:
        raise RuntimeError(f"recall needs SQLite >= 3.34 (trigram tokenizer); this Python has {dbapi.sqlite_version}")
    probe = dbapi.connect(":memory:")
    try:
        probe.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='trigram')")
    except OperationalError as exc:
        raise RuntimeError(f"recall needs SQLite compiled with FTS5: {exc}") from None
    finally:
        probe.close()


def create_schema(db: Any) -> None:
    """The tables, and what a database made by an older version lacks: `messages.sub` (the
    subagent flag search filters on), filled from the sessions table; the session documents,
    written for every session already indexed (fill_session_docs)."""
    had_docs = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'session_docs'").fetchone() is not None
    had_sessions = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'sessions'").fetchone() is not None
    db.executescript(SCHEMA)
    if had_sessions and not had_docs:
        fill_session_docs(db)
    columns = {row[1] for row in db.execute("PRAGMA table_info(messages)")}
    if "sub" not in columns:
        db.executescript(
            "BEGIN IMMEDIATE; ALTER TABLE messages ADD COLUMN sub INTEGER NOT NULL DEFAULT 0; "
            "UPDATE messages SET sub = 1 WHERE EXISTS (SELECT 1 FROM sessions s WHERE "
            "s.authority = messages.authority AND s.session_id = messages.session_id AND "
            "(s.agent IS NOT NULL OR s.parent_session IS NOT NULL)); COMMIT;"
        )


def fill_session_docs(db: Any) -> int:
    """The migration to session documents: one per indexed session that has none, from its rows in
    file order, in one transaction (a reader sees none of them or all). Returns how many were written."""
    db.execute("BEGIN IMMEDIATE")
    try:
        rows = db.execute(
            "SELECT m.authority, m.session_id, m.sub, m.kind, m.envelope, m.text FROM messages m "
            "WHERE NOT EXISTS (SELECT 1 FROM session_docs d WHERE d.authority = m.authority "
            "AND d.session_id = m.session_id) ORDER BY m.authority, m.session_id, m.pos"
        )
        written = 0
        key: tuple[str, str] | None = None
        sub = 0
        parts: list[tuple[str, bool, str]] = []

        def flush() -> None:
            if key is not None:
                db.execute(
                    "INSERT INTO session_docs (authority, session_id, sub, text) VALUES (?, ?, ?, ?)",
                    (*key, sub, session_document(parts)),
                )

        for authority, session_id, row_sub, kind, envelope, text in rows.fetchall():
            if (authority, session_id) != key:
                flush()
                written += key is not None
                key, sub, parts = (authority, session_id), row_sub, []
            parts.append((kind, bool(envelope), text))
        flush()
        written += key is not None
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return written
