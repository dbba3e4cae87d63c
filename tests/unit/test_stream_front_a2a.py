"""The streams app as the cloud's streaming front runs it (functions/streams_api/a2a_front.py): it
serves the whole A2A interface, handing a request that does not stream to the A2A function's own
router with the event API Gateway would have sent; its token checks come before anything else."""

from __future__ import annotations

import json
from typing import Any

import pytest
from werkzeug.test import Client

from dovecote.platform.settings import get_settings
from functions.streams_api import a2a_front
from functions.streams_api.handler import app


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("DOVECOTE_PUBLIC_URL", "https://front.example/streams")
    get_settings.cache_clear()
    yield Client(app)
    get_settings.cache_clear()


def test_every_a2a_route_key_is_matched_with_its_variables() -> None:
    assert a2a_front.match("POST", "/") == ("POST /", {})
    assert a2a_front.match("POST", "/a2a/message:stream") == ("POST /a2a/{method}", {"method": "message:stream"})
    assert a2a_front.match("POST", "/a2a/tasks/t1:subscribe") == (
        "POST /a2a/tasks/{id_action}",
        {"id_action": "t1:subscribe"},
    )
    assert a2a_front.match("GET", "/a2a/tasks/t1") == ("GET /a2a/tasks/{id}", {"id": "t1"})
    assert a2a_front.match("DELETE", "/a2a/tasks/t1") is None
    assert a2a_front.match("GET", "/v1/tasks") is None


def test_the_public_card_is_served_through_the_a2a_router_and_names_the_front(client: Any) -> None:
    answer = client.get("/.well-known/agent-card.json")
    assert answer.status_code == 200
    card = json.loads(answer.data)
    assert card["capabilities"]["streaming"] is True
    urls = {i["protocolBinding"]: i["url"] for i in card["supportedInterfaces"]}
    assert urls == {"JSONRPC": "https://front.example/streams", "HTTP+JSON": "https://front.example/streams/a2a"}
    assert "urn:dovecote:a2a:stream-resume:v1" in {e["uri"] for e in card["capabilities"]["extensions"]}


def test_no_token_is_the_gateways_401_before_any_route_runs(client: Any) -> None:
    for method, path in (("POST", "/"), ("GET", "/a2a/tasks/t1"), ("GET", "/v1/tasks/t1/stream")):
        answer = client.open(path, method=method, data=b"{}", content_type="application/json")
        assert answer.status_code == 401 and json.loads(answer.data) == {"message": "Unauthorized"}, path
    assert client.get("/nowhere").status_code == 404
