"""Artifacts, workspace heads and apply receipts (docs/design/tasks.md#artifacts-and-apply-receipts):
what a freeze decides about its
artifact and the workspace head, what complete, cancel and fail do to a frozen artifact, the
presigned upload of a large payload, the apply receipt command, and the artifact reads."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any, NamedTuple

from dovecote.platform.clock import rfc3339
from dovecote.platform.errors import (
    ArtifactConflict,
    ArtifactState,
    NotFound,
    ReceiptConflict,
    WorkspaceConflict,
)
from dovecote.platform.ids import check_id
from dovecote.platform.principal import Principal
from dovecote.tasks.command_loop import CommandLoop, Outcome, Recorded, answered
from dovecote.tasks.commands import CreateArtifactUpload, Freeze, RecordReceipt
from dovecote.tasks.model import (
    ApplyReceipt,
    Artifact,
    Receipt,
    Task,
    TaskView,
    WorkspaceHead,
    intent_digest,
    result_revision,
    stale_lease,
)
from dovecote.tasks.ports import ApplyCommit, ApplySnapshot, ArtifactChange

# The commands that end a task's frozen artifact: complete publishes it, cancel and fail discard it.
ENDS_ARTIFACT = {"complete_task": "published", "cancel_task": "discarded", "fail_task": "discarded"}


def check_named(kind: str, task: Task, named: str | None) -> None:
    """complete names exactly the frozen artifact, or none when none was frozen."""
    if kind == "complete_task" and (named or "") != task.artifact:
        raise ArtifactState(
            "complete must name exactly the task's frozen artifact, or none when none was frozen",
            artifact=named,
            frozen=task.artifact or None,
        )


def ended(kind: str, task: Task, now: str) -> ArtifactChange | None:
    """The frozen artifact's state move in the same commit as `kind`, if any."""
    if not task.artifact or kind not in ENDS_ARTIFACT:
        return None
    return ArtifactChange(task.workspace, task.artifact, "frozen", ENDS_ARTIFACT[kind], now)


def frozen(task: Task, freeze: Freeze, now: str) -> tuple[Artifact, WorkspaceHead]:
    """The artifact a freeze commits, and its claim on the workspace head: the first freeze in a
    workspace creates the head (first writer wins); later ones must find it at their base (one
    conditional write in the commit, no read)."""
    if task.artifact:
        raise ArtifactConflict("the task has already frozen an artifact", artifact=task.artifact)
    artifact = Artifact(
        authority=task.authority,
        workspace=task.workspace,
        id=freeze.artifact_id,
        task=task.id,
        state="frozen",
        base_revision=freeze.base_revision,
        result_revision=result_revision(freeze.base_revision, freeze.artifact_id, freeze.payload.digest),
        payload_digest=freeze.payload.digest,
        payload_size=freeze.size,
        media_type=freeze.payload.media_type,
        frozen_at=now,
    )
    return artifact, WorkspaceHead(task.authority, task.workspace, freeze.base_revision, now)


class Frozen(NamedTuple):
    """A freeze's answer: the task, one revision on, and the artifact it froze."""

    task: TaskView
    artifact: Artifact

    @classmethod
    def from_json(cls, data: dict[str, Any], authority: str) -> Frozen:
        return cls(TaskView.from_json(data["task"]), Artifact.from_json(data["artifact"], authority))


class ArtifactRead(NamedTuple):
    """An artifact and its payload: the bytes when they are answered inline (up to
    ARTIFACT_INLINE_ANSWER), else a presigned download URL."""

    artifact: Artifact
    data: bytes | None
    download_url: str | None


class UploadGrant(NamedTuple):
    """A presigned PUT for a large artifact payload: send every one of its headers with it."""

    upload_url: str
    upload_headers: dict[str, str]
    expires_at: str


