"""`dovecote tasks webhooks …`: a task's webhooks (docs/guides/webhooks.md), built from the verb table
(`dovecote.cli.verbs`): add, list, get, delete; `redrive` (admin) sends dead-lettered notifications
again; `keys` prints the public signing keys (the JWKS a receiver verifies `webhook-signature` with).

Options are the HTTP fields: `--webhook-id` (the body's `id`), `--token`, `--scheme` and
`--credentials` (the `authentication` object). The token and the credentials are never printed back:
the answer says only whether they are set."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from dovecote.cli.errors import swapped
from dovecote.cli.groups import new_app
from dovecote.cli.verbs import Did, Rows, Show, Verb, param, redrive, register

app = new_app("A task's webhooks: notified of every event, signed, retried for hours, in order.")

TASK = param("task_id", Annotated[str, typer.Argument(metavar="TASK", help="The task's id.", show_default=False)])
WEBHOOK = param(
    "webhook_id", Annotated[str, typer.Argument(metavar="WEBHOOK", help="The webhook's id.", show_default=False)]
)


def _task_of(values: dict[str, Any]) -> str:
    """TASK, unless it is the URL and URL the task (the two swapped): a usage error in the right order."""
    task, url = str(values["task_id"]), str(values["url"])
    if "://" in task and "://" not in url:
        why = "is a URL: the order is TASK URL"
        raise swapped("TASK", task, why, "dovecote", "tasks", "webhooks", "add", url, task)
    return task


def _line(hook: dict[str, Any]) -> str:
    failure = hook.get("last_failure") or {}
    last = f"  last failure: {failure.get('status')} {failure.get('reason', '')}" if failure else ""
    # `delivered` is a cursor: the last event sent, or for a webhook that has sent nothing yet, the
    # last one before it was added (it notifies from then on).
    return f"{hook['id']}  {hook['url']}  at event {hook['delivered']}{last}"


register(
    app,
    (
        Verb(
            "add",
            "POST /v1/tasks/{id}/webhooks",
            "Notify an https URL of every event of TASK from now on (the same --webhook-id replaces it).",
            (
                TASK,
                param("url", Annotated[str, typer.Argument(metavar="URL", help="https (no private address).")]),
                param("webhook_id", Annotated[str | None, typer.Option(help="Its id; generated when absent.")], None),
                param("token", Annotated[str | None, typer.Option(help="Sent as X-A2A-Notification-Token.")], None),
                param("scheme", Annotated[str | None, typer.Option(help="Authorization scheme, e.g. Bearer.")], None),
                param(
                    "credentials",
                    Annotated[str | None, typer.Option(help="Sent as `Authorization: <scheme> <credentials>`.")],
                    None,
                ),
            ),
            lambda c, v: c.add_webhook(
                _task_of(v),
                v["url"],
                webhook_id=v["webhook_id"],
                token=v["token"],
                scheme=v["scheme"],
                credentials=v["credentials"],
            ),
            Show("webhook"),
        ),
        Verb(
            "list",
            "GET /v1/tasks/{id}/webhooks",
            "TASK's webhooks: where each points, how far it delivered, its last failure.",
            (TASK,),
            lambda c, v: c.list_webhooks(v["task_id"]),
            Rows(_line),
        ),
        Verb(
            "get",
            "GET /v1/tasks/{id}/webhooks/{webhook_id}",
            "One webhook of TASK.",
            (TASK, WEBHOOK),
            lambda c, v: c.get_webhook(v["task_id"], v["webhook_id"]),
            Show("webhook"),
        ),
        Verb(
            "delete",
            "DELETE /v1/tasks/{id}/webhooks/{webhook_id}",
            "No more notifications to WEBHOOK (deleting one that is not there is not an error).",
            (TASK, WEBHOOK),
            lambda c, v: c.delete_webhook(v["task_id"], v["webhook_id"]),
            Did(
                lambda v: {"deleted": {"task_id": v["task_id"], "webhook_id": v["webhook_id"]}},
                lambda v: f"deleted webhook {v['webhook_id']} of task {v['task_id']}",
            ),
        ),
        redrive(
            "POST /v1/admin/webhooks/redrive",
            "Send this authority's dead-lettered notifications again, same webhook-id (admin token).",
            lambda c, limit: c.redrive_webhooks(limit=limit),
        ),
        Verb(
            "keys",
            "GET /.well-known/jwks.json",
            "The public keys that sign webhooks (JWKS: Ed25519), to verify webhook-signature v1a with.",
            (),
            lambda c, v: c.webhook_keys(),
        ),
    ),
)
