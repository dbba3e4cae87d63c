"""`dovecote dev --a2a-unauthenticated` over real HTTP (issue 29 item 7): the mode serves A2A without a
token as the dev caller, so it serves only a client on this machine that talks to it by a loopback
name: no cross-site browser request (no Content-Type, text/plain, another Origin) creates a task, no
foreign Host (DNS rebinding) is served, and the mode refuses to start on an address others reach."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dovecote.cli.errors import EXIT_USAGE
from tests.conftest import ROOT
from tests.e2e.conftest import _free_port, start_dev

VERSION = {"A2A-Version": "1.0"}


@pytest.fixture(scope="module")
def open_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with start_dev(tmp_path_factory.mktemp("a2a-open"), "--a2a-unauthenticated", "--dispatch-interval", "0") as rt:
        yield rt


def send_body(text: str) -> bytes:
    message = {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]}
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": message, "configuration": {"returnImmediately": True}},
    }
    return json.dumps(request).encode()


@pytest.mark.parametrize(
    "headers",
    [
        {},  # fetch(url, {method: "POST", mode: "no-cors", body}) from any page: no Content-Type
        {"Content-Type": "text/plain", "Origin": "https://evil.example"},  # a simple request, no preflight
        {"Content-Type": "text/plain"},
        {"Content-Type": "application/json", "Origin": "https://evil.example"},
        {"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"},
    ],
    ids=["no content type", "text/plain from another origin", "text/plain", "another origin", "cross-site"],
)
def test_a_cross_site_request_creates_no_task(open_runtime: dict[str, Any], headers: dict[str, str]) -> None:
    endpoint = open_runtime["endpoint"]
    text = f"cross-site-{uuid.uuid4().hex[:8]}"
    answer = httpx.post(endpoint + "/", content=send_body(text), headers={**VERSION, **headers}, timeout=30)
    refused = answer.status_code == 403 or answer.json().get("error", {}).get("code") == -32005
    assert refused, answer.text
    assert "result" not in answer.text
    response = httpx.get(endpoint + "/a2a/tasks", params={"historyLength": "1"}, headers=VERSION, timeout=30)
    texts = [t["history"][0]["parts"][0].get("text") for t in response.json()["tasks"]]
    assert text not in texts


def test_a_foreign_host_is_not_served(open_runtime: dict[str, Any]) -> None:
    # DNS rebinding: a page at evil.example whose name now resolves to 127.0.0.1
    endpoint = open_runtime["endpoint"]
    port = endpoint.rsplit(":", 1)[1]
    for method, path in (("GET", "/a2a/tasks"), ("POST", "/")):
        answer = httpx.request(
            method,
            endpoint + path,
            content=send_body("rebound") if method == "POST" else None,
            headers={**VERSION, "Host": f"evil.example:{port}", "Content-Type": "application/json"},
            timeout=30,
        )
        assert answer.status_code == 403, answer.text


def test_a_loopback_client_is_served_as_the_dev_caller(open_runtime: dict[str, Any]) -> None:
    endpoint = open_runtime["endpoint"]
    answer = httpx.post(
        endpoint + "/", content=send_body("loopback"), headers={**VERSION, "Content-Type": "application/json"}
    )
    assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    response = httpx.get(endpoint + "/a2a/tasks", params={"historyLength": "1"}, headers=VERSION, timeout=30)
    assert "loopback" in [t["history"][0]["parts"][0].get("text") for t in response.json()["tasks"]]


def test_the_mode_refuses_an_address_others_reach(tmp_path: Path) -> None:
    data = tmp_path / "data"
    command = [sys.executable, "-m", "dovecote.cli", "dev", "--a2a-unauthenticated", "--host", "0.0.0.0"]  # noqa: S104
    finished = subprocess.run(
        [*command, "--port", str(_free_port()), "--data", str(data), "--tokens-file", str(tmp_path / "t.json")],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == EXIT_USAGE, finished.stderr
    assert "loopback" in finished.stderr
    assert not data.exists() and not (tmp_path / "t.json").exists()
