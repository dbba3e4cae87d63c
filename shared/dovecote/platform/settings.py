"""Typed settings, validated once per container (cold start) from the environment.

Resource names are the only coupling between CDK and code: `infra/constants.py` names the
environment variables, CDK sets them, and this dataclass reads them. It is checked by hand, not by a
pydantic model: it is read on every function's first request, and a2a_api (like the authorizer) loads
no pydantic otherwise (about 35 ms of its cold start). `BOUNDS`, `PATTERNS` and the Literal
annotations are the constraints; tests/unit/test_settings.py holds them.
"""

from __future__ import annotations

import os
import re
import typing
from dataclasses import MISSING, dataclass, field, fields
from functools import lru_cache
from typing import Any, Literal

# Inclusive ranges of the numeric settings.
BOUNDS: dict[str, tuple[int, int]] = {
    "presign_seconds": (60, 7 * 24 * 3600),
    "lease_timeout_seconds": (0, 86_400),
    "accept_timeout_seconds": (0, 3_600),
    "claim_shards": (1, 64),
    "artifact_max_bytes": (1, 64 * 1024 * 1024),
    "token_days": (1, 3650),
    "admin_token_days": (1, 3650),
    "a2a_waits_per_authority": (0, 50),
    "stream_seconds": (5, 900),
    "webhook_retry_base_seconds": (1, 300),
}
PATTERNS: dict[str, re.Pattern[str]] = {
    "opensearch_index_prefix": re.compile(r"[a-z0-9][a-z0-9._-]{0,99}"),
    # http(s), a host (name, IPv4 or [IPv6]) and an optional port and path; no query, no fragment.
    "public_url": re.compile(r"(https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?)?"),
}
# What an environment variable may say for a boolean (pydantic's words, which this replaced).
TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
FALSE = frozenset({"0", "false", "f", "no", "n", "off"})


class SettingsError(ValueError):
    """A setting out of its range or choices: the function refuses to start with it."""


@dataclass(frozen=True)
class Settings:
    tokens_table: str = "dovecote-tokens"
    notes_table: str = "dovecote-notes"
    tasks_table: str = "dovecote-tasks"
    memory_table: str = "dovecote-memory"
    # The memory write queue (SQS FIFO) and its dead-letter queue; no default: they are URLs.
    memory_queue_url: str = ""
    memory_dlq_url: str = ""
    bucket: str = "dovecote-bodies"
    # Recall: the ingest ledger (pending uploads), the embedded index's database file (":memory:"
    # keeps it in the process), and the OpenSearch endpoint that replaces it when set.
    recall_table: str = "dovecote-recall"
    recall_sqlite_path: str = ".dovecote/recall.sqlite3"
    opensearch_url: str | None = None
    # OpenSearch access: SigV4 with the function's own credentials when a service is named ("es" for a
    # domain, "aoss" for a serverless collection); otherwise basic auth from these or the URL's userinfo.
    opensearch_aws_service: Literal["", "es", "aoss"] = ""
    opensearch_username: str | None = None
    opensearch_password: str | None = field(default=None, repr=False)  # a secret: never in a log line
    # The engine's indices are `<prefix>-messages`, `-sessions`, `-topics` (lowercase, as OpenSearch wants).
    opensearch_index_prefix: str = "dovecote-recall"
    # Cloud: the HMAC key lives in Secrets Manager. Local: a generated dev key may be given directly.
    cursor_secret_arn: str | None = None
    cursor_key: str | None = field(default=None, repr=False)  # a secret: never in a log line
    # Presigned URLs (upload and download) stay valid this long.
    presign_seconds: int = 900
    region: str = "us-east-1"
    # How long a task's lease may stay silent before the dispatcher fences it, when a create does
    # not say. 5 minutes: a worker heartbeating every minute survives four lost heartbeats, and a
    # crashed worker's task is claimable again within about six minutes (timeout + dispatch period).
    lease_timeout_seconds: int = 300
    # How long a grant may stay unaccepted before the dispatcher fences it, when a create does not
    # say: a worker that dies between its claim and its accept strands the task for this long.
    accept_timeout_seconds: int = 30
    # The claimable index's partitions per authority. 1, the default, is the reference rule: a claim
    # takes strictly the oldest claimable task. More spread a large fleet's concurrent claims over
    # them, at the price of claiming close to, not at, the oldest (bench/claims.py models both). Part
    # of the data layout: after a change the dispatcher moves the entries written under the old
    # count (TaskService.reshard_claimable), and `dovecote dev` does it before it serves.
    claim_shards: int = 1
    # Protected payloads (platform/protection.py): the KMS key whose data keys seal message parts and
    # artifact payloads at rest. `allow_plaintext_reads` exists only to migrate data written before
    # protection: with it off (the default) a plaintext record where a sealed one belongs is refused.
    data_key_id: str | None = None
    allow_plaintext_reads: bool = False
    # The largest artifact payload this deployment accepts (the hard maximum is 64 MiB).
    artifact_max_bytes: int = 16 * 1024 * 1024
    # The semantic tier (dovecote.embedding): off by default, the search stays lexical. `bedrock` is Titan
    # Text Embeddings V2 at `embed_dimension`; `local` the packaged all-MiniLM-L6-v2 (384 dimensions);
    # `hashing` the deterministic fake for tests (not semantic).
    embedder: Literal["off", "bedrock", "local", "hashing"] = "off"
    embed_dimension: Literal[256, 512, 1024] = 512
    # The deployment's own URL as clients reach it (the API's endpoint, or its custom domain): the
    # A2A Agent Card names its interfaces under it, never under a request's Host or X-Forwarded-Proto.
    public_url: str = ""
    # Blocking SendMessage waits one authority may hold at once, across every instance of the A2A
    # function (a DynamoDB item per authority: dovecote/a2a/waits.py); past it a send answers the
    # task as it stands, as returnImmediately does. 0: no send blocks.
    a2a_waits_per_authority: int = 8
    # How long one task stream lasts before it ends with `event: reconnect` (dovecote/tasks/streams.py):
    # the cloud front (an API Gateway REST API streaming response) ends a stream at 15 minutes.
    stream_seconds: int = 840
    # Webhooks (dovecote/push, docs/guides/webhooks.md): the configs' table, the FIFO queue of
    # notifications and its dead-letter queue, and where the signing keys are (the cloud: a Secrets
    # Manager secret; `dovecote dev`: a 0600 file in its data directory).
    push_table: str = "dovecote-push"
    push_queue_url: str = ""
    push_dlq_url: str = ""
    webhook_keys_secret_arn: str = ""
    webhook_key_file: str = ""
    # The first retry's wait (seconds); each next one doubles it, up to an hour (push/model.py).
    webhook_retry_base_seconds: int = 5
    # Plain http to loopback receivers: only `dovecote dev --allow-loopback-webhooks` sets it. No
    # function's settings list names it (infra/routes.py), so a deployment never has it.
    allow_loopback_webhooks: bool = False
    # Token lifetimes when a mint does not say (days). Admin tokens are short on purpose.
    token_days: int = 90
    admin_token_days: int = 7

    def __post_init__(self) -> None:
        hints = _hints()
        for spec in fields(self):
            _check(spec.name, getattr(self, spec.name), hints[spec.name])

    @classmethod
    def default(cls, name: str) -> Any:
        """A setting's default (infra states it in the stack's environment)."""
        spec = {f.name: f for f in fields(cls)}[name]
        return spec.default if spec.default is not MISSING else None


