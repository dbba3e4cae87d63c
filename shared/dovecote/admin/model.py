"""Token rules. Pure.

A token reads `dvc_<token_id>_<secret>`. The id is public (it names the token in listings, audit
lines and revocation); the secret is 256 random bits. The store keeps the SHA-256 of the whole token,
never the token, so a leaked table cannot be replayed. Lookups go by id, and the hash is compared in
constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from dovecote.platform.errors import InvalidArgument
from dovecote.platform.ids import ID_REGEX, is_id
from dovecote.platform.principal import ROLES, Principal

TOKEN_PREFIX = "dvc_"  # noqa: S105 (a public prefix, not a secret)
TOKEN_ID = re.compile(r"[0-9a-f]{16}")
_TOKEN = re.compile(r"dvc_([0-9a-f]{16})_[A-Za-z0-9_-]{43}")
_CLAIMED_ID = re.compile(r"dvc_([0-9a-f]{16})(?:_|$)")
MAX_TOKEN_DAYS = 3650
BOOTSTRAP = "bootstrap"  # minted_by of a token minted with AWS credentials


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> tuple[str, str]:
    """(token_id, token)."""
    token_id = secrets.token_hex(8)
    return token_id, f"{TOKEN_PREFIX}{token_id}_{secrets.token_urlsafe(32)}"


def parse_token(token: str) -> str | None:
    """The token id, or None when the string cannot be a Dovecote token."""
    found = _TOKEN.fullmatch(token) if len(token) < 128 else None
    return found.group(1) if found else None


def claimed_id(token: str) -> str | None:
    """The token id a string names, even when its secret part is malformed (a truncated paste): the
    id is public, so a refusal may be logged with it. None when not even the id can be read."""
    found = _CLAIMED_ID.match(token[:21])
    return found.group(1) if found else None


@dataclass(frozen=True, slots=True)
class TokenRecord:
    token_id: str
    token_hash: str
    principal: Principal
    created_at: str
    expires_at: str
    minted_by: str
    revoked_at: str = ""

    def matches(self, token: str) -> bool:
        return hmac.compare_digest(self.token_hash, token_hash(token))

    def refusal(self, now: str) -> str | None:
        """Why this token may not authenticate at `now` (RFC 3339 UTC strings compare as instants)."""
        if self.revoked_at:
            return "revoked"
        if self.expires_at <= now:
            return "expired"
        return None

    def revoked(self, at: str) -> TokenRecord:
        return self if self.revoked_at else replace(self, revoked_at=at)


@dataclass(frozen=True, slots=True)
class TokenListing:
    """What an admin may see of a token: never its secret, never its hash (a listing's item, and
    the facts of its mint's audit line)."""

    token_id: str
    role: str
    worker: str
    agent: str
    created_at: str
    expires_at: str
    minted_by: str
    revoked_at: str | None = None

    @classmethod
    def of(cls, record: TokenRecord) -> TokenListing:
        p = record.principal
        return cls(
            record.token_id,
            p.role,
            p.worker,
            p.agent,
            record.created_at,
            record.expires_at,
            record.minted_by,
            record.revoked_at or None,
        )


@dataclass(frozen=True, slots=True)
class MintedToken:
    """What the minter of a new token is told once: the secret and what it stands for (the document
    `tokens bootstrap` prints and the local runtime's dev mint answers, as the API's TokenOut)."""

    token: str
    token_id: str
    authority: str
    role: str
    worker: str
    agent: str
    expires_at: str

    @classmethod
    def of(cls, token: str, record: TokenRecord) -> MintedToken:
        p = record.principal
        return cls(token, record.token_id, p.authority, p.role, p.worker, p.agent, record.expires_at)


def gate_principal(authority: str, role: str, worker: str | None, agent: str | None = None) -> Principal:
    """The one gate for what a token may stand for."""
    message = f"must match ^{ID_REGEX}$"
    if not is_id(authority):
        raise InvalidArgument(f"authority {message}", field="authority")
    if role not in ROLES:
        raise InvalidArgument(f"role must be one of {', '.join(ROLES)}", field="role")
    worker = worker or ""
    if role == "worker" and not worker:
        raise InvalidArgument("a worker token needs a worker id", field="worker")
    if role == "caller" and worker:
        raise InvalidArgument("a caller token has no worker id", field="worker")
    if worker and not is_id(worker):
        raise InvalidArgument(f"worker {message}", field="worker")
    agent = agent or ""
    if agent and not is_id(agent):
        raise InvalidArgument(f"agent {message}", field="agent")
    # The claim binds the note authorship of an agent that calls in. On an admin token it would promise
    # a binding the admin escapes by minting an unbound token; a worker is named by its worker id.
    # One rule, checked here for the API and the bootstrap alike: only caller tokens carry it.
    if agent and role != "caller":
        raise InvalidArgument("only a caller token may carry an agent claim", field="agent", role=role)
    return Principal(authority=authority, role=role, worker=worker, agent=agent)  # type: ignore[arg-type]


def gate_days(days: int | None, default: int) -> int:
    if days is None:
        return default
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_TOKEN_DAYS:
        raise InvalidArgument(
            f"expires_in_days must be between 1 and {MAX_TOKEN_DAYS}", field="expires_in_days", limit=MAX_TOKEN_DAYS
        )
    return days


def expiry(now: datetime, days: int) -> datetime:
    return now + timedelta(days=days)
