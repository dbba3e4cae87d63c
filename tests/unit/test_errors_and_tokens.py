"""The error table, the principal, and token rules."""

from __future__ import annotations

import pytest

from dovecote.admin.tokens import InMemoryTokenStore, TokenService, token_hash
from dovecote.platform.errors import STATUS_BY_CODE, DomainError, Forbidden, InvalidArgument, error_for
from dovecote.platform.principal import Principal, principal_from_event


def test_every_api_md_code_has_its_status() -> None:
    expected = {
        400: {"invalid_argument", "ambiguous_ref"},
        401: {"unauthenticated"},
        403: {"forbidden"},
        404: {"not_found"},
        413: {"payload_too_large"},
        429: {"throttled"},
    }
    for status, codes in expected.items():
        for code in codes:
            assert STATUS_BY_CODE[code] == status
    assert STATUS_BY_CODE["commit_unknown"] == 503
    assert all(STATUS_BY_CODE[c] == 409 for c in ("revision_conflict", "stale_lease", "receipt_conflict"))


def test_error_envelope_is_data() -> None:
    err = InvalidArgument("bad run", field="run")
    assert err.status == 400
    assert err.envelope() == {"error": {"code": "invalid_argument", "message": "bad run", "details": {"field": "run"}}}
    assert isinstance(error_for("stale_lease", "x", fence=3), DomainError)
    assert error_for("stale_lease", "x", fence=3).status == 409


def test_principal_comes_only_from_the_authorizer_context() -> None:
    event = {
        "requestContext": {"authorizer": {"lambda": {"authority": "acme", "role": "worker", "worker": "w1"}}},
        "body": '{"authority": "evil"}',
        "headers": {"x-authority": "evil"},
    }
    assert principal_from_event(event) == Principal("acme", "worker", "w1")
    with pytest.raises(DomainError) as caught:
        principal_from_event({"requestContext": {"authorizer": {"lambda": {"reason": "invalid bearer token"}}}})
    assert caught.value.code == "unauthenticated" and caught.value.status == 401


def test_roles() -> None:
    assert Principal("a", "admin").require("worker")
    with pytest.raises(Forbidden):
        Principal("a", "caller").require("worker")


def test_tokens_are_stored_hashed_and_resolve_back() -> None:
    store = InMemoryTokenStore()
    service = TokenService(store)
    token, principal = service.mint(None, "acme", "worker", "w1")
    assert token not in repr(store._records)
    assert token_hash(token) in store._records
    assert service.authenticate(token) == principal == Principal("acme", "worker", "w1")
    assert service.authenticate(token + "x") is None
    assert service.authenticate("not-a-token") is None


@pytest.mark.parametrize(
    ("authority", "role", "worker"),
    [
        ("", "caller", None),
        ("bad authority", "caller", None),
        ("acme", "root", None),
        ("acme", "worker", None),
        ("acme", "caller", "w1"),
        ("acme", "worker", "bad worker"),
    ],
)
def test_token_gate(authority: str, role: str, worker: str | None) -> None:
    with pytest.raises(InvalidArgument):
        TokenService(InMemoryTokenStore()).mint(None, authority, role, worker)


def test_admin_mints_only_in_its_own_authority() -> None:
    service = TokenService(InMemoryTokenStore())
    with pytest.raises(Forbidden):
        service.mint(Principal("acme", "admin"), "globex", "caller", None)
    with pytest.raises(Forbidden):
        service.mint(Principal("acme", "caller"), "acme", "caller", None)
    token, principal = service.mint(Principal("acme", "admin"), "acme", "caller", None)
    assert principal.authority == "acme" and token.startswith("dvc_")
