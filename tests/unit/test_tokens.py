"""Token rules and lifecycle on the in-memory store: format, hashing, expiry, revocation, listing,
audit, and the agent claim."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dovecote.admin.memory import InMemoryTokenStore
from dovecote.admin.model import TokenListing, parse_token, token_hash
from dovecote.admin.service import TokenService
from dovecote.platform.cursors import CursorSigner
from dovecote.platform.errors import Forbidden, InvalidArgument, NotFound
from dovecote.platform.principal import Principal

ADMIN = Principal("acme", "admin", token_id="a000000000000000")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def audit() -> list[tuple[str, dict[str, Any]]]:
    return []


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def service(audit: list[tuple[str, dict[str, Any]]], clock: Clock) -> TokenService:
    return TokenService(
        InMemoryTokenStore(),
        clock=clock,
        audit=lambda event, facts: audit.append((event, facts)),
        signer_factory=lambda: CursorSigner(b"token-list-key-0123456789abcdef"),
    )


def test_tokens_are_stored_hashed_and_resolve_back(service: TokenService) -> None:
    token, record = service.mint(None, "acme", "worker", "w1")
    store = service.store
    assert token not in repr(store.records)
    assert store.records[record.token_id].token_hash == token_hash(token)
    assert parse_token(token) == record.token_id
    principal, reason = service.authenticate(token)
    assert reason == "" and principal == Principal("acme", "worker", "w1", "", record.token_id, record.expires_at)
    # Same id, another secret: the hash comparison refuses it.
    forged = token[:-1] + ("A" if token[-1] != "A" else "B")
    assert service.authenticate(forged) == (None, "unknown")
    assert service.authenticate("not-a-token") == (None, "malformed")
    assert service.authenticate(token + "\n") == (None, "malformed")


def test_a_revoked_token_is_refused_and_revoking_twice_keeps_the_first_instant(
    service: TokenService, clock: Clock
) -> None:
    token, record = service.mint(ADMIN, "acme", "caller", None)
    service.revoke(ADMIN, record.token_id)
    first = service.store.get(record.token_id).revoked_at
    clock.now += timedelta(minutes=5)
    service.revoke(ADMIN, record.token_id)
    assert service.store.get(record.token_id).revoked_at == first
    assert service.authenticate(token) == (None, "revoked")


def test_an_expired_token_is_refused(service: TokenService, clock: Clock) -> None:
    token, record = service.mint(ADMIN, "acme", "caller", None, expires_in_days=2)
    assert service.authenticate(token)[0] is not None
    clock.now += timedelta(days=2)
    assert service.authenticate(token) == (None, "expired")


def test_admin_tokens_are_short_by_default(service: TokenService) -> None:
    _, admin = service.mint(None, "acme", "admin", None)
    _, caller = service.mint(None, "acme", "caller", None)
    assert admin.expires_at == "2026-01-08T00:00:00.000Z"
    assert caller.expires_at == "2026-04-01T00:00:00.000Z"


@pytest.mark.parametrize("days", [0, -1, 3651, True, "5"])
def test_expiry_is_bounded(service: TokenService, days: Any) -> None:
    with pytest.raises(InvalidArgument):
        service.mint(ADMIN, "acme", "caller", None, expires_in_days=days)


def test_revoke_is_scoped_to_the_admins_authority(service: TokenService) -> None:
    token, record = service.mint(None, "globex", "caller", None)
    with pytest.raises(NotFound):
        service.revoke(ADMIN, record.token_id)
    with pytest.raises(NotFound):
        service.revoke(ADMIN, "ffffffffffffffff")
    with pytest.raises(NotFound):
        service.revoke(ADMIN, "../../etc")
    with pytest.raises(Forbidden):
        service.revoke(Principal("acme", "caller"), record.token_id)
    assert service.authenticate(token)[0] is not None


def test_the_listing_never_holds_a_secret_or_a_hash_and_pages_newest_first(service: TokenService, clock: Clock) -> None:
    minted = []
    for i in range(5):
        clock.now += timedelta(seconds=1)
        minted.append(service.mint(ADMIN, "acme", "worker", f"w{i}"))
    service.mint(None, "globex", "caller", None)
    seen: list[TokenListing] = []
    cursor = None
    while True:
        page = service.list(ADMIN, 2, cursor)
        seen += page.items
        cursor = page.cursor
        if not cursor:
            break
    assert [i.worker for i in seen] == ["w4", "w3", "w2", "w1", "w0"]
    text = repr(seen)
    for token, record in minted:
        assert token not in text and record.token_hash not in text
        assert token.split("_", 2)[2] not in text
    assert {i.minted_by for i in seen} == {ADMIN.token_id}
    with pytest.raises(InvalidArgument):
        service.list(Principal("globex", "admin"), 2, service.list(ADMIN, 2, None).cursor)


def test_every_mint_and_revoke_is_an_audit_line_without_the_token(
    service: TokenService, audit: list[tuple[str, dict[str, Any]]]
) -> None:
    token, record = service.mint(ADMIN, "acme", "caller", None, agent="claude")
    service.revoke(ADMIN, record.token_id)
    assert [event for event, _ in audit] == ["token_minted", "token_revoked"]
    minted, revoked = audit[0][1], audit[1][1]
    assert minted["token_id"] == record.token_id and minted["minted_by"] == ADMIN.token_id
    assert minted["agent"] == "claude" and minted["authority"] == "acme"
    assert revoked["revoked_by"] == ADMIN.token_id
    assert token not in repr(audit) and record.token_hash not in repr(audit)


@pytest.mark.parametrize(
    ("authority", "role", "worker", "agent"),
    [
        ("", "caller", None, None),
        ("bad authority", "caller", None, None),
        ("acme\n", "caller", None, None),
        ("acme", "root", None, None),
        ("acme", "worker", None, None),
        ("acme", "caller", "w1", None),
        ("acme", "worker", "bad worker", None),
        ("acme", "worker", "w1\n", None),
        ("acme", "caller", None, "two words"),
    ],
)
def test_token_gate(authority: str, role: str, worker: str | None, agent: str | None) -> None:
    with pytest.raises(InvalidArgument):
        TokenService(InMemoryTokenStore()).mint(None, authority, role, worker, agent=agent)


def test_admin_mints_only_in_its_own_authority(service: TokenService) -> None:
    with pytest.raises(Forbidden):
        service.mint(ADMIN, "globex", "caller", None)
    with pytest.raises(Forbidden):
        service.mint(Principal("acme", "caller"), "acme", "caller", None)
    token, record = service.mint(ADMIN, "acme", "caller", None)
    assert record.principal.authority == "acme" and token.startswith("dvc_")
