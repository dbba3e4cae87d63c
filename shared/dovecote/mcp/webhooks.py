"""Webhook tools (docs/guides/webhooks.md): a task's webhooks, for a caller that wants to be told of
every event of a task instead of polling it. The token and the credentials go in and are never
answered back. Adding a webhook sends the task's events to an outside URL, and the same id again
replaces one, so a client that asks a person before a destructive call asks before webhooks_add
(and webhooks_delete); the URL is checked (https, no private address) either way."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from dovecote.client import DovecoteClient
from dovecote.mcp.annotations import tool
from dovecote.mcp.fields import TaskId

WebhookId = Annotated[str, Field(description="The webhook's id.")]


def register(server: MCPServer, client: DovecoteClient) -> None:
    @tool(server, "webhooks_add")
    def webhooks_add(
        task_id: TaskId,
        url: Annotated[str, Field(description="An https URL (no private address): it gets every event.")],
        webhook_id: Annotated[str | None, Field(description="Its id; generated when absent.")] = None,
        token: Annotated[str | None, Field(description="Sent as X-A2A-Notification-Token.")] = None,
        scheme: Annotated[str | None, Field(description="The Authorization scheme, e.g. Bearer.")] = None,
        credentials: Annotated[
            str | None, Field(description="Sent as `Authorization: <scheme> <credentials>`.")
        ] = None,
    ) -> dict[str, Any]:
        """Have every event of the task POSTed to `url` from now on: the A2A StreamResponse, signed
        (Standard Webhooks v1a), retried for hours, in order. The webhook, without its secrets."""
        return client.add_webhook(
            task_id, url, webhook_id=webhook_id, token=token, scheme=scheme, credentials=credentials
        )

    @tool(server, "webhooks_list")
    def webhooks_list(task_id: TaskId) -> dict[str, Any]:
        """The task's webhooks: where each points, how far it delivered, its last failure."""
        return {"items": client.list_webhooks(task_id)}

    @tool(server, "webhooks_get")
    def webhooks_get(task_id: TaskId, webhook_id: WebhookId) -> dict[str, Any]:
        """One webhook of the task."""
        return {"webhook": client.get_webhook(task_id, webhook_id)}

    @tool(server, "webhooks_delete")
    def webhooks_delete(task_id: TaskId, webhook_id: WebhookId) -> dict[str, Any]:
        """Stop notifying that webhook (deleting one that is not there is not an error)."""
        client.delete_webhook(task_id, webhook_id)
        return {"deleted": {"task_id": task_id, "webhook_id": webhook_id}}
