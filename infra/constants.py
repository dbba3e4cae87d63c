"""Names shared between CDK and code: one place, so a renamed resource cannot drift."""

from __future__ import annotations

SERVICE = "dovecote"
ENV_TOKENS_TABLE = "DOVECOTE_TOKENS_TABLE"
ENV_NOTES_TABLE = "DOVECOTE_NOTES_TABLE"
ENV_BUCKET = "DOVECOTE_BUCKET"
ENV_CURSOR_SECRET_ARN = "DOVECOTE_CURSOR_SECRET_ARN"  # noqa: S105 (an env var name)
ENV_CURSOR_KEY = "DOVECOTE_CURSOR_KEY"

# Notes table: key schema and the three GSIs the list filters use (see dovecote/notes/dynamo.py).
NOTES_PK = "pk"
NOTES_SK = "ref"
NOTES_INDEXES = {"by_key": "pk_key", "by_run": "pk_run", "by_name": "pk_name"}
NOTES_INDEX_PROJECTION = ["key", "run", "name", "author", "size", "updated_at", "sha256", "content_type"]
TOKENS_PK = "token_hash"

# Noncurrent body versions (overwritten or deleted notes) are kept this long, then expire.
NONCURRENT_VERSION_DAYS = 7
