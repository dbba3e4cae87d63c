"""What every TaskStore decides the same way, whatever persists it: the DynamoDB adapter
(tasks/dynamo.py) and the in-memory fake (tasks/memory.py) both call these, and differ only in how
they keep the records.

- the orders the lists promise (docs/design/paging.md#orders) and which tasks each index holds, and in which
  claimable shard;
- which preconditions a commit carries, in which order, and the typed failure each one raises;
- what a heartbeat requires of the lease;
- what a part and an uploaded payload look like once stored.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from dovecote.platform.errors import InvalidArgument, NotFound, PayloadTooLarge
from dovecote.tasks import machine, ports
from dovecote.tasks.model import Message, Part, Task, WorkspaceHead
from dovecote.tasks.ports import ApplyCommit, Commit, HeadChanged, TaskChanged

# The claimable index's partitions per authority, unless the deployment says otherwise
# (settings.claim_shards). One shard is the reference rule and the default: a claim takes strictly the
# oldest claimable task (docs/design/leases.md#claims). A large fleet may spread its claims over more shards
# (bench/claims.py models the throughput it buys and the order it costs); FLEET_CLAIM_SHARDS is the
# count the model and the docs quote.
CLAIM_SHARDS = 1
FLEET_CLAIM_SHARDS = 16

# Parts up to this size live in the message item; larger ones in S3 by digest. Items are capped at
# 400 KB and a message may carry 2 MiB.
INLINE_PART_BYTES = 8 * 1024


# ---- orders and index membership ----------------------------------------------------------------------


def invert(timestamp: str) -> str:
    """Sorts newest first: each character's order is reversed (RFC 3339 UTC strings of one length
    sort like their instants). Every result character sorts above '#', the key separator."""
    return "".join(chr(0x7F - ord(c)) for c in timestamp)


def created_order(task: Task) -> tuple[str, ...]:
    """Oldest first: the claimable list and a context's tasks."""
    return (task.created_at, task.workspace, task.id)


def updated_order(task: Task) -> tuple[str, ...]:
    """Newest update first, then workspace and id: the authority's task list."""
    return (invert(task.updated_at), task.workspace, task.id)


def lease_order(task: Task) -> tuple[str, ...]:
    """A worker's leases, oldest grant first."""
    return (task.granted_at, task.workspace, task.id, f"{task.fence:020d}")


def is_claimable(task: Task) -> bool:
    """Non-terminal and unowned: what a claim may lease."""
    return not task.owner and not machine.is_terminal(task.state)


def claim_shard(authority: str, task_id: str, shards: int) -> int:
    """The claimable shard of a task: a hash of its id, so tasks spread evenly whatever their ids
    look like, and a task keeps its shard for as long as the shard count stays the same."""
    digest = hashlib.sha256(f"{authority}#{task_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % shards


def claim_key(authority: str, shard: int) -> str:
    """The claimable index's partition key: one partition per (authority, shard)."""
    return f"{authority}#{shard}"


# ---- commits -------------------------------------------------------------------------------------------


def commit_checks(commit: Commit) -> list[str]:
    """The preconditions of a commit, by name, in the order a failure is reported (the order of the
    DynamoDB transaction's items: the first failed condition names the cause)."""
    checks = ["receipt", "task_insert" if commit.expect is None else "task_cas"]
    checks += ["message_id"] * len(commit.messages)
    if commit.grant is not None:
        checks.append("record")  # the grant history is insert-only
    if commit.submission:
        checks.append("submission")
    if commit.artifact is not None:
        checks.append("artifact")
    if commit.head_claim is not None:
        checks.append("head")
    if commit.artifact_change is not None:
        checks.append("artifact_change")
    if commit.delivery is not None:
        checks.append("delivery")
    return checks


def apply_checks(commit: ApplyCommit) -> list[str]:
    return ["receipt", "apply_receipt"] + (["head"] if commit.head_to is not None else [])


def commit_failure(check: str, *, task: Task | None = None, head: WorkspaceHead | None = None) -> Exception:
    """The typed failure of a commit whose `check` did not hold; `task` and `head` are the stored
    ones when the store knows them."""
    simple: dict[str, type[Exception]] = {
        "receipt": ports.ReceiptTaken,
        "task_insert": ports.TaskExists,
        "message_id": ports.MessageIdTaken,
        "submission": ports.SubmissionIdTaken,
        "artifact": ports.ArtifactTaken,
        "apply_receipt": ports.ApplyReceiptTaken,
        "delivery": ports.DeliveryTaken,
    }
    if check in simple:
        return simple[check]()
    if check == "head":
        return HeadChanged(head)
    return TaskChanged(task)  # task_cas, an insert-only record, the artifact's state move


def heartbeat(task: Task | None, worker: str, fence: int, at: str) -> Task:
    """The task after a sign of life of the lease (worker, fence), which must be current. A grant of
    a task past `submitted` (a fenced worker's, taken over) has nothing to accept: its first sign of
    life accepts it. A submitted task's grant is accepted only by accept_task."""
    if task is None or task.owner != worker or task.fence != fence:
        raise TaskChanged(task)
    accepted = task.accepted_at or ("" if task.state == "submitted" else at)
    return task.evolve(heartbeat_at=at, accepted_at=accepted)


# ---- stored forms ------------------------------------------------------------------------------------


def stored_part(part: Part) -> Part:
    """A part as it is read back: inline up to INLINE_PART_BYTES, else remote (its digest and size,
    served as a download URL, never carried in a page)."""
    if len(part.data) <= INLINE_PART_BYTES:
        return part  # a URL part too: it has no bytes
    return replace(part, data=b"", sha256=hashlib.sha256(part.data).hexdigest(), size=len(part.data))


def stored_message(message: Message) -> Message:
    return replace(message, parts=tuple(stored_part(p) for p in message.parts))


def no_upload(sha256: str) -> NotFound:
    return NotFound("no upload found for this payload; PUT it to the upload URL first", sha256=sha256)


def upload_too_large(max_bytes: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"artifact payloads are limited to {max_bytes} bytes", limit=max_bytes)


def check_upload(sha256: str, found_sha256: str) -> None:
    """An upload is staged only if it is the payload that was declared."""
    if found_sha256 != sha256:
        raise InvalidArgument("the uploaded payload does not match its sha256", field="payload.upload_sha256")
