"""What the tasks table's stream (KEYS_ONLY) says to a consumer: a new event of a task's log. The
event items' keys are tasks/dynamo_items.py's (pk `T#<authority>#<task>`, sk `E#<sequence:020>`);
`EVENT_INSERTS` is the Lambda event filter that lets only their inserts invoke the consumer (the
push fan-out, docs/guides/webhooks.md), and `event_key` reads one record's keys back. Pure."""

from __future__ import annotations

from typing import Any

EVENT_SK_PREFIX = "E#"
TASK_PK_PREFIX = "T#"
EVENT_INSERTS: dict[str, Any] = {
    "eventName": ["INSERT"],
    "dynamodb": {"Keys": {"sk": {"S": [{"prefix": EVENT_SK_PREFIX}]}}},
}


def event_key(record: dict[str, Any]) -> tuple[str, str, int] | None:
    """(authority, task, sequence) of a stream record that inserted an event, else None."""
    if record.get("eventName") != "INSERT":
        return None
    keys = (record.get("dynamodb") or {}).get("Keys") or {}
    pk = (keys.get("pk") or {}).get("S") or ""
    sk = (keys.get("sk") or {}).get("S") or ""
    if not pk.startswith(TASK_PK_PREFIX) or not sk.startswith(EVENT_SK_PREFIX):
        return None
    parts = pk.split("#")
    digits = sk[len(EVENT_SK_PREFIX) :]
    if len(parts) != 3 or not digits.isdigit():
        return None
    return parts[1], parts[2], int(digits)
