"""SDK methods for artifacts, workspace heads, apply receipts and worker events (docs/services/artifacts.md,
worker; § Workspaces and artifacts), as a mixin over the client's transport.

Freezing a payload: up to `ARTIFACT_INLINE_SEND` bytes travel inline in the freeze command (`text`
for a textual UTF-8 payload, else `data_b64`); a larger one (up to the 64 MiB hard maximum, or the
deployment's `artifact_max_bytes`, which the server enforces) is declared by size and SHA-256
(`POST /v1/tasks/{id}/artifacts/uploads`), streamed to the presigned URL in chunks and then frozen
with `payload.upload_sha256`. A file is read twice in chunks (for its size and SHA-256, then to send
it), never held whole in memory; a pipe is spooled to disk first.

Retries: the freeze, receipt and worker-event commands carry a command (event, delivery) id generated
once per call when none is given, so the transport's retries resend the same command and replay. A
receipt without a `receipt_id`, an event without an `event_id` or `delivery_id`, and an event's
message and submission without ids get ids derived from the command or event id, so a retried
call (same id) carries the same body.

Reading: `get_artifact` answers as the API does (metadata, and `text`, `data_b64` or `download_url`);
`download_artifact` writes the payload to a path or a stream, streaming a large one from its
download URL, and checks it against the artifact's `payload_digest` (`integrity` error otherwise;
a path is written through a temporary file, so a failed download leaves nothing).
"""

from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from dovecote.client.errors import DovecoteError
from dovecote.client.notes import TEXT_UTF8, Progress, guess_content_type, scan, seekable, write_atomically
from dovecote.client.paths import path
from dovecote.client.tasks import Message, new_id
from dovecote.platform.media import is_textual

if TYPE_CHECKING:
    import httpx

# A freeze sends its payload inline up to this many bytes: well under the 6 MiB request limit of
# Lambda even as base64 (4/3) inside JSON; above it the presigned upload avoids that limit.
ARTIFACT_INLINE_SEND = 1024 * 1024
PAYLOAD_TOO_LARGE = "payload_too_large"  # client-side (status 0): larger than the hard maximum
EVENT_STATES = {
    "accept_task": "working",
    "reject_task": "rejected",
    "request_input": "input_required",
    "fail_task": "failed",
    "complete_task": "completed",
}

ArtifactPayload = bytes | str | os.PathLike[str] | IO[bytes]


def _hex(digest: str) -> str:
    return digest.removeprefix("sha256:")


