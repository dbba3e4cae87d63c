"""One vocabulary across the HTTP API, the SDK, the CLI and the MCP tools: each operation's name in each,
and the few names that differ from the HTTP field, each listed here with the reason.

The rules (docs/reference/vocabulary.md):
1. The HTTP field is the name everywhere: the SDK parameter, the MCP argument, the CLI long option.
2. A CLI verb may have a short alias (`ls` → `list`, `rm` → `delete`, `freeze` → `freeze-artifact`,
   dovecote.cli.groups.ALIASES), but the documented verb is the MCP tool's.
3. A CLI `--json` answer is the HTTP answer's JSON (same envelope, same keys), and so is an MCP tool's
   structured content.

The manual's vocabulary tables (docs/reference/vocabulary.md) are rendered from this module (`render`),
and tests/unit/test_vocabulary.py
reads the route table, the OpenAPI request models, the SDK signatures, the CLI's options and the MCP
tools' schemas and fails on a name that is neither the HTTP field nor listed here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Operation:
    concept: str
    http: str  # "METHOD /path" as infra/routes.py has it
    sdk: str = ""  # the DovecoteClient method
    cli: str = ""  # the command path after `dovecote`
    mcp: str = ""  # the tool's name


@dataclass(frozen=True)
class Alias:
    """Names that stand for one HTTP field (`http`) where the generic field would be ambiguous, or a
    shorter CLI spelling kept beside the documented one."""

    http: str
    why: str
    sdk: tuple[str, ...] = ()
    cli: tuple[str, ...] = ()  # Python parameter names of arguments, or further option names (--rev)
    mcp: tuple[str, ...] = ()


OPERATIONS: tuple[Operation, ...] = (
    Operation("note put", "PUT /v1/notes", "put_note", "notes put", "notes_put"),
    Operation("note get", "GET /v1/notes/{ref}", "get_note_meta", "notes get", "notes_get"),
    Operation("note list", "GET /v1/notes", "list_notes", "notes list", "notes_list"),
    Operation("note delete", "DELETE /v1/notes/{ref}", "delete_note", "notes delete", "notes_delete"),
    Operation("task create", "POST /v1/tasks", "create_task", "tasks create", "tasks_create"),
    Operation("task get", "GET /v1/tasks/{id}", "get_task"),
    Operation("task with its lease", "GET /v1/tasks/{id}", "read_task", "tasks get", "tasks_get"),
    Operation("task list", "GET /v1/tasks", "list_tasks", "tasks list", "tasks_list"),
    Operation("context's tasks", "GET /v1/contexts/{context}/tasks", "context_tasks", "tasks context"),
    Operation("reply", "POST /v1/tasks/{id}/reply", "reply", "tasks reply", "tasks_reply"),
    Operation("cancel", "POST /v1/tasks/{id}/cancel", "cancel", "tasks cancel", "tasks_cancel"),
    Operation("messages", "GET /v1/tasks/{id}/messages", "messages", "tasks messages", "tasks_messages"),
    Operation("a message", "GET /v1/tasks/{id}/messages/{message_id}", "message", "tasks message", "tasks_message"),
    Operation("events", "GET /v1/tasks/{id}/events", "events", "tasks events", "tasks_events"),
    Operation("task stream", "GET /v1/tasks/{id}/stream", "follow", "tasks watch"),
    Operation("grant history", "GET /v1/tasks/{id}/grants", "grants", "tasks grants", "tasks_grants"),
    Operation("snapshot", "GET /v1/tasks/{id}/snapshot", "snapshot", "tasks snapshot"),
    Operation("claim", "POST /v1/leases/claim", "claim", "worker claim", "tasks_claim"),
    Operation("leases", "GET /v1/leases", "list_leases", "worker leases"),
    Operation("acquire a lease", "POST /v1/tasks/{id}/lease", "acquire", "worker acquire"),
    Operation("the lease", "GET /v1/tasks/{id}/lease", "lease", "worker lease"),
    Operation("heartbeat", "POST /v1/tasks/{id}/lease/heartbeat", "heartbeat", "worker heartbeat"),
    Operation("release (own lease)", "POST /v1/tasks/{id}/lease/fence", "release", "worker release"),
    Operation("fence", "POST /v1/tasks/{id}/lease/fence", "fence", "worker fence"),
    Operation("accept", "POST /v1/tasks/{id}/accept", "accept", "worker accept", "tasks_accept"),
    Operation("reject", "POST /v1/tasks/{id}/reject", "reject", "worker reject"),
    Operation("fail", "POST /v1/tasks/{id}/fail", "fail", "worker fail", "tasks_fail"),
    Operation(
        "request input",
        "POST /v1/tasks/{id}/request-input",
        "request_input",
        "worker request-input",
        "tasks_request_input",
    ),
    Operation("complete", "POST /v1/tasks/{id}/complete", "complete", "worker complete", "tasks_complete"),
    Operation(
        "freeze an artifact",
        "POST /v1/tasks/{id}/artifacts",
        "freeze_artifact",
        "worker freeze-artifact",
        "tasks_freeze_artifact",
    ),
    Operation("worker event", "POST /v1/worker/events", "worker_event", "worker event"),
    Operation(
        "artifact get", "GET /v1/workspaces/{workspace}/artifacts/{artifact_id}", "get_artifact", "artifacts get"
    ),
    Operation("workspace head", "GET /v1/workspaces/{workspace}/head", "workspace_head", "artifacts head"),
    Operation(
        "receipt record",
        "POST /v1/workspaces/{workspace}/artifacts/{artifact_id}/receipt",
        "record_receipt",
        "artifacts receipt record",
    ),
    Operation(
        "receipt get",
        "GET /v1/workspaces/{workspace}/artifacts/{artifact_id}/receipt",
        "get_receipt",
        "artifacts receipt get",
    ),
    Operation("transcript check", "POST /v1/transcripts/check", "check_transcripts"),
    # `recall push` sends both (a client command: it walks files and asks the check first).
    Operation("transcript ingest (JSONL)", "POST /v1/transcripts", "ingest_transcript"),
    Operation("transcript ingest (generic form)", "POST /v1/transcripts", "ingest_messages"),
    Operation("recall search", "GET /v1/recall/search", "recall_search", "recall search", "recall_search"),
    Operation("recall read", "GET /v1/recall/read/{ref}", "recall_read", "recall read", "recall_read"),
    Operation(
        "recall outline", "GET /v1/recall/outline/{session}", "recall_outline", "recall outline", "recall_outline"
    ),
    Operation("recall topics", "GET /v1/recall/topics", "recall_topics", "recall topics", "recall_topics"),
    Operation("label a topic", "POST /v1/recall/topics", "recall_label", "recall topics"),
    Operation("recall rebuild", "POST /v1/recall/rebuild", "recall_rebuild", "recall rebuild"),
    Operation("memory submit", "POST /v1/memory/writes", "submit_memory", "memory submit", "memory_submit"),
    Operation("memory status", "GET /v1/memory/writes/{id}", "memory_write", "memory status", "memory_status"),
    Operation("memory cancel", "DELETE /v1/memory/writes/{id}", "cancel_memory_write", "memory cancel"),
    Operation("memory list", "GET /v1/memory", "list_memories", "memory list", "memory_list"),
    Operation(
        "memory relations", "GET /v1/memory/relations", "memory_relations", "memory relations", "memory_relations"
    ),
    Operation(
        "memory judge", "POST /v1/memory/relations/{id}/judgment", "judge_relation", "memory judge", "memory_judge"
    ),
    Operation("memory redrive", "POST /v1/memory/redrive", "redrive_memory", "memory redrive"),
    Operation("webhook add", "POST /v1/tasks/{id}/webhooks", "add_webhook", "tasks webhooks add", "webhooks_add"),
    Operation("webhook list", "GET /v1/tasks/{id}/webhooks", "list_webhooks", "tasks webhooks list", "webhooks_list"),
    Operation(
        "webhook get", "GET /v1/tasks/{id}/webhooks/{webhook_id}", "get_webhook", "tasks webhooks get", "webhooks_get"
    ),
    Operation(
        "webhook delete",
        "DELETE /v1/tasks/{id}/webhooks/{webhook_id}",
        "delete_webhook",
        "tasks webhooks delete",
        "webhooks_delete",
    ),
    Operation("webhook redrive", "POST /v1/admin/webhooks/redrive", "redrive_webhooks", "tasks webhooks redrive"),
    Operation("webhook signing keys", "GET /.well-known/jwks.json", "webhook_keys", "tasks webhooks keys"),
    Operation("whoami", "GET /v1/whoami", "whoami", "whoami", "whoami"),
    Operation("token create", "POST /v1/admin/tokens", "create_token", "tokens create"),
    Operation("token list", "GET /v1/admin/tokens", "list_tokens", "tokens list"),
    Operation("token revoke", "DELETE /v1/admin/tokens/{token_id}", "revoke_token", "tokens revoke"),
    Operation("health", "GET /v1/health", "health", "health"),
)

ALIASES: tuple[Alias, ...] = (
    Alias("id", "a task's id: `id` alone would not say whose", ("task_id",), ("task_id",), ("task_id",)),
    Alias("id", "a memory write's id", ("write_id",), ("write_id",), ("write_id",)),
    Alias("id", "a relation candidate's id", ("relation_id",), ("relation_id",), ("relation_id",)),
    Alias("id", "a webhook's own id, beside its task's", ("webhook_id",), ("webhook_id",), ("webhook_id",)),
    Alias(
        "authentication",
        "`{scheme, credentials}` as two flat arguments",
        ("scheme", "credentials"),
        ("scheme", "credentials"),
        ("scheme", "credentials"),
    ),
    Alias(
        "ref",
        "a note is named by its ref or by its coordinates, from which the ref is computed locally",
        cli=("author",),
        mcp=("key", "run", "name", "author"),
    ),
    Alias(
        "message",
        "a message: TEXT or a file for a person, plain text for a model",
        (),
        ("text", "file", "media_type"),
        ("text",),
    ),
    Alias("payload", "an artifact's payload: a file or stdin, or text", ("payload",), ("file",), ("text",)),
    Alias("body_b64", "a note's body: bytes, a path or a stream", ("body",), ("file",)),
    Alias("event", "a worker event: a JSON file or stdin", cli=("file",)),
    Alias("format", "`format=oneline` as a flag", cli=("oneline",)),
    Alias("expected_revision", "the short spelling", cli=("--rev",)),
    Alias("wait_seconds", "the short spelling", cli=("--wait",)),
    Alias("artifact_id", "the short spelling", cli=("--artifact",)),
    Alias("expected_base_revision", "the short spelling", cli=("--base",)),
    Alias("observed_revision", "the short spelling", cli=("--observed",)),
    Alias("tags", "one tag per option", cli=("--tag",)),
    Alias("include_subagents", "the short spelling", cli=("--subagents",)),
)

# Names with no HTTP field behind them: how a client reads input, prints, pages, waits or picks a token.
CLIENT_ONLY: dict[str, frozenset[str]] = {
    # `follow`: whether to yield lease states too, and its bound on reconnects without progress.
    "sdk": frozenset({"progress", "timeout", "leases", "max_reconnects"}),
    # --json, --all (every page), --output / --meta (a note's body), --role (which token),
    # `memory submit --wait` (then reads the write's status with its `wait`), and --verbose (what a
    # caller command read: the revision it sent when --rev was omitted), and `tasks watch --timeout`
    # (how long to follow the stream: the SDK's `follow(timeout=)`).
    "cli": frozenset({"json", "all", "output", "meta", "role", "wait", "verbose", "timeout"}),
    "mcp": frozenset(),
}
# CLI commands that are not one HTTP route: composed or local.
CLIENT_COMMANDS = (
    "tasks wait",
    "recall push",
    "recall hook",
    "tokens bootstrap",
    "login",
    "logout",
    "dev",
    "dev token",
    "mcp",
)


def render() -> list[str]:
    """The manual's two tables (docs/reference/vocabulary.md), as markdown lines."""
    lines = ["| concept | HTTP | SDK | CLI (`dovecote …`) | MCP tool |", "|---|---|---|---|---|"]
    for op in OPERATIONS:
        cells = [f"`{value}`" if value else "—" for value in (op.http, op.sdk, op.cli, op.mcp)]
        lines.append(f"| {op.concept} | " + " | ".join(cells) + " |")
    lines += ["", "| HTTP field | SDK | CLI | MCP | why |", "|---|---|---|---|---|"]
    for alias in ALIASES:
        cells = [", ".join(f"`{n}`" for n in names) or "—" for names in (alias.sdk, alias.cli, alias.mcp)]
        lines.append(f"| `{alias.http}` | " + " | ".join(cells) + f" | {alias.why} |")
    return lines


__all__ = ["ALIASES", "CLIENT_COMMANDS", "CLIENT_ONLY", "OPERATIONS", "Alias", "Operation", "render"]
