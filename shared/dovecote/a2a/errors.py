"""A2A errors as data: one table from the spec's error type to its JSON-RPC code, HTTP status and
gRPC status name (A2A v1.0 §5.4, plus JSON-RPC's own codes), the mapping of Dovecote's domain errors
onto it, and the two wire forms: a JSON-RPC error object and an AIP-193 HTTP error body, each
carrying a `google.rpc.ErrorInfo` {reason, domain, metadata}.

A Dovecote error with no A2A equivalent (an idempotency conflict, a throttle, `commit_unknown`) keeps
its own status and code: its ErrorInfo names domain `dovecote` and the Dovecote code as the reason, so
a client can still branch on it, and a client error is never reported as an internal one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dovecote.platform.errors import DomainError

A2A_DOMAIN = "a2a-protocol.org"
DOVECOTE_DOMAIN = "dovecote"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


@dataclass(frozen=True, slots=True)
class Kind:
    jsonrpc: int
    http: int
    grpc: str  # the google.rpc.Code name AIP-193 puts in `status`


# reason (the error type in UPPER_SNAKE_CASE without "Error") → its codes.
KINDS: dict[str, Kind] = {
    "TASK_NOT_FOUND": Kind(-32001, 404, "NOT_FOUND"),
    "TASK_NOT_CANCELABLE": Kind(-32002, 409, "FAILED_PRECONDITION"),
    "PUSH_NOTIFICATION_NOT_SUPPORTED": Kind(-32003, 400, "UNIMPLEMENTED"),
    "UNSUPPORTED_OPERATION": Kind(-32004, 400, "UNIMPLEMENTED"),
    "CONTENT_TYPE_NOT_SUPPORTED": Kind(-32005, 415, "INVALID_ARGUMENT"),
    "INVALID_AGENT_RESPONSE": Kind(-32006, 502, "INTERNAL"),
    "EXTENDED_AGENT_CARD_NOT_CONFIGURED": Kind(-32007, 400, "FAILED_PRECONDITION"),
    "EXTENSION_SUPPORT_REQUIRED": Kind(-32008, 400, "FAILED_PRECONDITION"),
    "VERSION_NOT_SUPPORTED": Kind(-32009, 400, "UNIMPLEMENTED"),
    # JSON-RPC 2.0's own.
    "PARSE_ERROR": Kind(-32700, 400, "INVALID_ARGUMENT"),
    "INVALID_REQUEST": Kind(-32600, 400, "INVALID_ARGUMENT"),
    "METHOD_NOT_FOUND": Kind(-32601, 404, "NOT_FOUND"),
    "INVALID_PARAMS": Kind(-32602, 400, "INVALID_ARGUMENT"),
    "INTERNAL": Kind(-32603, 500, "INTERNAL"),
}
# Dovecote HTTP status → the google.rpc.Code name, for the Dovecote errors A2A has no type for.
_GRPC_BY_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    503: "UNAVAILABLE",
}
# Dovecote codes the A2A wire names by an A2A (or JSON-RPC) type.
_A2A_BY_CODE = {
    "not_found": "TASK_NOT_FOUND",
    "invalid_argument": "INVALID_PARAMS",
    "payload_too_large": "INVALID_PARAMS",
}


@dataclass
class A2AError(Exception):
    """An answer in the spec's terms: `reason` is a key of KINDS, or (domain `dovecote`) a Dovecote
    error code with that code's own HTTP status."""

    reason: str
    message: str
    metadata: dict[str, str] = field(default_factory=dict)
    domain: str = A2A_DOMAIN
    status: int = 0  # set for Dovecote-domain errors only

    def __post_init__(self) -> None:
        super().__init__(self.message)

    @property
    def kind(self) -> Kind:
        found = KINDS.get(self.reason)
        if found is not None:
            return found
        # A Dovecote error without an A2A type: JSON-RPC's invalid request for a client error (its
        # ErrorInfo says which), internal error otherwise; its own HTTP status either way.
        code = KINDS["INVALID_REQUEST"].jsonrpc if self.status < 500 else KINDS["INTERNAL"].jsonrpc
        return Kind(code, self.status, _GRPC_BY_STATUS.get(self.status, "INTERNAL"))

    def error_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"@type": ERROR_INFO, "reason": self.reason, "domain": self.domain}
        if self.metadata:
            info["metadata"] = dict(self.metadata)
        return info

    def jsonrpc(self) -> dict[str, Any]:
        """The JSON-RPC 2.0 error object (A2A v1.0 §9.5)."""
        return {"code": self.kind.jsonrpc, "message": self.message, "data": [self.error_info()]}

    def http(self) -> tuple[int, dict[str, Any]]:
        """The HTTP status and the AIP-193 body (A2A v1.0 §11.6)."""
        kind = self.kind
        body = {
            "error": {"code": kind.http, "status": kind.grpc, "message": self.message, "details": [self.error_info()]}
        }
        return kind.http, body


def error(reason: str, message: str, **metadata: Any) -> A2AError:
    """An A2A error; ErrorInfo metadata values are strings (google.rpc.ErrorInfo's map<string, string>)."""
    return A2AError(reason, message, {k: str(v) for k, v in metadata.items() if v is not None})


def from_domain(exc: DomainError, **metadata: Any) -> A2AError:
    """A Dovecote error on the A2A wire: not_found is TaskNotFound (another authority's task too: it
    does not exist for this caller), bad input is InvalidParams; any other keeps its Dovecote code."""
    facts = {k: v for k, v in exc.details.items() if isinstance(v, str | int | bool)}
    facts.update(metadata)
    reason = _A2A_BY_CODE.get(exc.code)
    if reason is not None:
        return error(reason, exc.message, **facts)
    status = exc.status
    out = A2AError(exc.code.upper(), exc.message, {k: str(v) for k, v in facts.items()}, DOVECOTE_DOMAIN, status)
    if status >= 500:
        out.message = "internal error" if exc.code in ("internal", "corrupt_store") else exc.message
        out.metadata = {}  # a server-side failure's facts stay in the log
    return out
