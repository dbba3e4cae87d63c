"""Token lifecycle: mint, authenticate, list, revoke. Pure apart from the TokenStore port and the
audit sink. Every mint and revoke is an audit line: who, what, when; never the token."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, asdict, dataclass
from typing import Any

from dovecote.admin.model import (
    BOOTSTRAP,
    TOKEN_ID,
    TokenListing,
    TokenRecord,
    expiry,
    gate_days,
    gate_principal,
    new_token,
    parse_token,
    token_hash,
)
from dovecote.admin.ports import TokenStore
from dovecote.platform.clock import Clock, rfc3339, utc_now
from dovecote.platform.cursors import CursorSigner, LazySigner
from dovecote.platform.errors import Forbidden, InvalidArgument, NotFound
from dovecote.platform.paging import Page, page_limit
from dovecote.platform.principal import Principal

Audit = Callable[[str, dict[str, Any]], None]
DEFAULT_DAYS = 90
DEFAULT_ADMIN_DAYS = 7
LIST_DEFAULT = 100
LIST_MAX = 100


def _log_audit(event: str, facts: dict[str, Any]) -> None:
    from dovecote.platform.observability import logger

    logger.info(event, extra={"audit": event, **facts})


@dataclass(eq=False)
class TokenService:
    store: TokenStore
    _: KW_ONLY
    clock: Clock = utc_now
    audit: Audit = _log_audit
    default_days: int = DEFAULT_DAYS
    admin_days: int = DEFAULT_ADMIN_DAYS
    signer_factory: Callable[[], CursorSigner] | None = None

    def __post_init__(self) -> None:
        self._signers = LazySigner(factory=self.signer_factory or _no_signer)

    def mint(
        self,
        admin: Principal | None,
        authority: str,
        role: str,
        worker: str | None,
        *,
        agent: str | None = None,
        expires_in_days: int | None = None,
    ) -> tuple[str, TokenRecord]:
        """`admin` None is the bootstrap path (AWS credentials, no bearer token). An admin token
        mints only inside its own authority: a payload can never widen a principal's authority."""
        if admin is not None:
            admin.require("admin")
            if admin.role != "admin":
                raise Forbidden("only admin tokens mint tokens")
        principal = gate_principal(authority, role, worker, agent)
        days = gate_days(expires_in_days, self.admin_days if role == "admin" else self.default_days)
        if admin is not None and principal.authority != admin.authority:
            raise Forbidden("an admin token mints tokens only for its own authority", authority=principal.authority)
        if admin is not None and admin.agent and principal.agent != admin.agent:
            # An admin token minted with a claim before gate_principal refused that: it never widens it.
            raise Forbidden(f"this token mints only caller tokens bound to agent {admin.agent!r}", agent=admin.agent)
        now = self.clock()
        token_id, token = new_token()
        record = TokenRecord(
            token_id=token_id,
            token_hash=token_hash(token),
            principal=principal,
            created_at=rfc3339(now),
            expires_at=rfc3339(expiry(now, days)),
            minted_by=(admin.token_id or "unknown") if admin is not None else BOOTSTRAP,
        )
        self.store.put(record)
        self.audit(
            "token_minted",
            {"authority": principal.authority, **asdict(TokenListing.of(record)), "revoked_at": None},
        )
        return token, record

    def authenticate(self, token: str) -> tuple[Principal | None, str]:
        """(principal, "") when the token is good; (None, reason) otherwise. The reason is for the
        authorizer's log, never for the caller."""
        token_id = parse_token(token)
        if token_id is None:
            return None, "malformed"
        record = self.store.get(token_id)
        if record is None or not record.matches(token):
            return None, "unknown"
        refusal = record.refusal(rfc3339(self.clock()))
        if refusal:
            return None, refusal
        p = record.principal
        return Principal(p.authority, p.role, p.worker, p.agent, token_id, record.expires_at), ""

    def revoke(self, admin: Principal, token_id: str) -> None:
        admin.require("admin")
        if admin.role != "admin":
            raise Forbidden("only admin tokens revoke tokens")
        if not TOKEN_ID.fullmatch(token_id):
            raise NotFound("token not found", token_id=token_id)
        record = self.store.revoke(admin.authority, token_id, rfc3339(self.clock()))
        if record is None:
            raise NotFound("token not found", token_id=token_id)
        self.audit(
            "token_revoked",
            {
                "authority": admin.authority,
                "token_id": token_id,
                "revoked_by": admin.token_id or "unknown",
                "revoked_at": record.revoked_at,
            },
        )

    def list(self, admin: Principal, limit: int | None, cursor: str | None) -> Page[TokenListing]:
        admin.require("admin")
        if admin.role != "admin":
            raise Forbidden("only admin tokens list tokens")
        size = page_limit(limit, default=LIST_DEFAULT, maximum=LIST_MAX)
        after = None
        signer = self._signers.get() if cursor else None
        if cursor and signer is not None:
            after = signer.open(cursor, authority=admin.authority, scope="tokens").get("after")
            if not isinstance(after, str):
                raise InvalidArgument("cursor is malformed", field="cursor")
        records, position = self.store.list(admin.authority, after, size)
        next_cursor = None
        if position is not None:
            next_cursor = self._signers.get().seal(
                authority=admin.authority, scope="tokens", position={"after": position}
            )
        return Page(tuple(TokenListing.of(r) for r in records), next_cursor)


def _no_signer() -> CursorSigner:
    raise RuntimeError("this TokenService was built without a cursor signer")
