"""Errors as data: a stable code, a human message, and the facts in `details`.

`STATUS_BY_CODE` is the one table that maps an error code to its HTTP status
(docs/clients/http.md#errors). Handlers never
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
    "judgment_conflict": 409,
    "payload_too_large": 413,
    # A stored aggregate broke an invariant: it is never served (facts in the log, an alarm).
    "corrupt_store": 500,
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


class InvalidArgument(DomainError):
    code = "invalid_argument"


class AmbiguousRef(DomainError):
    """A ref or session prefix that names more than one item; details carry the candidates."""

    code = "ambiguous_ref"


class Unauthenticated(DomainError):
    code = "unauthenticated"


class Forbidden(DomainError):
    code = "forbidden"


class NotFound(DomainError):
    code = "not_found"


class PayloadTooLarge(DomainError):
    code = "payload_too_large"


class CorruptStore(DomainError):
    code = "corrupt_store"


class Throttled(DomainError):
    code = "throttled"


class Unavailable(DomainError):
    code = "unavailable"


class CommitUnknown(DomainError):
    code = "commit_unknown"


class RevisionConflict(DomainError):
    code = "revision_conflict"


class IdempotencyConflict(DomainError):
    code = "idempotency_conflict"


class InvalidTransition(DomainError):
    code = "invalid_transition"


class TerminalTask(DomainError):
    code = "terminal_task"


class TaskConflict(DomainError):
    code = "task_conflict"


class MessageConflict(DomainError):
    code = "message_conflict"


class SubmissionConflict(DomainError):
    code = "submission_conflict"


class LeaseUnavailable(DomainError):
    code = "lease_unavailable"


class StaleLease(DomainError):
    code = "stale_lease"


class LeaseFenceExhausted(DomainError):
    code = "lease_fence_exhausted"


class ArtifactState(DomainError):
    code = "artifact_state"


class ArtifactConflict(DomainError):
    code = "artifact_conflict"


class WorkspaceConflict(DomainError):
    code = "workspace_conflict"


class ReceiptConflict(DomainError):
    code = "receipt_conflict"


class JudgmentConflict(DomainError):
    code = "judgment_conflict"


def error_for(code: str, message: str, **details: Any) -> DomainError:
    """Rebuild a typed error from its code, e.g. when replaying a stored outcome."""
    for cls in DomainError.__subclasses__():  # one level: every code is a direct subclass
        if cls.code == code:
            return cls(message, **details)
    err = DomainError(message, **details)
    err.code = code
    return err
