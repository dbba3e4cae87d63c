"""SDK methods for tasks (docs/services/tasks.md), caller and worker, as a mixin over the client's transport.

Every command takes a `command_id`: reuse it to retry safely. When none is given one is generated,
once per call, so the transport's own retries resend the same command. A message without an `id`
gets one derived from the command id, and a complete without a `submission_id` one derived the same
way, so a retried command carries the same message and submission and replays (an exact retry
returns the original answer) instead of answering `409 idempotency_conflict`.
"""

from __future__ import annotations

import base64
import mimetypes
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dovecote.client.errors import DovecoteError, TaskEnded, WaitTimeout
from dovecote.client.paging import keyset_items, query, stream_items
from dovecote.client.paths import path
from dovecote.platform.media import is_textual

TERMINAL_STATES = ("completed", "canceled", "rejected", "failed")
ALL_STATES = ("submitted", "working", "input_required", *TERMINAL_STATES)
MAX_CLAIM_WAIT = 20  # the API's bound on one long-poll

Message = dict[str, Any] | str


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def text_message(text: str, message_id: str | None = None) -> dict[str, Any]:
    """A one-part text/plain message; without an id the command that sends it derives one."""
    message: dict[str, Any] = {"parts": [{"media_type": "text/plain", "text": text}]}
    if message_id:
        message["id"] = message_id
    return message


def bytes_message(data: bytes, media_type: str | None = None, *, filename: str | None = None) -> dict[str, Any]:
    """A one-part message from bytes (a file's content): `text` when the media type is textual (or
    unknown and the bytes are UTF-8), `data_b64` otherwise. The media type is guessed from
    `filename` when not given."""
    if media_type is None and filename:
        media_type, _ = mimetypes.guess_type(filename)
    if media_type is None or is_textual(media_type):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            media_type = media_type or "application/octet-stream"
        else:
            return {"parts": [{"media_type": media_type or "text/plain", "text": text}]}
    return {"parts": [{"media_type": media_type, "data_b64": base64.b64encode(data).decode("ascii")}]}


