"""Token rules and the minting service. Pure, apart from the TokenStore port."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import Protocol

from dovecote.platform.clock import Clock, rfc3339, utc_now
from dovecote.platform.errors import Forbidden, InvalidArgument
from dovecote.platform.principal import ROLES, Principal

ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
TOKEN_PREFIX = "dvc_"  # noqa: S105 (a public prefix, not a secret)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class TokenRecord:
    token_hash: str
    principal: Principal
    created_at: str


class TokenStore(Protocol):
    def put(self, record: TokenRecord) -> None: ...

    def lookup(self, token_hash: str) -> Principal | None: ...


def gate_principal(authority: str, role: str, worker: str | None) -> Principal:
    """The one gate for what a token may stand for."""
    if not ID_PATTERN.match(authority or ""):
        raise InvalidArgument("authority must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", field="authority")
    if role not in ROLES:
        raise InvalidArgument(f"role must be one of {', '.join(ROLES)}", field="role")
    worker = worker or ""
    if role == "worker" and not worker:
        raise InvalidArgument("a worker token needs a worker id", field="worker")
    if role == "caller" and worker:
        raise InvalidArgument("a caller token has no worker id", field="worker")
    if worker and not ID_PATTERN.match(worker):
        raise InvalidArgument("worker must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$", field="worker")
    return Principal(authority=authority, role=role, worker=worker)  # type: ignore[arg-type]


class TokenService:
    def __init__(self, store: TokenStore, *, clock: Clock = utc_now) -> None:
        self._store = store
        self._clock = clock

    def mint(self, admin: Principal | None, authority: str, role: str, worker: str | None) -> tuple[str, Principal]:
        """`admin` None is the bootstrap path (AWS credentials, no bearer token). An admin token
        mints only inside its own authority: a payload can never widen a principal's authority."""
        principal = gate_principal(authority, role, worker)
        if admin is not None:
            admin.require("admin")
            if admin.role != "admin":
                raise Forbidden("only admin tokens mint tokens")
            if principal.authority != admin.authority:
                raise Forbidden(
                    "an admin token mints tokens only for its own authority",
                    authority=principal.authority,
                )
        token = new_token()
        self._store.put(TokenRecord(token_hash(token), principal, rfc3339(self._clock())))
        return token, principal

    def authenticate(self, token: str) -> Principal | None:
        if not token.startswith(TOKEN_PREFIX) or len(token) > 256:
            return None
        return self._store.lookup(token_hash(token))


class InMemoryTokenStore:
    def __init__(self) -> None:
        self._records: dict[str, TokenRecord] = {}

    def put(self, record: TokenRecord) -> None:
        self._records[record.token_hash] = record

    def lookup(self, token_hash: str) -> Principal | None:
        record = self._records.get(token_hash)
        return record.principal if record else None
