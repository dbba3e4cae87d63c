"""The public Agent Card (`GET /.well-known/agent-card.json`): both HTTP bindings at the deployment's
own URL, protocol version 1.0, bearer tokens, streaming (resumable: the stream-resume extension),
push notifications (durable, ordered, signed: the signed-webhooks extension), and the
Idempotency-Key extension."""

from __future__ import annotations

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)

from dovecote.a2a import mapping

PROTOCOL_VERSION = "1.0"
JSONRPC_PATH = "/"  # the JSON-RPC endpoint: POST to the API's root
REST_PATH = "/a2a"  # the HTTP+JSON binding's base: /a2a/message:send, /a2a/tasks/{id}, ...
IDEMPOTENCY_EXTENSION = "urn:dovecote:a2a:idempotency-key:v1"
STREAM_RESUME_EXTENSION = "urn:dovecote:a2a:stream-resume:v1"
SIGNED_WEBHOOKS_EXTENSION = "urn:dovecote:a2a:signed-webhooks:v1"
BEARER = "bearer"


def agent_card(base_url: str, version: str) -> AgentCard:
    """The card for a deployment reached at `base_url` (scheme and host, no trailing slash)."""
    base = base_url.rstrip("/")
    return AgentCard(
        name="Dovecote",
        description=(
            "Durable, fenced, idempotent tasks for teams of agents: a message creates a task that a "
            "Dovecote worker claims, works on, and completes (or asks for input)."
        ),
        version=version,
        supported_interfaces=[
            AgentInterface(
                url=base + JSONRPC_PATH.rstrip("/"), protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION
            ),
            AgentInterface(url=base + REST_PATH, protocol_binding="HTTP+JSON", protocol_version=PROTOCOL_VERSION),
        ],
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=True,
            extensions=[
                AgentExtension(
                    uri=IDEMPOTENCY_EXTENSION,
                    description=(
                        "Send an Idempotency-Key header with SendMessage: it becomes the task command's id, "
                        "so a retried SendMessage creates one task, not two (an exact retry answers the same task)."
                    ),
                    required=False,
                ),
                AgentExtension(
                    uri=STREAM_RESUME_EXTENSION,
                    description=(
                        "Every SSE event of SendStreamingMessage and SubscribeToTask carries id: the task event "
                        "sequence it reflects (the opening Task: the sequence it was read at). Send that id as "
                        "Last-Event-ID with SubscribeToTask: the Task as it stands comes first, then every update "
                        "after that sequence, so a client that tracked the ids misses nothing and sees nothing twice."
                    ),
                    required=False,
                ),
                AgentExtension(
                    uri=SIGNED_WEBHOOKS_EXTENSION,
                    description=(
                        "Push notifications are retried with backoff for hours, in order per task, and signed as "
                        "Standard Webhooks do: webhook-id (the same on every retry: dedupe by it), webhook-timestamp, "
                        "webhook-signature v1a (Ed25519 over id.timestamp.body), the keys at "
                        + base
                        + "/.well-known/jwks.json."
                    ),
                    required=False,
                ),
            ],
        ),
        security_schemes={
            BEARER: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", description="A Dovecote caller token of the authority the tasks belong to."
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={BEARER: StringList()})],
        default_input_modes=list(mapping.INPUT_MODES),
        default_output_modes=list(mapping.OUTPUT_MODES),
        skills=[
            AgentSkill(
                id="dovecote-tasks",
                name="Dovecote tasks",
                description="Hands the message to the Dovecote workers of the caller's authority, as a task.",
                tags=["tasks", "workers"],
            )
        ],
    )
