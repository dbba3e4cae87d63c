"""The route table, defined once. CDK builds the API Gateway routes from it and the local runtime
serves it: method + path → function, and whether the bearer-token authorizer guards the route.
`ROUTES` is Dovecote's own API, `A2A_ROUTES` the A2A binding's; both serve `ALL_ROUTES`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Function:
    name: str  # also the folder under functions/
    # The module path inside the asset, then the attribute; by default the folder's handler.handler.
    handler: str = ""
    memory_mb: int = 512
    timeout_s: int = 29
    # The Settings fields this function reads (DOVECOTE_<NAME> env vars): it receives only these.
    settings: tuple[str, ...] = ()
    # Reserved concurrency, so one noisy client cannot starve the other functions (CDK context
    # `reserved_concurrency=0` turns it off, e.g. on a new account whose limit is 10).
    reserved: int = 50

    def __post_init__(self) -> None:
        if not self.handler:
            object.__setattr__(self, "handler", f"functions.{self.name}.handler.handler")

    @property
    def module(self) -> str:
        return self.handler.rsplit(".", 1)[0]

    def environment(self, *, subsegments: bool) -> dict[str, str]:
        """The variables the function runs with besides its settings: CDK sets them
        (infra/constructs/api.py) and the cold-start bench runs its probes with them."""
        return {
            "POWERTOOLS_SERVICE_NAME": self.name,
            "POWERTOOLS_METRICS_NAMESPACE": "Dovecote",
            # Lambda's active tracing records every invocation either way; subsegments for the
            # handler and each AWS call cost the X-Ray SDK on every cold start (docs/benchmarks/notes.md).
            "POWERTOOLS_TRACE_DISABLED": "false" if subsegments else "true",
            # No pydantic plugins are deployed: without this, the first model scans every installed
            # distribution's entry points for one (importlib.metadata) on each cold start.
            "PYDANTIC_DISABLE_PLUGINS": "__all__",
        }


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str  # API Gateway syntax: {param}
    function: str
    authorized: bool = True


AUTHORIZER = Function("authorizer", memory_mb=256, timeout_s=10, settings=("tokens_table",))

# What the task service reads: tasks_api and a2a_api (a binding of the same service) both run it.
TASK_SETTINGS = (
    "tasks_table",
    "bucket",
    "cursor_secret_arn",
    "lease_timeout_seconds",
    "presign_seconds",
    "data_key_id",
    "allow_plaintext_reads",
    "artifact_max_bytes",
    "claim_shards",
)

# What the push context reads (docs/guides/webhooks.md); a2a_api serves the same configs. Never
# `allow_loopback_webhooks`: only `dovecote dev --allow-loopback-webhooks` sets it.
PUSH_SETTINGS = ("push_table", "push_queue_url", "push_dlq_url")
# The task service's settings for a reader of tasks that never writes a task item (no claim_shards:
# that is the layout of the items a writer writes).
TASK_READ_SETTINGS = tuple(name for name in TASK_SETTINGS if name != "claim_shards")

FUNCTIONS: dict[str, Function] = {
    f.name: f
    for f in (
        Function(
            "admin_api",
            # artifact_max_bytes: the OpenAPI document it serves states the deployment's own maximum.
            settings=("tokens_table", "cursor_secret_arn", "token_days", "admin_token_days", "artifact_max_bytes"),
        ),
        # The upload commit streams up to 64 MiB through a SHA-256: more memory, more time.
        Function(
            "notes_api", memory_mb=1024, settings=("notes_table", "bucket", "cursor_secret_arn", "presign_seconds")
        ),
        # Chosen by measurement (bench/lambda_memory.py): the cheapest size at which every task command
        # and read stays within 1.5x its duration on a full vCPU (docs/benchmarks/notes.md#lambda-memory).
        Function("tasks_api", memory_mb=768, settings=TASK_SETTINGS),
        # A JSONL transcript of up to ~5 MB is parsed and indexed inside the request.
        Function(
            "recall_api",
            memory_mb=1024,
            settings=(
                "recall_table",
                "bucket",
                "cursor_secret_arn",
                "presign_seconds",
                "opensearch_url",
                "opensearch_aws_service",
                "recall_sqlite_path",
                "embedder",
                "embed_dimension",
            ),
        ),
        # A2A 1.0 (dovecote.a2a): its own function, so no other function's cold start loads a2a-sdk.
        # A blocking SendMessage follows the task for up to 20 s inside API Gateway's 30 s (dovecote.a2a.service).
        # public_url: the Agent Card's interfaces (the API's endpoint, set by CDK once the API exists).
        Function("a2a_api", settings=(*TASK_SETTINGS, *PUSH_SETTINGS, "public_url", "a2a_waits_per_authority")),
        # A status read may long-poll up to 20 s (wait ≤ 20) inside API Gateway's 29 s. Redrive
        # (admin) reads the dead-letter queue and sends to the queue.
        Function("memory_api", settings=("memory_table", "memory_queue_url", "memory_dlq_url", "cursor_secret_arn")),
        # Webhooks (dovecote.push): a task's configs (read through the task service, for the authority
        # rule), the redrive (the queue and its dead-letter queue), the public keys (/.well-known/jwks.json).
        Function("push_api", settings=(*TASK_READ_SETTINGS, *PUSH_SETTINGS)),
    )
}

# Stream consumers: not behind the API. The notes table's stream drives body cleanup.
JANITOR = Function("notes_janitor", memory_mb=256, timeout_s=60, settings=("notes_table", "bucket"), reserved=5)
# Scheduled: deletes body versions no note pins (what the janitor could not see or gave up on).
RECONCILER = Function("notes_reconciler", memory_mb=256, timeout_s=900, settings=("notes_table", "bucket"), reserved=1)
RECONCILE_EVERY_HOURS = 24
# Scheduled: fences leases silent past their timeout (dovecote.tasks: TaskService.expire_silent_leases).
DISPATCHER = Function(
    "lease_dispatcher",
    memory_mb=256,
    timeout_s=55,
    # claim_shards: a fence rewrites the task item, claimable key included (the same layout as the API's).
    settings=("tasks_table", "bucket", "cursor_secret_arn", "claim_shards"),
    reserved=1,
)
DISPATCH_EVERY_SECONDS = 60  # EventBridge's finest schedule; `dovecote dev` runs it every second
JANITOR_BATCH_SIZE = 5  # a record carries old and new images (up to ~800 KB); 5 stay under 6 MB
# Lambda event filter (the event source mapping in CDK, and the local stream emulator): only note
# items that were removed or replaced can orphan a body; view items and inserts never invoke it.
JANITOR_FILTER = {"eventName": ["REMOVE", "MODIFY"], "dynamodb": {"Keys": {"pk": {"S": [{"prefix": "a#"}]}}}}

# Queue consumer: S3 notifies the transcripts queue when an upload lands under TRANSCRIPT_UPLOADS_PREFIX;
# the indexer parses, archives and indexes it (uploads may reach 256 MiB: memory and time to match).
TRANSCRIPT_INDEXER = Function(
    "transcript_indexer",
    memory_mb=2048,
    timeout_s=300,
    settings=(
        "recall_table",
        "bucket",
        "opensearch_url",
        "opensearch_aws_service",
        "recall_sqlite_path",
        "embedder",
        "embed_dimension",
    ),
)
TRANSCRIPT_INDEXER_BATCH_SIZE = 1  # one file per invocation: a failure retries that file alone
TRANSCRIPT_UPLOADS_PREFIX = "uploads/transcripts/"  # dovecote.recall.memory names the same prefix

# Queue consumers: not behind the API. The memory write queue (SQS FIFO) drives the memory worker;
# Powertools reports partial batch failures (ReportBatchItemFailures on the event source mapping).
# It reads the queue through its event source mapping and sends only to the dead-letter queue.
MEMORY_WORKER = Function(
    "memory_worker", memory_mb=512, timeout_s=60, settings=("memory_table", "memory_queue_url", "memory_dlq_url")
)
MEMORY_WORKER_BATCH_SIZE = 10  # the SQS FIFO maximum; a batch never holds one scope out of order

# Webhooks: the tasks table's stream (event inserts) fans out to the webhook queue (SQS FIFO, a group
# per task); the sender delivers from it (docs/guides/webhooks.md). The sender reads tasks (the A2A
# body), opens the configs' secrets and the task payloads (the data key), reads the signing keys.
PUSH_FANOUT = Function("push_fanout", memory_mb=256, timeout_s=60, settings=PUSH_SETTINGS, reserved=5)
PUSH_FANOUT_BATCH_SIZE = 100  # task item images (about a KB); one Query per task of the batch
PUSH_SENDER = Function(
    "push_sender",
    memory_mb=512,
    # A batch of 10 notifications, each up to 10 s to its receiver (one catch-up may hold several).
    timeout_s=180,
    settings=(*TASK_READ_SETTINGS, *PUSH_SETTINGS, "webhook_keys_secret_arn", "webhook_retry_base_seconds"),
    reserved=20,
)
PUSH_SENDER_BATCH_SIZE = 10
# SQS's visibility timeout for the webhook queue: six times the sender's timeout (AWS's advice for
# a Lambda consumer); a retry's wait is set per message (ChangeMessageVisibility).
PUSH_QUEUE_VISIBILITY_S = 6 * PUSH_SENDER.timeout_s

ROUTES: tuple[Route, ...] = (
    Route("GET", "/v1/health", "admin_api", authorized=False),
    Route("GET", "/v1/openapi.json", "admin_api", authorized=False),
    Route("GET", "/v1/whoami", "admin_api"),  # any valid token: caller, worker or admin
    Route("POST", "/v1/admin/tokens", "admin_api"),
    Route("GET", "/v1/admin/tokens", "admin_api"),
    Route("DELETE", "/v1/admin/tokens/{token_id}", "admin_api"),
    Route("PUT", "/v1/notes", "notes_api"),
    Route("GET", "/v1/notes", "notes_api"),
    Route("POST", "/v1/notes/uploads", "notes_api"),
    Route("GET", "/v1/notes/{ref}", "notes_api"),
    Route("DELETE", "/v1/notes/{ref}", "notes_api"),
    # tasks: caller
    Route("POST", "/v1/tasks", "tasks_api"),
    Route("GET", "/v1/tasks", "tasks_api"),
    Route("GET", "/v1/tasks/{id}", "tasks_api"),
    Route("GET", "/v1/contexts/{context}/tasks", "tasks_api"),
    Route("POST", "/v1/tasks/{id}/reply", "tasks_api"),
    Route("POST", "/v1/tasks/{id}/cancel", "tasks_api"),
    Route("GET", "/v1/tasks/{id}/messages", "tasks_api"),
    Route("GET", "/v1/tasks/{id}/messages/{message_id}", "tasks_api"),
    Route("GET", "/v1/tasks/{id}/events", "tasks_api"),
    Route("GET", "/v1/tasks/{id}/grants", "tasks_api"),
    Route("GET", "/v1/tasks/{id}/snapshot", "tasks_api"),
    # tasks: worker
    Route("POST", "/v1/leases/claim", "tasks_api"),
    Route("GET", "/v1/leases", "tasks_api"),
    Route("POST", "/v1/tasks/{id}/lease", "tasks_api"),
    Route("GET", "/v1/tasks/{id}/lease", "tasks_api"),
    Route("POST", "/v1/tasks/{id}/lease/fence", "tasks_api"),
    Route("POST", "/v1/tasks/{id}/lease/heartbeat", "tasks_api"),
    Route("POST", "/v1/tasks/{id}/accept", "tasks_api"),
    Route("POST", "/v1/tasks/{id}/reject", "tasks_api"),
    Route("POST", "/v1/tasks/{id}/fail", "tasks_api"),
    Route("POST", "/v1/tasks/{id}/request-input", "tasks_api"),
    Route("POST", "/v1/tasks/{id}/complete", "tasks_api"),
    Route("POST", "/v1/tasks/{id}/artifacts", "tasks_api"),
    Route("POST", "/v1/tasks/{id}/artifacts/uploads", "tasks_api"),
    Route("POST", "/v1/worker/events", "tasks_api"),
    # workspaces (caller)
    Route("GET", "/v1/workspaces/{workspace}/artifacts/{artifact_id}", "tasks_api"),
    Route("GET", "/v1/workspaces/{workspace}/head", "tasks_api"),
    Route("POST", "/v1/workspaces/{workspace}/artifacts/{artifact_id}/receipt", "tasks_api"),
    Route("GET", "/v1/workspaces/{workspace}/artifacts/{artifact_id}/receipt", "tasks_api"),
    # recall
    Route("POST", "/v1/transcripts", "recall_api"),
    Route("POST", "/v1/transcripts/uploads", "recall_api"),
    Route("POST", "/v1/transcripts/check", "recall_api"),
    Route("GET", "/v1/recall/search", "recall_api"),
    Route("GET", "/v1/recall/read/{ref}", "recall_api"),
    Route("GET", "/v1/recall/outline/{session}", "recall_api"),
    Route("GET", "/v1/recall/topics", "recall_api"),
    Route("POST", "/v1/recall/topics", "recall_api"),
    Route("POST", "/v1/recall/rebuild", "recall_api"),
    # memory
    Route("POST", "/v1/memory/writes", "memory_api"),
    Route("GET", "/v1/memory/writes/{id}", "memory_api"),
    Route("DELETE", "/v1/memory/writes/{id}", "memory_api"),
    Route("GET", "/v1/memory", "memory_api"),
    Route("GET", "/v1/memory/relations", "memory_api"),
    Route("POST", "/v1/memory/relations/{id}/judgment", "memory_api"),
    Route("POST", "/v1/memory/redrive", "memory_api"),
    # webhooks
    Route("POST", "/v1/tasks/{id}/webhooks", "push_api"),
    Route("GET", "/v1/tasks/{id}/webhooks", "push_api"),
    Route("GET", "/v1/tasks/{id}/webhooks/{webhook_id}", "push_api"),
    Route("DELETE", "/v1/tasks/{id}/webhooks/{webhook_id}", "push_api"),
    Route("POST", "/v1/admin/webhooks/redrive", "push_api"),
    Route("GET", "/.well-known/jwks.json", "push_api", authorized=False),
)

# A2A 1.0 (dovecote.a2a; docs/clients/a2a.md): the A2A spec's wire, not Dovecote's API (no OpenAPI entry, no
# SDK, CLI or MCP verb). The public Agent Card, JSON-RPC at the root, HTTP+JSON under /a2a. A custom
# method (`message:send`, `{id}:cancel`) is one path variable: the function reads the verb.
A2A_ROUTES: tuple[Route, ...] = (
    Route("GET", "/.well-known/agent-card.json", "a2a_api", authorized=False),
    Route("POST", "/", "a2a_api"),
    Route("POST", "/a2a/{method}", "a2a_api"),
    Route("GET", "/a2a/tasks", "a2a_api"),
    Route("GET", "/a2a/tasks/{id}", "a2a_api"),
    Route("POST", "/a2a/tasks/{id_action}", "a2a_api"),
    Route("POST", "/a2a/tasks/{id}/pushNotificationConfigs", "a2a_api"),
    Route("GET", "/a2a/tasks/{id}/pushNotificationConfigs", "a2a_api"),
    Route("GET", "/a2a/tasks/{id}/pushNotificationConfigs/{config_id}", "a2a_api"),
    Route("DELETE", "/a2a/tasks/{id}/pushNotificationConfigs/{config_id}", "a2a_api"),
    Route("GET", "/a2a/extendedAgentCard", "a2a_api"),
)

# What API Gateway (CDK) and the local gateway serve.
ALL_ROUTES: tuple[Route, ...] = ROUTES + A2A_ROUTES

# Task streams (docs/guides/streams.md): server-sent events, which an HTTP API buffers. The streams
# function is a WSGI app (functions/streams_api/handler.py) that checks the token with the
# authorizer's code itself; in the cloud it runs behind the Lambda Web Adapter on the streaming front
# (infra/constructs/streams.py), in `dovecote dev` the local gateway hands it these routes.
STREAMS = Function(
    "streams_api",
    handler="functions.streams_api.handler.app",
    memory_mb=256,
    # The streaming front ends a stream at 15 minutes; the function ends it before (stream_seconds).
    timeout_s=900,
    settings=(
        *TASK_SETTINGS,
        *PUSH_SETTINGS,
        "tokens_table",
        "stream_seconds",
        "public_url",
        "a2a_waits_per_authority",
    ),
)
STREAM_ROUTES: tuple[Route, ...] = (Route("GET", "/v1/tasks/{id}/stream", STREAMS.name),)