class ArtifactsMixin:
    if TYPE_CHECKING:  # provided by DovecoteClient and the other mixins
        max_attempts: int

        def request(self, method: str, path: str, **kwargs: Any) -> Any: ...
        def derived_id(self, prefix: str, *parts: object) -> str: ...
        def blob_client(self) -> httpx.Client: ...
        def submission_id_for(self, command_id: str) -> str: ...
        def _message(self, message: Message, command_id: str) -> dict[str, Any]: ...
        def _put_blob(
            self, url: str, headers: dict[str, str], stream: IO[bytes], size: int, progress: Progress | None
        ) -> None: ...
        def _receive(
            self,
            raw: dict[str, Any],
            out: IO[bytes],
            expected: str,
            what: str,
            size: int,
            progress: Progress | None,
        ) -> None: ...

    # ---- payloads -----------------------------------------------------------------------------

    def artifact_payload(
        self,
        task_id: str,
        payload: ArtifactPayload,
        *,
        fence: int,
        media_type: str | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """The `payload` object of a freeze (command or worker event): inline up to
        `ARTIFACT_INLINE_SEND` bytes, else uploaded now to a presigned URL of `task_id` and named by
        `upload_sha256` (the upload URL is given only to the holder of the task's current lease:
        `fence`). `payload` is bytes, a str (UTF-8 text), a path (streamed; its media type
        guessed from its name) or a binary file object (spooled first when not seekable). Without a
        media type, UTF-8 bytes are `text/plain; charset=utf-8`, others `application/octet-stream`."""
        if isinstance(payload, str):
            return self.artifact_payload(
                task_id, payload.encode("utf-8"), fence=fence, media_type=media_type or TEXT_UTF8, progress=progress
            )
        if isinstance(payload, bytes | bytearray | memoryview):
            return self._staged(task_id, fence, io.BytesIO(bytes(payload)), media_type, progress)
        if isinstance(payload, os.PathLike):
            path = Path(payload)
            with path.open("rb") as handle:
                return self._staged(task_id, fence, handle, media_type or guess_content_type(path), progress)
        return self._staged(task_id, fence, seekable(payload), media_type, progress)

    def _staged(
        self, task_id: str, fence: int, stream: IO[bytes], media_type: str | None, progress: Progress | None
    ) -> dict[str, Any]:
        from dovecote.tasks.limits import ARTIFACT_HARD_MAX

        size, digest, utf8 = scan(stream)
        if size > ARTIFACT_HARD_MAX:
            raise DovecoteError(
                0,
                PAYLOAD_TOO_LARGE,
                f"the payload is {size} bytes; an artifact holds at most {ARTIFACT_HARD_MAX}",
                {"size": size, "limit": ARTIFACT_HARD_MAX},
            )
        media = media_type or (TEXT_UTF8 if utf8 else "application/octet-stream")
        if size <= ARTIFACT_INLINE_SEND:
            data = stream.read()
            if utf8 and is_textual(media):
                text = data.decode("utf-8")
                # JSON escapes control characters up to 6x: such a text goes as base64 instead.
                if len(json.dumps(text)) <= 2 * size + 2:
                    return {"media_type": media, "text": text}
            return {"media_type": media, "data_b64": base64.b64encode(data).decode("ascii")}
        declared = {"size": size, "sha256": digest, "fence": fence}
        upload = self.request("POST", path("tasks", task_id, "artifacts", "uploads"), json=declared)
        self._put_blob(upload["upload_url"], upload.get("upload_headers") or {}, stream, size, progress)
        return {"media_type": media, "upload_sha256": digest}

    # ---- worker: freeze -----------------------------------------------------------------------

    def freeze_artifact(
        self,
        task_id: str,
        expected_revision: int,
        fence: int,
        artifact_id: str,
        expected_base_revision: str,
        payload: ArtifactPayload,
        *,
        media_type: str | None = None,
        command_id: str | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """`POST /v1/tasks/{id}/artifacts`: freeze the task's one artifact (working only) and return
        `{task, artifact}` (the task at revision + 1; the artifact with its `digest`, `base_revision`
        and `result_revision`). A large payload is uploaded first (see `artifact_payload`). The first
        freeze in a workspace sets its head to `expected_base_revision`; later ones must match it
        (409 `workspace_conflict`). A second freeze of the task is 409 `artifact_conflict`."""
        cid = command_id or new_id("c")
        body = {
            "command_id": cid,
            "expected_revision": expected_revision,
            "fence": fence,
            "artifact_id": artifact_id,
            "expected_base_revision": expected_base_revision,
            "payload": self.artifact_payload(task_id, payload, fence=fence, media_type=media_type, progress=progress),
        }
        return dict(self.request("POST", path("tasks", task_id, "artifacts"), json=body, command_id=cid))

    # ---- caller: artifacts, heads, receipts ---------------------------------------------------

    def get_artifact(self, workspace: str, artifact_id: str) -> dict[str, Any]:
        """`GET /v1/workspaces/{ws}/artifacts/{id}`: `{artifact, payload}`, the payload as `text` or
        `data_b64` up to 4 MiB, else a presigned `download_url` (use `download_artifact`)."""
        return dict(self.request("GET", path("workspaces", workspace, "artifacts", artifact_id)))

    def download_artifact(
        self,
        workspace: str,
        artifact_id: str,
        dest: str | os.PathLike[str] | IO[bytes],
        *,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Write the artifact's payload to a path or a binary stream (a large one streamed from its
        download URL), checked against its `payload_digest`: a mismatch raises `DovecoteError` code
        `integrity` and, for a path, leaves no file. Returns the artifact's metadata."""
        answer = self.get_artifact(workspace, artifact_id)
        artifact, payload = answer["artifact"], answer["payload"]
        what = f"artifact {artifact_id} of workspace {workspace}"
        size = int(artifact.get("payload_size") or 0)
        expected = _hex(str(artifact.get("payload_digest") or ""))
        if isinstance(dest, str | os.PathLike):
            write_atomically(Path(dest), lambda out: self._receive(payload, out, expected, what, size, progress))
        else:
            self._receive(payload, dest, expected, what, size, progress)
        return dict(artifact)

    def artifact_bytes(self, workspace: str, artifact_id: str) -> tuple[dict[str, Any], bytes]:
        """The artifact's metadata and its verified payload in memory (`download_artifact` for a
        large one)."""
        buffer = io.BytesIO()
        artifact = self.download_artifact(workspace, artifact_id, buffer)
        return artifact, buffer.getvalue()

    def workspace_head(self, workspace: str) -> dict[str, Any] | None:
        """`GET /v1/workspaces/{ws}/head`: `{workspace, confirmed_revision, updated_at}`, or None
        when the workspace has no head yet (no artifact was ever frozen in it)."""
        try:
            return dict(self.request("GET", path("workspaces", workspace, "head")))
        except DovecoteError as exc:
            if exc.status == 404 and exc.code == "not_found":
                return None
            raise

    def record_receipt(
        self,
        workspace: str,
        artifact_id: str,
        decision: str,
        *,
        artifact_digest: str,
        base_revision: str,
        result_revision: str,
        observed_revision: str | None = None,
        code: str | None = None,
        message: str | None = None,
        receipt_id: str | None = None,
        command_id: str | None = None,
    ) -> dict[str, Any]:
        """`POST /v1/workspaces/{ws}/artifacts/{id}/receipt`: the one apply receipt of a published
        artifact. `decision` is success (observed = result; moves the head from base to result),
        conflict (needs `observed_revision`), rejected or indeterminate. The digest, base and result
        must be the artifact's (`receipt_for` fills them from its metadata). Without a `receipt_id`
        one is derived from the command id, so a retry replays."""
        cid = command_id or new_id("c")
        body: dict[str, Any] = {
            "command_id": cid,
            "receipt_id": receipt_id or self.derived_id("r", "receipt", cid),
            "artifact_digest": artifact_digest,
            "base_revision": base_revision,
            "result_revision": result_revision,
            "decision": decision,
        }
        for name, value in (("observed_revision", observed_revision), ("code", code), ("message", message)):
            if value is not None:
                body[name] = value
        answer = self.request(
            "POST", path("workspaces", workspace, "artifacts", artifact_id, "receipt"), json=body, command_id=cid
        )
        return dict(answer["receipt"])

    def receipt_for(
        self, artifact: dict[str, Any], decision: str, *, observed_revision: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        """`record_receipt` for an artifact's metadata (from `get_artifact` or a freeze): its digest,
        base and result; a success observes the result unless told otherwise."""
        if decision == "success" and observed_revision is None:
            observed_revision = artifact["result_revision"]
        return self.record_receipt(
            artifact["workspace"],
            artifact["id"],
            decision,
            artifact_digest=artifact["digest"],
            base_revision=artifact["base_revision"],
            result_revision=artifact["result_revision"],
            observed_revision=observed_revision,
            **extra,
        )

    def get_receipt(self, workspace: str, artifact_id: str) -> dict[str, Any] | None:
        """`GET /v1/workspaces/{ws}/artifacts/{id}/receipt`: the receipt, or None when the artifact
        has none yet (an unknown artifact is still 404 `not_found`)."""
        try:
            answer = self.request("GET", path("workspaces", workspace, "artifacts", artifact_id, "receipt"))
        except DovecoteError as exc:
            if exc.status == 404 and exc.code == "not_found" and "receipt" in exc.message:
                return None
            raise
        return dict(answer["receipt"])

    # ---- worker events ------------------------------------------------------------------------

    def worker_event(self, event: dict[str, Any], delivery_id: str | None = None) -> dict[str, Any]:
        """`POST /v1/worker/events`: settle one worker event and return the settlement
        `{delivery_id, event_id, decision: "ack"|"nack", code?, message?}` as data (a NACK is not an
        exception: it is the answer; drop the event from your outbox either way). Only transport
        failures, 5xx and the request's own 4xx (a malformed body) raise.

        `event` is `{kind, task, fence, expected_revision, message?, submission?, artifact?, freeze?}`.
        Filled in when absent: `event_id` (generated), `delivery_id` (derived from the event id), the
        message id and, for complete_task, the submission (derived from the event id), so a retry of
        the same event is the same delivery and answers the same settlement. A message may be a str."""
        body = dict(event)
        event_id = str(body.get("event_id") or new_id("e"))
        body["event_id"] = event_id
        if body.get("message") is not None:
            body["message"] = self._message(body["message"], event_id)
        if body.get("kind") == "complete_task" and not body.get("submission"):
            body["submission"] = self.submission_id_for(event_id)
        delivery = delivery_id or self.derived_id("d", "delivery", event_id)
        answer = self.request(
            "POST", "/v1/worker/events", json={"delivery_id": delivery, "event": body}, command_id=event_id
        )
        return dict(answer)

    def freeze_event(
        self,
        task_id: str,
        expected_revision: int,
        fence: int,
        artifact_id: str,
        expected_base_revision: str,
        payload: ArtifactPayload,
        *,
        media_type: str | None = None,
        event_id: str | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """A freeze_artifact worker event (its payload staged like `freeze_artifact`'s), settled."""
        staged = self.artifact_payload(task_id, payload, fence=fence, media_type=media_type, progress=progress)
        event: dict[str, Any] = {
            "kind": "freeze_artifact",
            "task": task_id,
            "fence": fence,
            "expected_revision": expected_revision,
            "freeze": {"artifact": artifact_id, "expected_base_revision": expected_base_revision, "payload": staged},
        }
        if event_id:
            event["event_id"] = event_id
        return self.worker_event(event)


__all__ = ["ARTIFACT_INLINE_SEND", "EVENT_STATES", "ArtifactPayload", "ArtifactsMixin"]
