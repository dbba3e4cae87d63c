"""Errors as data: a stable code, a human message, and the facts in `details`.

`STATUS_BY_CODE` is the one table that maps an error code to its HTTP status (API.md). Handlers never
pick a status themselves; they raise a `DomainError` and the shared exception handler renders it.
"""

from __future__ import annotations

from typing import Any

STATUS_BY_CODE: dict[str, int] = {
    "invalid_argument": 400,
    "ambiguous_ref": 400,
    "unauthenticated": 401,
    "forbidden": 403,
    "not_found": 404,
    "revision_conflict": 409,
    "idempotency_conflict": 409,
    "invalid_transition": 409,
    "terminal_task": 409,
    "task_conflict": 409,
    "message_conflict": 409,
    "submission_conflict": 409,
    "lease_unavailable": 409,
    "stale_lease": 409,
    "lease_fence_exhausted": 409,
    "artifact_conflict": 409,
    "artifact_state": 409,
    "workspace_conflict": 409,
    "receipt_conflict": 409,
    "payload_too_large": 413,
    "throttled": 429,
    # An AWS dependency failed before anything could have been written; retrying is safe.
    "unavailable": 503,
    "commit_unknown": 503,
}


class DomainError(Exception):
    code = "internal"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    @property
    def status(self) -> int:
        return STATUS_BY_CODE.get(self.code, 500)

    def envelope(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


def _error(code: str) -> type[DomainError]:
    return type(
        "".join(part.capitalize() for part in code.split("_")),
        (DomainError,),
        {"code": code, "__doc__": f"`{code}` → HTTP {STATUS_BY_CODE[code]}"},
    )


InvalidArgument = _error("invalid_argument")
Unauthenticated = _error("unauthenticated")
Forbidden = _error("forbidden")
NotFound = _error("not_found")
PayloadTooLarge = _error("payload_too_large")
Throttled = _error("throttled")
Unavailable = _error("unavailable")
CommitUnknown = _error("commit_unknown")
RevisionConflict = _error("revision_conflict")
IdempotencyConflict = _error("idempotency_conflict")
InvalidTransition = _error("invalid_transition")
TerminalTask = _error("terminal_task")
TaskConflict = _error("task_conflict")
MessageConflict = _error("message_conflict")
SubmissionConflict = _error("submission_conflict")
LeaseUnavailable = _error("lease_unavailable")
StaleLease = _error("stale_lease")
LeaseFenceExhausted = _error("lease_fence_exhausted")


def error_for(code: str, message: str, **details: Any) -> DomainError:
    """Rebuild a typed error from its code, e.g. when replaying a stored outcome."""
    for cls in DomainError.__subclasses__():
        if cls.code == code:
            return cls(message, **details)
    err = DomainError(message, **details)
    err.code = code
    return err
