"""Typed settings, validated once per container (cold start) from the environment.

Resource names are the only coupling between CDK and code: `infra/constants.py` names the
environment variables, CDK sets them, and this model reads them.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True)

    tokens_table: str = Field(default="dovecote-tokens")
    notes_table: str = Field(default="dovecote-notes")
    tasks_table: str = Field(default="dovecote-tasks")
    memory_table: str = Field(default="dovecote-memory")
    # The memory write queue (SQS FIFO) and its dead-letter queue; no default: they are URLs.
    memory_queue_url: str = ""
    memory_dlq_url: str = ""
    bucket: str = Field(default="dovecote-bodies")
    # Recall: the ingest ledger (pending uploads), the embedded index's database file (":memory:"
    # keeps it in the process), and the OpenSearch endpoint that replaces it when set.
    recall_table: str = Field(default="dovecote-recall")
    recall_sqlite_path: str = Field(default=".dovecote/recall.sqlite3")
    opensearch_url: str | None = None
    # OpenSearch access: SigV4 with the function's own credentials when a service is named ("es" for a
    # domain, "aoss" for a serverless collection); otherwise basic auth from these or the URL's userinfo.
    opensearch_aws_service: Literal["", "es", "aoss"] = ""
    opensearch_username: str | None = None
    opensearch_password: str | None = None
    # The engine's indices are `<prefix>-messages`, `-sessions`, `-topics` (lowercase, as OpenSearch wants).
    opensearch_index_prefix: str = Field(default="dovecote-recall", pattern=r"^[a-z0-9][a-z0-9._-]{0,99}\z")
    # Cloud: the HMAC key lives in Secrets Manager. Local: a generated dev key may be given directly.
    cursor_secret_arn: str | None = None
    cursor_key: str | None = None
    # Presigned URLs (upload and download) stay valid this long.
    presign_seconds: int = Field(default=900, ge=60, le=7 * 24 * 3600)
    region: str = "us-east-1"
    # How long a task's lease may stay silent before the dispatcher fences it, when a create does
    # not say. 5 minutes: a worker heartbeating every minute survives four lost heartbeats, and a
    # crashed worker's task is claimable again within about six minutes (timeout + dispatch period).
    lease_timeout_seconds: int = Field(default=300, ge=0, le=86_400)
    # How long a grant may stay unaccepted before the dispatcher fences it, when a create does not
    # say: a worker that dies between its claim and its accept strands the task for this long.
    accept_timeout_seconds: int = Field(default=30, ge=0, le=3_600)
    # The claimable index's partitions per authority: claims spread over them (bench/claims.py models
    # the throughput and the order skew). 1 is the seed's rule, strictly the oldest task first, for
    # small fleets. Part of the data layout: raising it is safe at any time, lowering it leaves the
    # claimable tasks of the dropped shards unclaimable until their next write.
    claim_shards: int = Field(default=16, ge=1, le=64)
    # Protected payloads (platform/protection.py): the KMS key whose data keys seal message parts and
    # artifact payloads at rest. `allow_plaintext_reads` exists only to migrate data written before
    # protection: with it off (the default) a plaintext record where a sealed one belongs is refused.
    data_key_id: str | None = None
    allow_plaintext_reads: bool = False
    # The largest artifact payload this deployment accepts (the hard maximum is 64 MiB).
    artifact_max_bytes: int = Field(default=16 * 1024 * 1024, ge=1, le=64 * 1024 * 1024)
    # The semantic tier (dovecote.embedding): off by default, the search stays lexical. `bedrock` is Titan
    # Text Embeddings V2 at `embed_dimension`; `local` the packaged all-MiniLM-L6-v2 (384 dimensions);
    # `hashing` the deterministic fake for tests (not semantic).
    embedder: Literal["off", "bedrock", "local", "hashing"] = "off"
    embed_dimension: Literal[256, 512, 1024] = 512
    # Token lifetimes when a mint does not say (days). Admin tokens are short on purpose.
    token_days: int = Field(default=90, ge=1, le=3650)
    admin_token_days: int = Field(default=7, ge=1, le=3650)


ENV_PREFIX = "DOVECOTE_"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    values: dict[str, str] = {}
    for name in Settings.model_fields:
        raw = os.environ.get(ENV_PREFIX + name.upper())
        if raw is not None and raw != "":
            values[name] = raw
    values.setdefault("region", os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
    return Settings.model_validate(values)