@lru_cache(maxsize=1)
def _hints() -> dict[str, Any]:
    return typing.get_type_hints(Settings)


def _options(hint: Any) -> tuple[Any, ...]:
    """A Literal's choices, or () for any other type."""
    return typing.get_args(hint) if typing.get_origin(hint) is Literal else ()


def _check(name: str, value: Any, hint: Any) -> None:
    where = ENV_PREFIX + name.upper()
    if options := _options(hint):
        if value not in options or type(value) is not type(options[0]):
            raise SettingsError(f"{where} must be one of {', '.join(repr(o) for o in options)}, not {value!r}")
    elif hint is bool:
        if not isinstance(value, bool):
            raise SettingsError(f"{where} must be true or false, not {value!r}")
    elif hint is int:
        low, high = BOUNDS.get(name, (None, None))
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingsError(f"{where} must be a whole number, not {value!r}")
        if (low is not None and value < low) or (high is not None and value > high):
            raise SettingsError(f"{where} must be between {low} and {high}, not {value}")
    elif not isinstance(value, str) and not (value is None and typing.get_origin(hint) is not None):
        raise SettingsError(f"{where} must be text, not {value!r}")
    elif name in PATTERNS and not PATTERNS[name].fullmatch(value or ""):
        raise SettingsError(f"{where} must match {PATTERNS[name].pattern}, not {value!r}")


def _parse(name: str, raw: str, hint: Any) -> Any:
    """An environment variable's text as the setting's type (the check comes after)."""
    options = _options(hint)
    if hint is int or (options and isinstance(options[0], int)):
        try:
            return int(raw.strip(), 10)
        except ValueError:
            raise SettingsError(f"{ENV_PREFIX + name.upper()} must be a whole number, not {raw!r}") from None
    if hint is bool:
        word = raw.strip().lower()
        if word in TRUE or word in FALSE:
            return word in TRUE
        raise SettingsError(f"{ENV_PREFIX + name.upper()} must be true or false, not {raw!r}")
    return raw


ENV_PREFIX = "DOVECOTE_"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    hints = _hints()
    values: dict[str, Any] = {}
    for spec in fields(Settings):
        raw = os.environ.get(ENV_PREFIX + spec.name.upper())
        if raw is not None and raw != "":
            values[spec.name] = _parse(spec.name, raw, hints[spec.name])
    values.setdefault("region", os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
    return Settings(**values)
