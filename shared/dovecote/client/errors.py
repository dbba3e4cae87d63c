"""The one exception the SDK raises, and the codes it adds to the API's own.

Every failure reaches the caller as a `DovecoteError` with a stable code: an error envelope from the
API (status and code as docs/clients/http.md#errors lists them), or one of the client-side codes below,
whose status is 0
because no HTTP answer was received (or none was needed)."""

from __future__ import annotations

from typing import Any

# Client-side codes (status 0).
UNAVAILABLE = "unavailable"  # no answer: connection refused, reset, cut, timed out
CONFIGURATION = "configuration"  # no endpoint or token found
WAIT_TIMEOUT = "wait_timeout"  # wait_for ran out of time before the task reached a wanted state
TASK_ENDED = "task_ended"  # wait_for: the task ended in a state not waited for, so it never will reach one
UPLOAD_FAILED = "upload_failed"  # the presigned S3 PUT was refused
INTEGRITY = "integrity"  # a downloaded body does not hash to the note's SHA-256
BAD_RESPONSE = "bad_response"  # a 2xx answer that is not the JSON the API promises
INVALID_ARGUMENT = "invalid_argument"  # an id no request path can carry (dovecote.client.paths); never sent


class DovecoteError(Exception):
    """A non-2xx answer, with the stable code and facts of the error envelope; or a client-side
    failure (status 0) with one of the codes above. `attempts` counts the HTTP attempts made;
    `command_id` names the command to retry by hand when the SDK's own retries ran out."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        attempts: int = 1,
        command_id: str | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}" if status else f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}
        self.attempts = attempts
        self.command_id = command_id

    @property
    def retryable(self) -> bool:
        """True when the exact same command may still succeed (and must be retried, not rebuilt)."""
        return (self.status == 0 and self.code == UNAVAILABLE) or self.status in (429, 502, 503, 504)


class _Waited(DovecoteError):
    """A wait that ended without a wanted state: its facts (the task, the states waited for, the state
    and revision it was seen at) and the task as last seen (`task`)."""

    def __init__(self, code: str, sentence: str, task_id: str, states: tuple[str, ...], task: dict[str, Any]) -> None:
        facts = {"task": task_id, "states": list(states), "state": task.get("state"), "revision": task.get("revision")}
        super().__init__(0, code, sentence, facts)
        self.task = task


class WaitTimeout(_Waited):
    """`wait_for` gave up: the task did not reach one of the wanted states in time."""

    def __init__(self, task_id: str, states: tuple[str, ...], timeout: float, last: dict[str, Any]) -> None:
        seen = f"task {task_id} is {last.get('state')} (revision {last.get('revision')})"
        super().__init__(
            WAIT_TIMEOUT, f"{seen} after {timeout:g} s; waited for {' or '.join(states)}", task_id, states, last
        )


class TaskEnded(_Waited):
    """`wait_for` gave up at once: the task ended in a terminal state not waited for, so it can no
    longer reach one (not a timeout: no time ran out)."""

    def __init__(self, task_id: str, states: tuple[str, ...], task: dict[str, Any]) -> None:
        seen = f"task {task_id} ended {task.get('state')} (revision {task.get('revision')})"
        super().__init__(TASK_ENDED, f"{seen}; it can no longer become {' or '.join(states)}", task_id, states, task)
