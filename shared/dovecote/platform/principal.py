"""The authenticated principal. Authority comes only from the token, through the authorizer
context that API Gateway attaches to the event; never from a path, query or body."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from dovecote.platform.errors import Forbidden, Unauthenticated

Role = Literal["caller", "worker", "admin"]
ROLES: tuple[Role, ...] = ("caller", "worker", "admin")


@dataclass(frozen=True, slots=True)
class Principal:
    authority: str
    role: Role
    worker: str = ""
    # The only note author this token may write or delete as; "" means any author.
    agent: str = ""
    # The id of the token that authenticated the request (minted_by, audit); "" when unknown.
    token_id: str = ""
    # When that token expires (RFC 3339 UTC, as stored); "" when unknown.
    expires_at: str = ""

    def __post_init__(self) -> None:
        # Every role check (`require`, and whatever lets every role through, as the reads do) can
        # rely on the role being one of ROLES: a principal with any other role does not exist.
        if self.role not in ROLES:
            raise Forbidden(f"{self.role!r} is not a role", role=str(self.role), allowed=list(ROLES))

    def require(self, *roles: Role) -> Principal:
        """Admin can do what callers and workers do; anyone else needs a listed role."""
        if self.role != "admin" and self.role not in roles:
            raise Forbidden(
                f"role {self.role!r} may not run this command",
                role=self.role,
                allowed=list(roles),
            )
        return self

    def require_author(self, author: str) -> Principal:
        """An agent-bound token writes and deletes only as its own agent."""
        if self.agent and author != self.agent:
            raise Forbidden(f"this token writes notes only as author {self.agent!r}", agent=self.agent, author=author)
        return self

    def as_context(self) -> dict[str, str]:
        return {
            "authority": self.authority,
            "role": self.role,
            "worker": self.worker,
            "agent": self.agent,
            "token_id": self.token_id,
            "expires_at": self.expires_at,
        }


def principal_from_event(event: dict[str, Any]) -> Principal:
    """Read the principal from `requestContext.authorizer.lambda` (HTTP API v2, simple
    responses). The authorizer denies invalid tokens itself; this refuses a missing context too
    (defence in depth, and the path for a route wired without the authorizer by mistake)."""
    context = ((event.get("requestContext") or {}).get("authorizer") or {}).get("lambda") or {}
    authority = context.get("authority") or ""
    role = context.get("role") or ""
    if not authority or role not in ROLES:
        raise Unauthenticated("a valid bearer token is required")
    return Principal(
        authority=authority,
        role=role,
        worker=context.get("worker") or "",
        agent=context.get("agent") or "",
        token_id=context.get("token_id") or "",
        expires_at=context.get("expires_at") or "",
    )
