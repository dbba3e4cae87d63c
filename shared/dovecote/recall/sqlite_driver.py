"""Which SQLite the embedded engine runs on, and whether it can load sqlite-vec.

`sqlean.py` (`import sqlean`) is the standard library's `sqlite3` module built against a recent SQLite
that allows loadable extensions; the project's pyenv Python was built without
`enable_load_extension`, so the vector tier's sqlite-vec cannot load into its `sqlite3`. The engine
uses sqlean when it is installed (a dev dependency) and the standard library otherwise: one driver
per process for every connection, because two SQLite libraries in one process must never open the
same file (each keeps its own POSIX lock table, sqlite.org "How To Corrupt", 2.2.1).

Without sqlite-vec the vector tier scores with numpy over the same float32 blobs (exact cosine
either way; sqlite_vectors.py), and says so in the log once.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

log = logging.getLogger("dovecote")


def _driver() -> ModuleType:
    try:
        import sqlean  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        import sqlite3

        return sqlite3
    return sqlean  # type: ignore[no-any-return,unused-ignore]


dbapi: Any = _driver()
OperationalError: type[Exception] = dbapi.OperationalError


def connect(target: str) -> Any:
    """A connection in autocommit mode (the engine opens its own transactions), shareable by threads
    (the engine serializes them with a lock)."""
    return dbapi.connect(target, check_same_thread=False, isolation_level=None)


def load_sqlite_vec(db: Any) -> str:
    """Load sqlite-vec into `db`: its version, or '' when it cannot load (no package, or a SQLite
    without loadable extensions). The reason is logged: the tier then scores with numpy."""
    try:
        import sqlite_vec  # type: ignore[import-untyped,import-not-found,unused-ignore]

        db.enable_load_extension(True)
        try:
            sqlite_vec.load(db)
        finally:
            db.enable_load_extension(False)
        return str(db.execute("SELECT vec_version()").fetchone()[0])
    except (ImportError, AttributeError, OperationalError) as exc:
        log.warning(
            "sqlite-vec did not load (%s: %s); the vector tier scores with numpy (exact cosine, same results)",
            type(exc).__name__,
            exc,
        )
        return ""


__all__ = ["OperationalError", "connect", "dbapi", "load_sqlite_vec"]
