"""The memory part of the Python SDK: submit writes to the serialized queue, wait for their
evidence, cancel, list memories and relation candidates, judge a candidate, redrive dead letters.

`MemoryMixin` adds these methods to any class with `request(method, path, **kwargs)` (the
DovecoteClient mounts it); `MemoryClient(client)` wraps an existing client instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dovecote.client.paging import keyset_items, query
from dovecote.client.paths import path

MAX_WAIT_SECONDS = 20


def _new_id(prefix: str) -> str:
    import uuid

    return f"{prefix}-{uuid.uuid4().hex}"


class MemoryMixin:
    if TYPE_CHECKING:

        def request(self, method: str, path: str, **kwargs: Any) -> Any: ...

    def submit_memory(
        self, scope: str, content: str, *, tags: list[str] | None = None, write_id: str | None = None
    ) -> dict[str, Any]:
        """Queue a memory write: {id, scope, status: "queued"}. Reuse `write_id` to retry safely
        (an exact retry answers the same); a fresh one is generated when none is given."""
        body: dict[str, Any] = {"id": write_id or _new_id("mw"), "scope": scope, "content": content}
        if tags:
            body["tags"] = list(tags)
        return dict(self.request("POST", "/v1/memory/writes", json=body))

    def memory_write(self, write_id: str, *, wait: int | None = None) -> dict[str, Any]:
        """The write's status and, once settled, its evidence. `wait` (≤ 20 s) long-polls."""
        params = {"wait": wait} if wait else {}
        return dict(self.request("GET", path("memory", "writes", write_id), params=params))

    def wait_memory_write(self, write_id: str, *, timeout: float = 60.0) -> dict[str, Any]:
        """Long-poll (20 s at a time) until the write settles or `timeout` seconds pass."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            status = self.memory_write(write_id, wait=max(1, min(MAX_WAIT_SECONDS, int(left))))
            if status["status"] in ("complete", "cancelled", "failed") or time.monotonic() >= deadline:
                return status

    def remember(
        self,
        scope: str,
        content: str,
        *,
        tags: list[str] | None = None,
        write_id: str | None = None,
        wait: float = 60.0,
    ) -> dict[str, Any]:
        """Submit and wait for the evidence: the write's settled status (or its last, if `wait` ran out)."""
        submitted = self.submit_memory(scope, content, tags=tags, write_id=write_id)
        return self.wait_memory_write(submitted["id"], timeout=wait)

    def cancel_memory_write(self, write_id: str) -> bool:
        """True if the write will never be applied because of this (or an earlier, still pending) cancel."""
        return bool(self.request("DELETE", path("memory", "writes", write_id))["cancelled"])

    def list_memories(self, scope: str, *, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        return dict(self.request("GET", "/v1/memory", params=query(scope=scope, limit=limit, cursor=cursor)))

    def iter_memories(self, scope: str, *, limit: int | None = None) -> Iterator[dict[str, Any]]:
        """Every memory of the scope, in applied order, following the cursor."""
        return keyset_items(lambda cursor: self.list_memories(scope, limit=limit, cursor=cursor))

    def memory_relations(
        self, scope: str, *, status: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        params = query(scope=scope, status=status, limit=limit, cursor=cursor)
        return dict(self.request("GET", "/v1/memory/relations", params=params))

    def iter_memory_relations(self, scope: str, *, status: str | None = None) -> Iterator[dict[str, Any]]:
        return keyset_items(lambda cursor: self.memory_relations(scope, status=status, cursor=cursor))

    def judge_relation(
        self, relation_id: str, decision: str, *, note: str | None = None, command_id: str | None = None
    ) -> dict[str, Any]:
        """Confirm or dismiss a pending candidate (decision: confirmed | dismissed). Reuse
        `command_id` to retry safely; a second, different judgment is 409 judgment_conflict."""
        body: dict[str, Any] = {"command_id": command_id or _new_id("c"), "decision": decision}
        if note is not None:
            body["note"] = note
        return dict(self.request("POST", path("memory", "relations", relation_id, "judgment"), json=body)["relation"])

    def redrive_memory(self, *, limit: int = 10) -> dict[str, Any]:
        """Admin: look at up to `limit` dead letters (1–100) and move this authority's writes among
        them back to the queue: {moved, writes}."""
        return dict(self.request("POST", "/v1/memory/redrive", json={"limit": limit}))


class MemoryClient(MemoryMixin):
    """The memory methods over an existing client (anything with `request`)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._client.request(method, path, **kwargs)