class Artifacts:
    def __init__(self, work: CommandLoop, *, presign_seconds: int) -> None:
        self.work = work
        self.presign_seconds = presign_seconds

    def create_artifact_upload(self, principal: Principal, command: CreateArtifactUpload) -> UploadGrant:
        """A presigned PUT for a large artifact payload, bound to its size and SHA-256; freeze it
        then with `payload.upload_sha256`. Only for the holder of the task's current lease: one
        GetItem, so a URL is never handed out for a task that does not exist in the authority, or
        that the worker does not hold."""
        task = self.work.load(principal, command.task)
        if task.owner != principal.worker or task.fence != command.fence:
            raise stale_lease(task, command.fence)
        presigned = self.work.store.presign_artifact_upload(
            principal.authority, command.size, command.sha256, self.presign_seconds
        )
        expires = rfc3339(self.work.clock() + timedelta(seconds=self.presign_seconds))
        return UploadGrant(presigned.url, presigned.headers, expires)

    def record_apply_receipt(self, principal: Principal, command: RecordReceipt) -> Outcome[ApplyReceipt]:
        """The caller's durable decision about a published artifact
        (docs/design/tasks.md#artifacts-and-apply-receipts). One read of the
        command receipt, the artifact, its apply receipt and the head; one commit. `success` moves
        the head from the artifact's base to its result by compare-and-swap in the same commit."""
        proposed = replace(command.receipt, authority=principal.authority)
        workspace, artifact, base = proposed.workspace, proposed.artifact, proposed.base_revision
        intent = {"workspace": workspace, "artifact": artifact, **proposed.to_json()}
        intent.pop("recorded_at", None)
        digest = intent_digest("record_apply_receipt", intent)

        def decide(snapshot: ApplySnapshot) -> ApplyCommit | Recorded:
            art = snapshot.artifact
            if art is None:
                raise NotFound("artifact not found", workspace=workspace, artifact=artifact)
            if art.state != "published":
                raise ArtifactState("only a published artifact takes an apply receipt", state=art.state)
            existing = snapshot.apply_receipt
            if existing is not None:
                if existing.same_decision(proposed):
                    return Recorded(200, {"receipt": existing.to_json()}, replayed=True)
                raise ReceiptConflict("the artifact already has a different apply receipt", receipt=existing.to_json())
            if (proposed.artifact_digest, base, proposed.result_revision) != (
                art.digest,
                art.base_revision,
                art.result_revision,
            ):
                raise ReceiptConflict(
                    "the receipt does not name this artifact's digest, base and result",
                    expected={
                        "artifact_digest": art.digest,
                        "base_revision": art.base_revision,
                        "result_revision": art.result_revision,
                    },
                )
            now = self.work.now()
            recorded = replace(proposed, recorded_at=now)
            head_to = None
            if proposed.decision == "success":
                head = snapshot.head
                if head is None or head.confirmed_revision != base:
                    raise WorkspaceConflict(
                        "the workspace head is not at the artifact's base revision",
                        expected=base,
                        actual=head.confirmed_revision if head else None,
                    )
                head_to = WorkspaceHead(principal.authority, workspace, proposed.result_revision, now)
            answer = {"receipt": recorded.to_json()}
            receipt = Receipt(principal.authority, command.command_id, "record_apply_receipt", digest, 200, answer)
            return ApplyCommit(receipt, recorded, head_from=base if head_to else None, head_to=head_to)

        recorded = self.work.run_apply(principal, command.command_id, workspace, artifact, digest, decide)
        return answered(recorded, lambda body: ApplyReceipt.from_json(body["receipt"], principal.authority, workspace))

    # ---- reads ----------------------------------------------------------------------------------

    def get_apply_receipt(self, principal: Principal, workspace: str, artifact_id: str) -> ApplyReceipt:
        check_id(workspace, "workspace")
        check_id(artifact_id, "artifact")
        found = self.work.store.apply_receipt(principal.authority, workspace, artifact_id)
        if found is None:
            raise NotFound("the artifact has no apply receipt", workspace=workspace, artifact=artifact_id)
        return found

    def get_artifact(
        self, principal: Principal, workspace: str, artifact_id: str, *, inline: bool = True
    ) -> ArtifactRead:
        """The artifact and its payload: its bytes up to 4 MiB, else a `download_url`; always the
        `download_url` when not `inline` (an answer with no room for the payload)."""
        check_id(workspace, "workspace")
        check_id(artifact_id, "artifact")
        facts = {"authority": principal.authority, "workspace": workspace, "artifact": artifact_id}
        with self.work.reporting("artifact", **facts):
            content = self.work.store.artifact_content(principal.authority, workspace, artifact_id)
        if content is None:
            raise NotFound("artifact not found", workspace=workspace, artifact=artifact_id)
        art, data = content
        if data is None or not inline:
            return ArtifactRead(art, None, self.work.store.artifact_url(art, self.presign_seconds))
        return ArtifactRead(art, data, None)

    def get_head(self, principal: Principal, workspace: str) -> WorkspaceHead:
        check_id(workspace, "workspace")
        head = self.work.store.head(principal.authority, workspace)
        if head is None:
            raise NotFound("the workspace has no head yet", workspace=workspace)
        return head
