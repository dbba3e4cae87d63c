"""The webhooks part of the Python SDK (docs/guides/webhooks.md): a task's webhooks (add, list, get,
delete), the dead letters' redrive (admin), and the public signing keys.

`WebhooksMixin` adds these methods to any class with `request(method, path, **kwargs)` (the
DovecoteClient mounts it). Paths are built segment by segment (dovecote.client.paths): a task or
webhook id a model was steered into cannot reach another route.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dovecote.client.paths import path, segment
from dovecote.client.tasks import new_id


class WebhooksMixin:
    if TYPE_CHECKING:

        def request(self, method: str, path: str, **kwargs: Any) -> Any: ...

    def add_webhook(
        self,
        task_id: str,
        url: str,
        *,
        webhook_id: str | None = None,
        token: str | None = None,
        scheme: str | None = None,
        credentials: str | None = None,
    ) -> dict[str, Any]:
        """`POST /v1/tasks/{id}/webhooks`: notify `url` (https) of every event of the task from now on,
        signed, retried for hours, in order. `token` is sent as X-A2A-Notification-Token, `scheme` and
        `credentials` as `Authorization: <scheme> <credentials>`; neither is ever answered back. The
        same `webhook_id` again replaces that webhook's settings; without one the SDK picks it, so a
        retry of this call (a lost answer) is the same webhook, never a second. The webhook, as
        `{id, url, ...}`."""
        body: dict[str, Any] = {"url": url, "id": webhook_id or new_id("wh")}
        if token:
            body["token"] = token
        if scheme:
            body["authentication"] = {"scheme": scheme, **({"credentials": credentials} if credentials else {})}
        return dict(self.request("POST", path("tasks", task_id, "webhooks"), json=body)["webhook"])

    def list_webhooks(self, task_id: str) -> list[dict[str, Any]]:
        """The task's webhooks (at most 10): where each points, how far it delivered, its last failure."""
        return list(self.request("GET", path("tasks", task_id, "webhooks"))["items"])

    def get_webhook(self, task_id: str, webhook_id: str) -> dict[str, Any]:
        return dict(self.request("GET", path("tasks", task_id, "webhooks", webhook_id))["webhook"])

    def delete_webhook(self, task_id: str, webhook_id: str) -> None:
        """No more notifications to it; deleting one that is not there is not an error."""
        self.request("DELETE", path("tasks", task_id, "webhooks", webhook_id))

    def redrive_webhooks(self, limit: int | None = None) -> dict[str, Any]:
        """Admin: send this authority's dead-lettered notifications again (the same webhook-id):
        `{moved, notifications}`."""
        return dict(self.request("POST", "/v1/admin/webhooks/redrive", json={"limit": limit or 0}))

    def webhook_keys(self) -> dict[str, Any]:
        """The JWKS of the keys that sign webhooks (`webhook-signature` v1a: Ed25519)."""
        return dict(self.request("GET", "/.well-known/" + segment("jwks.json")))
