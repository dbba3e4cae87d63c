"""In-memory TaskStore: the fake held to the same conformance suite as the DynamoDB adapter. It
shares every decision with that adapter (tasks/storage.py: which preconditions a commit carries and
what each failure raises, the list orders, what a heartbeat requires, how parts read back) and
differs only in persistence: dicts under one lock. A commit checks every precondition first, then
applies everything: atomic."""

from __future__ import annotations

import hashlib
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

from dovecote.platform.uploads import PresignedUpload
from dovecote.tasks import ports
from dovecote.tasks.model import (
    ARTIFACT_INLINE_ANSWER,
    TOTAL_SIZE_CAP,
    ApplyReceipt,
    Artifact,
    Event,
    Grant,
    Message,
    Receipt,
    Task,
    WorkspaceHead,
    expiry_shard,
    lease_deadline,
)
from dovecote.tasks.storage import (
    CLAIM_SHARDS,
    apply_checks,
    check_upload,
    claim_shard,
    commit_checks,
    commit_failure,
    created_order,
    heartbeat,
    invert,
    is_claimable,
    lease_order,
    no_upload,
    stored_message,
    updated_order,
    upload_too_large,
)


class InMemoryTaskStore:
    def __init__(self, *, claim_shards: int = CLAIM_SHARDS) -> None:
        self.claim_shards = claim_shards  # as the DynamoDB store: a claim reads one shard at a time
        # The shard count each task's claimable entry was written under, as the DynamoDB store's key
        # records it: a store opened with another count finds an entry only once it is resharded.
        self.indexed_under: dict[tuple[str, str], int] = {}
        self.layout = ports.ClaimableLayout()
        self._lock = threading.RLock()
        self.tasks: dict[tuple[str, str], Task] = {}
        self.receipts: dict[tuple[str, str], Receipt] = {}
        self.messages_by_task: dict[tuple[str, str], list[Message]] = defaultdict(list)
        self.message_ids: set[tuple[str, str]] = set()
        self.events_by_task: dict[tuple[str, str], list[Event]] = defaultdict(list)
        self.grants: dict[tuple[str, str, int], Grant] = {}
        self.submissions: set[tuple[str, str]] = set()
        self.artifacts: dict[tuple[str, str, str], Artifact] = {}
        self.payloads: dict[tuple[str, str, str], bytes] = {}
        self.heads: dict[tuple[str, str], WorkspaceHead] = {}
        self.apply_receipts: dict[tuple[str, str, str], ApplyReceipt] = {}
        self.deliveries: dict[tuple[str, str, str], ports.Delivery] = {}
        self.uploads: dict[tuple[str, str], bytes] = {}  # (authority, sha256) → an uploaded payload

    def read(
        self, authority: str, command_id: str | None, task_id: str | None, *, delivery: ports.DeliveryKey | None = None
    ) -> ports.Snapshot:
        with self._lock:
            receipt = self.receipts.get((authority, command_id)) if command_id else None
            task = self.tasks.get((authority, task_id)) if task_id else None
            settled = self.deliveries.get((authority, *delivery)) if delivery else None
            return ports.Snapshot(receipt, task, settled)

    def commit(self, commit: ports.Commit) -> None:
        authority = commit.receipt.authority
        key = (authority, commit.task.id)
        with self._lock:
            current = self.tasks.get(key)
            claim, change = commit.head_claim, commit.artifact_change
            head = self.heads.get((authority, claim.workspace)) if claim is not None else None
            holds: dict[str, Callable[[], bool]] = {
                "receipt": lambda: (authority, commit.receipt.id) not in self.receipts,
                "task_insert": lambda: current is None,
                "task_cas": lambda: _expected(commit, current),
                "message_id": lambda: not any((authority, m.id) in self.message_ids for m in commit.messages),
                "record": lambda: (
                    commit.grant is None or (authority, commit.task.id, commit.grant.fence) not in self.grants
                ),
                "submission": lambda: (authority, commit.submission) not in self.submissions,
                "artifact": lambda: (
                    commit.artifact is None
                    or (authority, commit.artifact.workspace, commit.artifact.id) not in self.artifacts
                ),
                "head": lambda: head is None or claim is None or head.confirmed_revision == claim.confirmed_revision,
                "artifact_change": lambda: (
                    change is None
                    or getattr(self.artifacts.get((authority, change.workspace, change.artifact)), "state", None)
                    == change.from_state
                ),
                "delivery": lambda: (
                    commit.delivery is None
                    or (authority, commit.delivery.worker, commit.delivery.id) not in self.deliveries
                ),
            }
            for check in commit_checks(commit):
                if not holds[check]():
                    raise commit_failure(check, task=current, head=head)
            # every precondition holds: apply all of it
            self.receipts[(authority, commit.receipt.id)] = commit.receipt
            self.tasks[key] = commit.task
            self.indexed_under[key] = self.claim_shards
            for message in commit.messages:
                self.message_ids.add((authority, message.id))
                self.messages_by_task[key].append(message)
            self.events_by_task[key].extend(commit.events)
            if commit.grant:
                self.grants[(authority, commit.task.id, commit.grant.fence)] = commit.grant
            if commit.submission:
                self.submissions.add((authority, commit.submission))
            if commit.artifact:
                art, payload = commit.artifact, commit.payload
                if payload is not None:
                    data = (
                        payload.data if payload.data is not None else self.uploads[(authority, payload.upload_sha256)]
                    )
                    self.payloads[(authority, art.workspace, art.id)] = data
                self.artifacts[(authority, art.workspace, art.id)] = art
            if claim is not None and head is None:
                self.heads[(authority, claim.workspace)] = claim
            if change is not None:
                art_key = (authority, change.workspace, change.artifact)
                self.artifacts[art_key] = replace(
                    self.artifacts[art_key], state=change.to_state, **cast(dict[str, Any], {change.stamp: change.at})
                )
            if commit.delivery:
                d = commit.delivery
                self.deliveries[(authority, d.worker, d.id)] = d

    # ---- artifacts, heads, apply receipts, deliveries ----------------------------------------

    def stage_artifact_upload(self, authority: str, sha256: str, max_bytes: int) -> int:
        body = self.uploads.get((authority, sha256))
        if body is None:
            raise no_upload(sha256)
        if len(body) > max_bytes:
            raise upload_too_large(max_bytes)
        check_upload(sha256, hashlib.sha256(body).hexdigest())
        return len(body)

    def presign_artifact_upload(self, authority: str, size: int, sha256: str, expires_in: int) -> PresignedUpload:
        return PresignedUpload(f"memory://uploads/artifacts/{authority}/{sha256}", {"Content-Length": str(size)})

    def upload(self, authority: str, body: bytes) -> None:
        """Stands in for the client's PUT to the presigned URL."""
        self.uploads[(authority, hashlib.sha256(body).hexdigest())] = bytes(body)

    def artifact_content(self, authority: str, workspace: str, artifact: str) -> tuple[Artifact, bytes | None] | None:
        found = self.artifacts.get((authority, workspace, artifact))
        if found is None:
            return None
        data = self.payloads.get((authority, workspace, artifact))
        return found, (data if data is not None and len(data) <= ARTIFACT_INLINE_ANSWER else None)

    def artifact_url(self, artifact: Artifact, expires_in: int) -> str:
        return f"memory://artifacts/{artifact.authority}/{artifact.payload_digest.removeprefix('sha256:')}"

    def head(self, authority: str, workspace: str) -> WorkspaceHead | None:
        return self.heads.get((authority, workspace))

    def apply_receipt(self, authority: str, workspace: str, artifact: str) -> ApplyReceipt | None:
        return self.apply_receipts.get((authority, workspace, artifact))

    def read_apply(self, authority: str, command_id: str, workspace: str, artifact: str) -> ports.ApplySnapshot:
        with self._lock:
            return ports.ApplySnapshot(
                self.receipts.get((authority, command_id)),
                self.artifacts.get((authority, workspace, artifact)),
                self.apply_receipts.get((authority, workspace, artifact)),
                self.heads.get((authority, workspace)),
            )

    def commit_apply(self, commit: ports.ApplyCommit) -> None:
        authority = commit.receipt.authority
        ap = commit.apply_receipt
        with self._lock:
            head = self.heads.get((authority, ap.workspace))
            holds = {
                "receipt": (authority, commit.receipt.id) not in self.receipts,
                "apply_receipt": (authority, ap.workspace, ap.artifact) not in self.apply_receipts,
                "head": head is not None and head.confirmed_revision == commit.head_from,
            }
            for check in apply_checks(commit):
                if not holds[check]:
                    raise commit_failure(check, head=head)
            self.receipts[(authority, commit.receipt.id)] = commit.receipt
            self.apply_receipts[(authority, ap.workspace, ap.artifact)] = ap
            if commit.head_to is not None:
                self.heads[(authority, ap.workspace)] = commit.head_to

    def settle(self, delivery: ports.Delivery) -> None:
        with self._lock:
            key = (delivery.authority, delivery.worker, delivery.id)
            if key in self.deliveries:
                raise commit_failure("delivery")
            self.deliveries[key] = delivery

    def heartbeat(self, authority: str, task_id: str, worker: str, fence: int, at: str) -> Task:
        with self._lock:
            task = heartbeat(self.tasks.get((authority, task_id)), worker, fence, at)
            self.tasks[(authority, task_id)] = task
            return task

    # ---- reads ---------------------------------------------------------------------------------

    def expired(self, shard: int, now: str, limit: int) -> list[Task]:
        with self._lock:
            due = [
                (deadline, t)
                for t in self.tasks.values()
                if (deadline := lease_deadline(t)) is not None
                and deadline < now
                and expiry_shard(t.authority, t.id) == shard
            ]
        return [t for _, t in sorted(due, key=lambda pair: (pair[0], pair[1].authority, pair[1].id))][:limit]

    def claimable(self, authority: str, shard: int, limit: int) -> list[Task]:
        with self._lock:
            tasks = [t for (a, _), t in self.tasks.items() if a == authority and self._entry(t) == shard]
        return sorted(tasks, key=created_order)[:limit]

    def _entry(self, t: Task) -> int | None:
        """The claimable shard a task is indexed in, or None when it is not claimable."""
        if not is_claimable(t):
            return None
        return claim_shard(t.authority, t.id, self.indexed_under.get((t.authority, t.id), self.claim_shards))

    def reshard_claimable(self, resume: str | None, limit: int) -> tuple[int, str | None]:
        with self._lock:
            entries = sorted(key for key, t in self.tasks.items() if is_claimable(t))
            start = int(resume or 0)
            moved = 0
            for key in entries[start : start + limit]:
                t = self.tasks[key]
                if self._entry(t) != claim_shard(t.authority, t.id, self.claim_shards):
                    moved += 1
                self.indexed_under[key] = self.claim_shards
            return moved, str(start + limit) if start + limit < len(entries) else None

    def claimable_layout(self) -> ports.ClaimableLayout:
        return self.layout

    def record_claimable_layout(self, layout: ports.ClaimableLayout) -> None:
        self.layout = layout

    def messages(
        self, authority: str, task_id: str, after: int, limit: int, *, seen: Task | None = None
    ) -> list[Message]:
        with self._lock:
            found = [m for m in self.messages_by_task[(authority, task_id)] if m.sequence > after][:limit]
        return [stored_message(m) for m in found]

    def message(self, authority: str, task_id: str, message_id: str) -> Message | None:
        with self._lock:
            for m in self.messages_by_task[(authority, task_id)]:
                if m.id == message_id:
                    return stored_message(m)
        return None

    def grant(self, authority: str, task_id: str, fence: int) -> Grant | None:
        return self.grants.get((authority, task_id, fence))

    def grant_history(
        self, authority: str, task_id: str, after: int, limit: int, *, seen: Task | None = None
    ) -> list[Grant]:
        with self._lock:
            found = [g for (a, t, fence), g in self.grants.items() if a == authority and t == task_id and fence > after]
        return sorted(found, key=lambda g: g.fence)[:limit]

    def part_url(self, authority: str, sha256: str, expires_in: int) -> str:
        return f"memory://parts/{authority}/{sha256}"

    def events(self, authority: str, task_id: str, after: int, limit: int, *, seen: Task | None = None) -> list[Event]:
        with self._lock:
            return [e for e in self.events_by_task[(authority, task_id)] if e.sequence > after][:limit]

    def _page(
        self, tasks: list[Task], order: Callable[[Task], tuple[str, ...]], after: tuple[str, ...] | None, limit: int
    ) -> ports.TaskPage:
        ordered = sorted(tasks, key=order)
        if after is not None:
            ordered = [t for t in ordered if order(t) > after]
        page = ordered[:limit]
        more = len(ordered) > limit
        return ports.TaskPage(page, order(page[-1]) if more and page else None)

    def context_tasks(self, authority: str, context: str, after: tuple[str, ...] | None, limit: int) -> ports.TaskPage:
        with self._lock:
            tasks = [t for (a, _), t in self.tasks.items() if a == authority and t.context == context]
        return self._page(tasks, created_order, after, limit)

    def authority_tasks(
        self, authority: str, task_filter: ports.TaskFilter, after: tuple[str, ...] | None, limit: int
    ) -> ports.TaskPage:
        with self._lock:
            tasks = [
                t
                for (a, _), t in self.tasks.items()
                if a == authority
                and (not task_filter.context or t.context == task_filter.context)
                and (not task_filter.state or t.state == task_filter.state)
                and (not task_filter.updated_since or t.updated_at >= task_filter.updated_since)
            ]
        page = self._page(tasks, updated_order, after, limit)
        capped = min(len(tasks), TOTAL_SIZE_CAP)
        return ports.TaskPage(
            page.items, page.after, total_size=capped, total_is_lower_bound=len(tasks) > TOTAL_SIZE_CAP
        )

    def authority_position(self, updated_at: str, workspace: str, task_id: str) -> tuple[str, ...]:
        return (invert(updated_at), workspace, task_id)  # storage.updated_order of that task

    def leases(self, authority: str, worker: str, after: tuple[str, ...] | None, limit: int) -> ports.LeasePage:
        with self._lock:
            tasks = [t for (a, _), t in self.tasks.items() if a == authority and t.owner == worker]
        page = self._page(tasks, lease_order, after, limit)
        return ports.LeasePage(page.items, page.after)


def _expected(commit: ports.Commit, current: Task | None) -> bool:
    """The CAS precondition (ports.Expect) against the stored task."""
    e = commit.expect
    if current is None or e is None:
        return False
    if (current.revision, current.owner, current.fence) != (e.revision, e.owner, e.fence):
        return False
    if e.unaccepted and current.accepted_at:
        return False
    return e.heartbeat_at is None or current.heartbeat_at == e.heartbeat_at
