"""In-memory TaskStore: the fake held to the same conformance suite as the DynamoDB adapter.
A commit checks every precondition first, then applies everything, under one lock: atomic."""

from __future__ import annotations

import hashlib
import threading
from collections import defaultdict
from dataclasses import replace
from typing import Any

from dovecote.platform.errors import InvalidArgument, NotFound, PayloadTooLarge
from dovecote.tasks import machine
from dovecote.tasks.model import (
    ARTIFACT_INLINE_ANSWER,
    TOTAL_SIZE_CAP,
    ApplyReceipt,
    Artifact,
    Event,
    Grant,
    Message,
    Part,
    Receipt,
    Task,
    WorkspaceHead,
    expiry_shard,
    lease_deadline,
)
from dovecote.tasks.ports import (
    ApplyCommit,
    ApplyReceiptTaken,
    ApplySnapshot,
    ArtifactTaken,
    Commit,
    Delivery,
    DeliveryTaken,
    HeadChanged,
    LeasePage,
    MessageIdTaken,
    ReceiptTaken,
    Snapshot,
    SubmissionIdTaken,
    TaskChanged,
    TaskExists,
    TaskFilter,
    TaskPage,
)


def context_key(task: Task) -> tuple[str, ...]:
    return (task.created_at, task.workspace, task.id)


def authority_key(task: Task) -> tuple[str, ...]:
    # updated_at descending, then workspace and id ascending: invert the timestamp's order by
    # sorting on its negated digits (RFC 3339 UTC strings sort like the instants they name).
    return ("".join(chr(0x7F - ord(c)) for c in task.updated_at), task.workspace, task.id)


def lease_key(task: Task) -> tuple[str, ...]:
    return (task.granted_at, task.workspace, task.id, f"{task.fence:020d}")