class TasksMixin:
    if TYPE_CHECKING:  # provided by DovecoteClient

        def request(self, method: str, path: str, **kwargs: Any) -> Any: ...
        def watch_until(self, task_id: str, states: tuple[str, ...], *, timeout: float | None) -> dict[str, Any]: ...
        def derived_id(self, prefix: str, *parts: object) -> str: ...

    # ---- ids ----------------------------------------------------------------------------------

    def _message(self, message: Message, command_id: str) -> dict[str, Any]:
        built = text_message(message) if isinstance(message, str) else dict(message)
        if not built.get("id"):
            built["id"] = self.derived_id("m", "message", command_id)
        return built

    def submission_id_for(self, command_id: str) -> str:
        """The submission id a complete without one carries: derived from its command id."""
        return self.derived_id("s", "submission", command_id)

    def _command(self, path: str, command_id: str | None, body: dict[str, Any], **options: Any) -> Any:
        cid = command_id or new_id("c")
        if "message" in body:
            body["message"] = self._message(body["message"], cid)
        return self.request("POST", path, json={"command_id": cid, **body}, command_id=cid, **options)

    # ---- caller -------------------------------------------------------------------------------

    def create_task(
        self,
        task_id: str,
        message: Message,
        *,
        workspace: str = "default",
        context: str = "default",
        command_id: str | None = None,
        lease_timeout_seconds: int | None = None,
        accept_timeout_seconds: int | None = None,
    ) -> dict[str, Any]:
        """`POST /v1/tasks`: the task (201, or 200 with the same task on an exact retry).
        `lease_timeout_seconds` (0-86400, 0 = never) is how long a lease may stay silent;
        `accept_timeout_seconds` (0-3600, 0 = never) how long a grant may stay unaccepted. Each
        defaults to the deployment's setting (300 and 30)."""
        body: dict[str, Any] = {"workspace": workspace, "id": task_id, "context": context, "message": message}
        if lease_timeout_seconds is not None:
            body["lease_timeout_seconds"] = lease_timeout_seconds
        if accept_timeout_seconds is not None:
            body["accept_timeout_seconds"] = accept_timeout_seconds
        return dict(self._command("/v1/tasks", command_id, body)["task"])

    def get_task(self, task_id: str) -> dict[str, Any]:
        return dict(self.request("GET", path("tasks", task_id))["task"])

    def read_task(self, task_id: str) -> dict[str, Any]:
        """`{task, lease, last_lease}`: the task with its current lease (worker, fence, last sign of
        life, `fenced_after`: when the dispatcher fences it) and how the last lease that ended did
        end (each absent when there is none)."""
        return dict(self.request("GET", path("tasks", task_id)))

    def list_tasks(
        self,
        *,
        context: str = "",
        state: str = "",
        updated_since: str = "",
        limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """One page `{items, cursor, total_size, total_is_lower_bound}`, newest update first."""
        params = query(context=context, state=state, updated_since=updated_since, limit=limit, cursor=cursor)
        return dict(self.request("GET", "/v1/tasks", params=params))

    def iter_tasks(self, **filters: Any) -> Iterator[dict[str, Any]]:
        return keyset_items(lambda cursor: self.list_tasks(**filters, cursor=cursor))

    def context_tasks(self, context: str, *, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        """`GET /v1/contexts/{context}/tasks`: one page `{items, cursor}`, oldest first."""
        return dict(self.request("GET", path("contexts", context, "tasks"), params=query(limit=limit, cursor=cursor)))

    def reply(
        self, task_id: str, expected_revision: int, message: Message, command_id: str | None = None
    ) -> dict[str, Any]:
        """input_required → working, with the caller's message."""
        body = {"expected_revision": expected_revision, "message": message}
        return dict(self._command(path("tasks", task_id, "reply"), command_id, body)["task"])

    def cancel(self, task_id: str, expected_revision: int, command_id: str | None = None) -> dict[str, Any]:
        body = {"expected_revision": expected_revision}
        return dict(self._command(path("tasks", task_id, "cancel"), command_id, body)["task"])

    def messages(self, task_id: str, after: int = 0, limit: int | None = None) -> dict[str, Any]:
        """One page `{items, next, has_more}` of the task's messages after sequence `after`."""
        params = {"after": after, **({"limit": limit} if limit else {})}
        return dict(self.request("GET", path("tasks", task_id, "messages"), params=params))

    def message(self, task_id: str, message_id: str) -> dict[str, Any]:
        """`GET /v1/tasks/{id}/messages/{message_id}`: one message of the task by its id (the `id`
        a page or an event names), `{message}`; `not_found` when the task has no such message."""
        return dict(self.request("GET", path("tasks", task_id, "messages", message_id)))

    def iter_messages(self, task_id: str, after: int = 0) -> Iterator[dict[str, Any]]:
        return stream_items(lambda start: self.messages(task_id, start), after)

    def events(self, task_id: str, after: int = 0, limit: int | None = None) -> dict[str, Any]:
        """One page `{items, next, has_more}` of the task's events after sequence `after`."""
        params = {"after": after, **({"limit": limit} if limit else {})}
        return dict(self.request("GET", path("tasks", task_id, "events"), params=params))

    def iter_events(self, task_id: str, after: int = 0) -> Iterator[dict[str, Any]]:
        return stream_items(lambda start: self.events(task_id, start), after)

    def grants(self, task_id: str, after: int = 0, limit: int | None = None) -> dict[str, Any]:
        """One page `{items, next, has_more}` of the task's grant history after fence `after`: each
        lease generation, who held it, and when, why (`reason`) and by whom it ended."""
        params = {"after": after, **({"limit": limit} if limit else {})}
        return dict(self.request("GET", path("tasks", task_id, "grants"), params=params))

    def iter_grants(self, task_id: str, after: int = 0) -> Iterator[dict[str, Any]]:
        return stream_items(lambda start: self.grants(task_id, start), after)

    def snapshot(self, task_id: str) -> dict[str, Any]:
        """`{task, event_cursor}` from one read: events after `event_cursor` follow it without a gap."""
        return dict(self.request("GET", path("tasks", task_id, "snapshot")))

    def wait_for(
        self,
        task_id: str,
        states: tuple[str, ...] | list[str] | str = TERMINAL_STATES,
        *,
        timeout: float | None = 60.0,
        poll: float = 0.25,
        max_poll: float = 2.0,
    ) -> dict[str, Any]:
        """Wait until the task enters one of `states` (default: any terminal state) and return it.

        Built on the task's stream (`follow`): one snapshot, then every event after it as it
        commits, so a state the task passes through briefly still counts. The task returned is read
        after the event that matched (it may have moved on since). Raises `WaitTimeout` (code
        `wait_timeout`) when `timeout` seconds pass first (within about a second of it, keep-alives
        or not); `TaskEnded` (code `task_ended`) at once when the task is or becomes terminal in
        another state, which it can never leave; None waits forever. An endpoint without the stream
        route (the gateway's own 404) is polled instead: `GET /v1/tasks/{id}/events?after=N` with
        backoff from `poll` to `max_poll` seconds."""
        wanted = (states,) if isinstance(states, str) else tuple(states)
        from dovecote.client.streams import NoStreamRoute

        try:
            return self.watch_until(task_id, wanted, timeout=timeout)
        except NoStreamRoute:
            pass
        return self._poll_until(task_id, wanted, timeout=timeout, poll=poll, max_poll=max_poll)

    def _snapshot(self, task_id: str) -> dict[str, Any]:
        return self.snapshot(task_id)

    def _poll_until(
        self, task_id: str, wanted: tuple[str, ...], *, timeout: float | None, poll: float, max_poll: float
    ) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        snap = self.snapshot(task_id)
        task = snap["task"]
        if task["state"] in wanted:
            return dict(task)
        if task["state"] in TERMINAL_STATES:
            raise TaskEnded(task_id, wanted, dict(task))
        after = int(snap.get("event_cursor") or 0)
        pause = poll
        last = {"state": task["state"], "revision": task["revision"]}
        while True:
            page = self.events(task_id, after)
            for event in page["items"]:
                after = max(after, int(event["sequence"]))
                last = {"state": event["state"], "revision": event["revision"]}
                if event["state"] in wanted:
                    return self.get_task(task_id)
                if event["state"] in TERMINAL_STATES:
                    raise TaskEnded(task_id, wanted, self.get_task(task_id))
            if page.get("has_more"):
                continue
            pause = poll if page["items"] else min(max_poll, pause * 1.5)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WaitTimeout(task_id, wanted, float(timeout or 0), last)
                time.sleep(min(pause, left))
            else:
                time.sleep(pause)

    # ---- worker: leases -----------------------------------------------------------------------

    def claim(
        self, command_id: str | None = None, *, wait_seconds: int = 0, timeout: float | None = None
    ) -> dict[str, Any] | None:
        """`POST /v1/leases/claim`: a claimable task's assignment (close to the oldest) `{task, fence, worker,
        granted_at, heartbeat_at}`, or None when nothing is claimable (after long-polling up to
        `wait_seconds`, 0-20). A claim that found nothing reserves nothing, so its id may be reused."""
        cid = command_id or new_id("c")
        body: dict[str, Any] = {"command_id": cid}
        if wait_seconds:
            body["wait_seconds"] = wait_seconds
        try:
            answer = self.request(
                "POST", "/v1/leases/claim", json=body, command_id=cid, timeout=timeout or wait_seconds + 30.0
            )
        except DovecoteError as exc:
            if exc.status == 404:
                return None
            raise
        return dict(answer["assignment"])

    def acquire(self, task_id: str, command_id: str | None = None) -> dict[str, Any]:
        """`POST /v1/tasks/{id}/lease`: lease this task (fence + 1); 409 lease_unavailable if held."""
        return dict(self._command(path("tasks", task_id, "lease"), command_id, {})["assignment"])

    def lease(self, task_id: str) -> dict[str, Any] | None:
        """`GET /v1/tasks/{id}/lease`: the current assignment, or None when the task is unleased."""
        try:
            return dict(self.request("GET", path("tasks", task_id, "lease"))["assignment"])
        except DovecoteError as exc:
            if exc.status == 404 and exc.code == "not_found" and "lease" in exc.message:
                return None
            raise

    def list_leases(self, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        """One page `{items: [assignment], cursor}` of this worker's current leases."""
        return dict(self.request("GET", "/v1/leases", params=query(limit=limit, cursor=cursor)))

    def leases(self) -> list[dict[str, Any]]:
        """Every current lease of this worker (the restart-recovery scan), all pages."""
        return list(keyset_items(lambda cursor: self.list_leases(cursor=cursor)))

    def heartbeat(self, task_id: str, fence: int) -> dict[str, Any]:
        """`POST /v1/tasks/{id}/lease/heartbeat`: the assignment with a new `heartbeat_at`; a fence
        that is not current is 409 stale_lease. Never changes the revision."""
        answer = self.request("POST", path("tasks", task_id, "lease", "heartbeat"), json={"fence": fence})
        return dict(answer["assignment"])

    def fence(self, task_id: str, fence: int, command_id: str | None = None) -> None:
        """`POST /v1/tasks/{id}/lease/fence`: retire that lease generation (admin, or its owner)."""
        self._command(path("tasks", task_id, "lease", "fence"), command_id, {"fence": fence})

    def release(self, task_id: str, fence: int, command_id: str | None = None) -> None:
        """Give up this worker's own lease (a fence by its owner): the task becomes claimable."""
        self.fence(task_id, fence, command_id)

    # ---- worker: commands ---------------------------------------------------------------------

    def worker_command(
        self,
        kind: str,
        task_id: str,
        expected_revision: int,
        fence: int,
        command_id: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """accept, reject, fail (reason=…), request-input (message=…) or complete (message=…,
        submission_id=…)."""
        cid = command_id or new_id("c")
        body: dict[str, Any] = {"expected_revision": expected_revision, "fence": fence}
        body.update({name: value for name, value in extra.items() if value is not None})
        if kind == "complete" and "submission_id" not in body:
            body["submission_id"] = self.submission_id_for(cid)
        return dict(self._command(path("tasks", task_id, kind), cid, body)["task"])

    def accept(self, task_id: str, expected_revision: int, fence: int, command_id: str | None = None) -> dict[str, Any]:
        """submitted → working."""
        return self.worker_command("accept", task_id, expected_revision, fence, command_id)

    def reject(self, task_id: str, expected_revision: int, fence: int, command_id: str | None = None) -> dict[str, Any]:
        """submitted → rejected."""
        return self.worker_command("reject", task_id, expected_revision, fence, command_id)

    def fail(
        self,
        task_id: str,
        expected_revision: int,
        fence: int,
        command_id: str | None = None,
        *,
        reason: str | None = None,
    ) -> dict[str, Any]:
        """working or input_required → failed; `reason` (≤ 2 KiB) is kept on the task_failed event."""
        return self.worker_command("fail", task_id, expected_revision, fence, command_id, reason=reason)

    def request_input(
        self, task_id: str, expected_revision: int, fence: int, message: Message, command_id: str | None = None
    ) -> dict[str, Any]:
        """working → input_required, with the agent's question."""
        return self.worker_command("request-input", task_id, expected_revision, fence, command_id, message=message)

    def complete(
        self,
        task_id: str,
        expected_revision: int,
        fence: int,
        message: Message,
        command_id: str | None = None,
        *,
        submission_id: str | None = None,
        artifact_id: str | None = None,
    ) -> dict[str, Any]:
        """working → completed, with the agent's final message and a submission (its id derived
        from the command id when not given)."""
        return self.worker_command(
            "complete",
            task_id,
            expected_revision,
            fence,
            command_id,
            message=message,
            submission_id=submission_id,
            artifact_id=artifact_id,
        )
