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

    def require(self, *roles: Role) -> Principal:
        """Admin can do what callers and workers do; anyone else needs a listed role."""
        if self.role != "admin" and self.role not in roles:
            raise Forbidden(
                f"role {self.role!r} may not run this command",
                role=self.role,
                allowed=list(roles),
            )
        return self

    def as_context(self) -> dict[str, str]:
        return {"authority": self.authority, "role": self.role, "worker": self.worker}


def principal_from_event(event: dict[str, Any]) -> Principal:
    """Read {authority, role, worker} from `requestContext.authorizer.lambda` (HTTP API v2,
    simple responses). An authorizer that could not resolve the token says so in the context."""
    context = ((event.get("requestContext") or {}).get("authorizer") or {}).get("lambda") or {}
    authority = context.get("authority") or ""
    role = context.get("role") or ""
    if not authority or role not in ROLES:
        raise Unauthenticated(
            context.get("reason") or "a valid bearer token is required",
        )
    return Principal(authority=authority, role=role, worker=context.get("worker") or "")