class InMemoryTaskStore:
    def __init__(self) -> None:
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
        self.deliveries: dict[tuple[str, str, str], Delivery] = {}
        self.uploads: dict[tuple[str, str], bytes] = {}  # (authority, sha256) → an uploaded payload

    def read(
        self,
        authority: str,
        command_id: str | None,
        task_id: str | None,
        *,
        delivery: tuple[str, str] | None = None,
    ) -> Snapshot:
        with self._lock:
            receipt = self.receipts.get((authority, command_id)) if command_id else None
            task = self.tasks.get((authority, task_id)) if task_id else None
            settled = self.deliveries.get((authority, *delivery)) if delivery else None
            return Snapshot(receipt, task, settled)

    def commit(self, commit: Commit) -> None:
        authority = commit.receipt.authority
        key = (authority, commit.task.id)
        with self._lock:
            if (authority, commit.receipt.id) in self.receipts:
                raise ReceiptTaken()
            current = self.tasks.get(key)
            if commit.expect is None:
                if current is not None:
                    raise TaskExists()
            else:
                e = commit.expect
                if current is None or (current.revision, current.owner, current.fence) != (
                    e.revision,
                    e.owner,
                    e.fence,
                ):
                    raise TaskChanged(current)
                if e.heartbeat_at is not None and current.heartbeat_at != e.heartbeat_at:
                    raise TaskChanged(current)
            if any((authority, m.id) in self.message_ids for m in commit.messages):
                raise MessageIdTaken()
            if commit.submission and (authority, commit.submission) in self.submissions:
                raise SubmissionIdTaken()
            if commit.grant and (authority, commit.task.id, commit.grant.fence) in self.grants:
                raise TaskChanged(current)
            if commit.artifact and (authority, commit.artifact.workspace, commit.artifact.id) in self.artifacts:
                raise ArtifactTaken()
            claim = commit.head_claim
            if claim is not None:
                head = self.heads.get((authority, claim.workspace))
                if head is not None and head.confirmed_revision != claim.confirmed_revision:
                    raise HeadChanged(head)
            change = commit.artifact_change
            if change is not None:
                found = self.artifacts.get((authority, change.workspace, change.artifact))
                if found is None or found.state != change.from_state:
                    raise TaskChanged(current)
            if commit.delivery and (authority, commit.delivery.worker, commit.delivery.id) in self.deliveries:
                raise DeliveryTaken()
            # every precondition holds: apply all of it
            self.receipts[(authority, commit.receipt.id)] = commit.receipt
            self.tasks[key] = commit.task
            for message in commit.messages:
                self.message_ids.add((authority, message.id))
                self.messages_by_task[key].append(message)
            self.events_by_task[key].extend(commit.events)
            if commit.grant:
                self.grants[(authority, commit.task.id, commit.grant.fence)] = commit.grant
            if commit.submission:
                self.submissions.add((authority, commit.submission))
            if commit.artifact:
                art = commit.artifact
                self.artifacts[(authority, art.workspace, art.id)] = art
                payload = commit.payload
                if payload is not None and payload.data is not None:
                    self.payloads[(authority, art.workspace, art.id)] = payload.data
                elif payload is not None:
                    self.payloads[(authority, art.workspace, art.id)] = self.uploads[(authority, payload.upload_sha256)]
            if claim is not None and (authority, claim.workspace) not in self.heads:
                self.heads[(authority, claim.workspace)] = claim
            if change is not None:
                art_key = (authority, change.workspace, change.artifact)
                moved = replace(self.artifacts[art_key], state=change.to_state)
                if change.to_state == "published":
                    moved = replace(moved, published_at=change.at)
                else:
                    moved = replace(moved, discarded_at=change.at)
                self.artifacts[art_key] = moved
            if commit.delivery:
                d = commit.delivery
                self.deliveries[(authority, d.worker, d.id)] = d

    # ---- artifacts, heads, apply receipts, deliveries ----------------------------------------

    def stage_artifact_upload(self, authority: str, sha256: str, max_bytes: int) -> int:
        body = self.uploads.get((authority, sha256))
        if body is None:
            raise NotFound("no upload found for this payload; PUT it to the upload URL first", sha256=sha256)
        if len(body) > max_bytes:
            raise PayloadTooLarge(f"artifact payloads are limited to {max_bytes} bytes", limit=max_bytes)
        if hashlib.sha256(body).hexdigest() != sha256:
            raise InvalidArgument("the uploaded payload does not match its sha256", field="payload.upload_sha256")
        return len(body)

    def presign_artifact_upload(self, authority: str, size: int, sha256: str, expires_in: int) -> Any:
        from dovecote.notes.model import PresignedUpload

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

    def read_apply(self, authority: str, command_id: str, workspace: str, artifact: str) -> ApplySnapshot:
        with self._lock:
            return ApplySnapshot(
                self.receipts.get((authority, command_id)),
                self.artifacts.get((authority, workspace, artifact)),
                self.apply_receipts.get((authority, workspace, artifact)),
                self.heads.get((authority, workspace)),
            )

    def commit_apply(self, commit: ApplyCommit) -> None:
        authority = commit.receipt.authority
        ap = commit.apply_receipt
        with self._lock:
            if (authority, commit.receipt.id) in self.receipts:
                raise ReceiptTaken()
            if (authority, ap.workspace, ap.artifact) in self.apply_receipts:
                raise ApplyReceiptTaken()
            if commit.head_to is not None:
                head = self.heads.get((authority, ap.workspace))
                if head is None or head.confirmed_revision != commit.head_from:
                    raise HeadChanged(head)
            self.receipts[(authority, commit.receipt.id)] = commit.receipt
            self.apply_receipts[(authority, ap.workspace, ap.artifact)] = ap
            if commit.head_to is not None:
                self.heads[(authority, ap.workspace)] = commit.head_to

    def settle(self, delivery: Delivery) -> None:
        with self._lock:
            key = (delivery.authority, delivery.worker, delivery.id)
            if key in self.deliveries:
                raise DeliveryTaken()
            self.deliveries[key] = delivery

    def heartbeat(self, authority: str, task_id: str, worker: str, fence: int, at: str) -> Task:
        with self._lock:
            task = self.tasks.get((authority, task_id))
            if task is None or task.owner != worker or task.fence != fence:
                raise TaskChanged(task)
            task = task.evolve(heartbeat_at=at)
            self.tasks[(authority, task_id)] = task
            return task

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

    def claimable(self, authority: str, limit: int) -> list[Task]:
        with self._lock:
            tasks = [
                t
                for (a, _), t in self.tasks.items()
                if a == authority and not t.owner and not machine.is_terminal(t.state)
            ]
        return sorted(tasks, key=context_key)[:limit]

    def messages(self, authority: str, task_id: str, after: int, limit: int) -> list[Message]:
        with self._lock:
            found = [m for m in self.messages_by_task[(authority, task_id)] if m.sequence > after][:limit]
        return [_as_stored(m) for m in found]

    def message(self, authority: str, task_id: str, message_id: str) -> Message | None:
        with self._lock:
            for m in self.messages_by_task[(authority, task_id)]:
                if m.id == message_id:
                    return _as_stored(m)
        return None

    def grant(self, authority: str, task_id: str, fence: int) -> Grant | None:
        return self.grants.get((authority, task_id, fence))

    def part_url(self, authority: str, sha256: str, expires_in: int) -> str:
        return f"memory://parts/{authority}/{sha256}"

    def events(self, authority: str, task_id: str, after: int, limit: int) -> list[Event]:
        with self._lock:
            return [e for e in self.events_by_task[(authority, task_id)] if e.sequence > after][:limit]

    def _page(self, tasks: list[Task], order: object, after: tuple[str, ...] | None, limit: int) -> TaskPage:
        ordered = sorted(tasks, key=order)  # type: ignore[call-overload]
        if after is not None:
            ordered = [t for t in ordered if order(t) > after]  # type: ignore[operator]
        page = ordered[:limit]
        more = len(ordered) > limit
        return TaskPage(page, order(page[-1]) if more and page else None)  # type: ignore[operator]

    def context_tasks(self, authority: str, context: str, after: tuple[str, ...] | None, limit: int) -> TaskPage:
        with self._lock:
            tasks = [t for (a, _), t in self.tasks.items() if a == authority and t.context == context]
        return self._page(tasks, context_key, after, limit)

    def authority_tasks(
        self, authority: str, task_filter: TaskFilter, after: tuple[str, ...] | None, limit: int
    ) -> TaskPage:
        with self._lock:
            tasks = [
                t
                for (a, _), t in self.tasks.items()
                if a == authority
                and (not task_filter.context or t.context == task_filter.context)
                and (not task_filter.state or t.state == task_filter.state)
                and (not task_filter.updated_since or t.updated_at >= task_filter.updated_since)
            ]
        page = self._page(tasks, authority_key, after, limit)
        capped = min(len(tasks), TOTAL_SIZE_CAP)
        return TaskPage(page.items, page.after, total_size=capped, total_is_lower_bound=len(tasks) > TOTAL_SIZE_CAP)

    def leases(self, authority: str, worker: str, after: tuple[str, ...] | None, limit: int) -> LeasePage:
        with self._lock:
            tasks = [t for (a, _), t in self.tasks.items() if a == authority and t.owner == worker]
        page = self._page(tasks, lease_key, after, limit)
        return LeasePage(page.items, page.after)


def _as_stored(message: Message) -> Message:
    """As the DynamoDB store reads it back: parts over the inline size are remote (digest, size)."""
    import hashlib
    from dataclasses import replace

    from dovecote.tasks.dynamo import INLINE_PART_BYTES

    parts = tuple(
        p
        if len(p.data) <= INLINE_PART_BYTES
        else Part(p.media_type, b"", hashlib.sha256(p.data).hexdigest(), len(p.data))
        for p in message.parts
    )
    return replace(message, parts=parts)
