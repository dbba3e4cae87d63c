"""Names shared between CDK and code: one place, so a renamed resource cannot drift."""

from __future__ import annotations

SERVICE = "dovecote"
ENV_TOKENS_TABLE = "DOVECOTE_TOKENS_TABLE"
ENV_NOTES_TABLE = "DOVECOTE_NOTES_TABLE"
ENV_BUCKET = "DOVECOTE_BUCKET"
ENV_TASKS_TABLE = "DOVECOTE_TASKS_TABLE"
ENV_MEMORY_TABLE = "DOVECOTE_MEMORY_TABLE"
ENV_MEMORY_QUEUE_URL = "DOVECOTE_MEMORY_QUEUE_URL"
ENV_MEMORY_DLQ_URL = "DOVECOTE_MEMORY_DLQ_URL"
ENV_CURSOR_SECRET_ARN = "DOVECOTE_CURSOR_SECRET_ARN"  # noqa: S105 (an env var name)
ENV_CURSOR_KEY = "DOVECOTE_CURSOR_KEY"

# Notes table key schema: note items and view items (see dovecote/notes/dynamo.py).
NOTES_PK = "pk"
NOTES_SK = "ref"
TOKENS_PK = "token_hash"
# Tasks table GSIs: name → (partition, sort) attributes (see dovecote/tasks/dynamo.py).
TASKS_INDEXES = {
    "claimable": ("claim_pk", "claim_sk"),
    "leases": ("lease_pk", "lease_sk"),
    "by_context": ("ctx_pk", "ctx_sk"),
    "by_authority": ("auth_pk", "auth_sk"),
}

# The janitor deletes unreferenced body versions; any it misses (a failed Put's orphan made
# noncurrent by a later Put) expire after this many days.
NONCURRENT_VERSION_DAYS = 7
