"""The error table and the principal."""

from __future__ import annotations

import pytest

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
    bound = {"authority": "acme", "role": "caller", "agent": "claude", "token_id": "0123456789abcdef"}
    assert principal_from_event({"requestContext": {"authorizer": {"lambda": bound}}}) == Principal(
        "acme", "caller", "", "claude", "0123456789abcdef"
    )
    with pytest.raises(DomainError) as caught:
        principal_from_event({"requestContext": {"authorizer": {"lambda": {"reason": "invalid bearer token"}}}})
    assert caught.value.code == "unauthenticated" and caught.value.status == 401


def test_roles() -> None:
    assert Principal("a", "admin").require("worker")
    with pytest.raises(Forbidden):
        Principal("a", "caller").require("worker")


def test_derived_ids_are_deterministic_per_token_and_unguessable_without_it() -> None:
    from dovecote.client import DovecoteClient

    a1 = DovecoteClient("http://127.0.0.1:9", "dvc_token_a")
    a2 = DovecoteClient("http://127.0.0.1:9", "dvc_token_a")
    b = DovecoteClient("http://127.0.0.1:9", "dvc_token_b")
    assert a1.derived_id("echo", "t1", 1, "accept") == a2.derived_id("echo", "t1", 1, "accept")
    assert a1.derived_id("echo", "t1", 1, "accept") != b.derived_id("echo", "t1", 1, "accept")
    assert a1.derived_id("echo", "t1", 1, "accept") != a1.derived_id("echo", "t1", 2, "accept")
    # Still a valid command id.
    from dovecote.platform.ids import is_id

    assert is_id(a1.derived_id("echo", "t1", 1, "accept"))
