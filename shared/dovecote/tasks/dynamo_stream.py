"""What the tasks table's stream (NEW_IMAGE) says to a consumer: the events a write appended to a
task's log. The events live inline in the task item (tasks/dynamo_inline.py), so the write that
appends one is the task item's, and it says so: its `ne` is how many events it appended (every other
write of the task item, a heartbeat, a lease taken or a claimable entry moved, leaves it out); the new
events are then the last `ne` of the item's `event_count`. Items of their own that records move to
(`E#`, `G#`, `M#`) carry no new event. `EVENT_APPENDS` is the Lambda event filter that lets only
those writes invoke the consumer (the push fan-out, docs/guides/webhooks.md), and `event_keys`
reads one record's events back. Pure."""

from __future__ import annotations

from typing import Any

TASK_PK_PREFIX = "T#"
TASK_SK = "T"
EVENT_APPENDS: dict[str, Any] = {
    "eventName": ["INSERT", "MODIFY"],
    "dynamodb": {"Keys": {"sk": {"S": [TASK_SK]}}, "NewImage": {"ne": {"N": [{"exists": True}]}}},
}


def event_keys(record: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(authority, task, sequence) of each event the write of this stream record appended."""
    if record.get("eventName") not in ("INSERT", "MODIFY"):
        return []
    change = record.get("dynamodb") or {}
    image = change.get("NewImage") or {}
    pk = ((change.get("Keys") or {}).get("pk") or {}).get("S") or ""
    sk = ((change.get("Keys") or {}).get("sk") or {}).get("S") or ""
    parts = pk.split("#")
    if sk != TASK_SK or not pk.startswith(TASK_PK_PREFIX) or len(parts) != 3:
        return []
    appended = _number(image.get("ne"))
    count = _number(image.get("event_count"))
    if appended <= 0 or count < appended:
        return []
    return [(parts[1], parts[2], sequence) for sequence in range(count - appended + 1, count + 1)]


def _number(value: Any) -> int:
    text = (value or {}).get("N") if isinstance(value, dict) else None
    return int(text) if isinstance(text, str) and text.isdigit() else 0
