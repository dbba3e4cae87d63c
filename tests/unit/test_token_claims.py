"""The agent claim rule (only caller tokens carry it; an agent-bound admin token minted before the
rule never widens it), what the authorizer context carries for `GET /v1/whoami`, and the token id
a refusal may be logged with."""

from __future__ import annotations

import pytest

from dovecote.admin.memory import InMemoryTokenStore
from dovecote.admin.model import claimed_id, new_token
from dovecote.admin.service import TokenService
from dovecote.platform.errors import Forbidden, InvalidArgument
from dovecote.platform.principal import Principal, principal_from_event

ADMIN = Principal("acme", "admin", token_id="a000000000000000")


@pytest.mark.parametrize(("role", "worker"), [("admin", None), ("admin", "w1"), ("worker", "w1")])
@pytest.mark.parametrize("admin", [ADMIN, None], ids=["api", "bootstrap"])
def test_only_a_caller_token_may_carry_an_agent_claim(role: str, worker: str | None, admin: Principal | None) -> None:
    store = InMemoryTokenStore()
    with pytest.raises(InvalidArgument) as refused:
        TokenService(store).mint(admin, "acme", role, worker, agent="claude")
    assert refused.value.code == "invalid_argument" and refused.value.status == 400
    assert refused.value.details["field"] == "agent" and refused.value.details["role"] == role
    assert store.records == {}  # nothing stored
    # The same token without the claim is fine, and a caller token carries it.
    TokenService(store).mint(admin, "acme", role, worker)
    _, caller = TokenService(store).mint(admin, "acme", "caller", None, agent="claude")
    assert caller.principal.agent == "claude"


def test_an_agent_bound_admin_token_minted_before_the_rule_never_mints_an_unbound_token() -> None:
    legacy = Principal("acme", "admin", agent="claude", token_id="b000000000000000")
    service = TokenService(InMemoryTokenStore())
    for role, worker, agent in (
        ("caller", None, None),
        ("caller", None, "other"),
        ("worker", "w1", None),
        ("admin", None, None),
    ):
        with pytest.raises(Forbidden):
            service.mint(legacy, "acme", role, worker, agent=agent)
    _, record = service.mint(legacy, "acme", "caller", None, agent="claude")
    assert record.principal.agent == "claude" and record.minted_by == legacy.token_id


def test_the_authorizer_context_carries_what_whoami_answers() -> None:
    service = TokenService(InMemoryTokenStore())
    token, record = service.mint(ADMIN, "acme", "caller", None, agent="claude")
    principal, reason = service.authenticate(token)
    assert reason == "" and principal is not None
    context = principal.as_context()
    assert context == {
        "authority": "acme",
        "role": "caller",
        "worker": "",
        "agent": "claude",
        "token_id": record.token_id,
        "expires_at": record.expires_at,
    }
    assert token not in repr(context)
    # What a function reads back from the event is the same principal.
    event = {"requestContext": {"authorizer": {"lambda": context}}}
    assert principal_from_event(event) == principal


def test_a_refusal_names_the_token_id_it_can_read_and_never_more() -> None:
    token_id, token = new_token()
    secret = token.split("_", 2)[2]
    assert claimed_id(token) == token_id
    assert claimed_id(token[:30]) == token_id  # a truncated paste still names its token
    assert claimed_id(f"dvc_{token_id}") == token_id
    for unreadable in ("", "nonsense", "dvc_", f"dvc_{token_id[:15]}", f"dvc_{token_id}x_{secret}", secret):
        assert claimed_id(unreadable) is None, unreadable
