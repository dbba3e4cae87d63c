"""Names shared between CDK and code: one place, so a renamed resource cannot drift."""

from __future__ import annotations

SERVICE = "dovecote"
ENV_TOKENS_TABLE = "DOVECOTE_TOKENS_TABLE"
ENV_NOTES_TABLE = "DOVECOTE_NOTES_TABLE"
ENV_BUCKET = "DOVECOTE_BUCKET"
ENV_TASKS_TABLE = "DOVECOTE_TASKS_TABLE"
ENV_CURSOR_SECRET_ARN = "DOVECOTE_CURSOR_SECRET_ARN"  # noqa: S105 (an env var name)
ENV_CURSOR_KEY = "DOVECOTE_CURSOR_KEY"
