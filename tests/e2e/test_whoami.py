"""Why was my token refused, and who is it? Against a real `dovecote dev`: `GET /v1/whoami` for each
role, the CLI's and the MCP server's `whoami`, the authorizer's denial lines in the dev log, and the
agent claim rule over HTTP and through `dovecote tokens bootstrap`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from datetime import datetime
from typing import Any

import anyio
import httpx
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from dovecote.admin.model import new_token, parse_token
from dovecote.client import DovecoteClient
from tests.conftest import ROOT
from tests.e2e.conftest import bearer
from tests.support.authorities import moto_endpoint

AUTHORITY = "dev"  # the dev runtime's tokens


def whoami(dev: dict[str, Any], token: str) -> httpx.Response:
    return httpx.get(dev["endpoint"] + "/v1/whoami", headers=bearer(token), timeout=30)


def mint(dev: dict[str, Any], **body: Any) -> httpx.Response:
    return httpx.post(
        dev["endpoint"] + "/v1/admin/tokens",
        json={"authority": AUTHORITY, **body},
        headers=bearer(dev["tokens"]["admin"]),
        timeout=30,
    )


def listed(dev: dict[str, Any]) -> dict[str, dict[str, Any]]:
    with DovecoteClient(dev["endpoint"], dev["tokens"]["admin"]) as admin:
        return {item["token_id"]: item for item in admin.iter_tokens()}


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DOVECOTE_", "AWS_"))}
    return subprocess.run(
        [sys.executable, "-m", "dovecote.cli", *args],
        capture_output=True,
        text=True,
        env=clean | {"COLUMNS": "200"} | env,
        cwd=ROOT,
        timeout=120,
    )


def bootstrap(dev: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    aws = {
        "AWS_ENDPOINT_URL": moto_endpoint(dev),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    return cli(aws, "tokens", "bootstrap", "--table", "dovecote-tokens", *args)


# ---- GET /v1/whoami ---------------------------------------------------------------------------------


def test_whoami_answers_the_principal_of_each_role(dev_runtime: dict[str, Any]) -> None:
    tokens = listed(dev_runtime)
    for role in ("caller", "worker", "admin"):
        token = dev_runtime["tokens"][role]
        answer = whoami(dev_runtime, token)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        token_id = parse_token(token)
        assert body["authority"] == AUTHORITY and body["role"] == role and body["token_id"] == token_id
        assert body["expires_at"] == tokens[str(token_id)]["expires_at"]
        assert datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00")) > datetime.now().astimezone()
        assert ("worker" in body) == (role == "worker")  # present only when the token has one
        assert "agent" not in body
        assert token not in answer.text
    assert whoami(dev_runtime, dev_runtime["tokens"]["worker"]).json()["worker"] == "dev-worker"
    # No token at all is the gateway's 401; a refused one its bare 403.
    assert httpx.get(dev_runtime["endpoint"] + "/v1/whoami", timeout=30).status_code == 401
    refused = whoami(dev_runtime, new_token()[1])
    assert refused.status_code == 403 and refused.json() == {"message": "Forbidden"}
    unknown_query = httpx.get(
        dev_runtime["endpoint"] + "/v1/whoami?as=admin", headers=bearer(dev_runtime["tokens"]["caller"]), timeout=30
    )
    assert unknown_query.status_code == 400 and unknown_query.json()["error"]["code"] == "invalid_argument"


def test_whoami_is_documented_with_its_schema(dev_runtime: dict[str, Any]) -> None:
    doc = httpx.get(dev_runtime["endpoint"] + "/v1/openapi.json", timeout=30).json()
    operation = doc["paths"]["/v1/whoami"]["get"]
    assert operation["security"] == [{"bearer": []}]
    ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    schema = doc["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    assert set(schema["properties"]) == {"authority", "role", "worker", "agent", "token_id", "expires_at"}
    assert set(schema["required"]) == {"authority", "role", "token_id", "expires_at"}


# ---- the agent claim ------------------------------------------------------------------------------


def test_only_caller_tokens_carry_an_agent_claim(dev_runtime: dict[str, Any]) -> None:
    before = set(listed(dev_runtime))
    for body in ({"role": "admin", "agent": "claude"}, {"role": "worker", "worker": "w-claim", "agent": "claude"}):
        refused = mint(dev_runtime, **body)
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == "invalid_argument" and error["details"]["field"] == "agent"
    assert set(listed(dev_runtime)) == before  # nothing was minted

    minted = mint(dev_runtime, role="caller", agent="claude")
    assert minted.status_code == 201 and minted.json()["agent"] == "claude"
    bound = minted.json()["token"]
    me = whoami(dev_runtime, bound).json()
    assert me["agent"] == "claude" and me["role"] == "caller" and me["token_id"] == minted.json()["token_id"]
    # The claim holds: the bound token writes only as its agent.
    key = f"claim-{uuid.uuid4().hex[:8]}"
    note = {"key": key, "run": 1, "name": "n", "text": "x"}
    put = httpx.put(dev_runtime["endpoint"] + "/v1/notes", json=note | {"author": "other"}, headers=bearer(bound))
    assert put.status_code == 403 and put.json()["error"]["code"] == "forbidden"
    ok = httpx.put(dev_runtime["endpoint"] + "/v1/notes", json=note | {"author": "claude"}, headers=bearer(bound))
    assert ok.status_code == 200, ok.text


def test_bootstrap_applies_the_same_agent_claim_rule(dev_runtime: dict[str, Any]) -> None:
    authority = f"boot-{uuid.uuid4().hex[:8]}"
    for args in (("--role", "admin"), ("--role", "worker", "--worker", "w1")):
        refused = bootstrap(dev_runtime, "--authority", authority, *args, "--agent", "claude")
        assert refused.returncode == 1, refused.stderr
        assert refused.stdout == "" and "invalid_argument" in refused.stderr and "agent" in refused.stderr
    minted = bootstrap(dev_runtime, "--authority", authority, "--role", "caller", "--agent", "claude")
    assert minted.returncode == 0, minted.stderr
    document = json.loads(minted.stdout)
    assert document["agent"] == "claude" and document["role"] == "caller"
    me = whoami(dev_runtime, document["token"]).json()
    assert me == {
        "authority": authority,
        "role": "caller",
        "agent": "claude",
        "token_id": document["token_id"],
        "expires_at": document["expires_at"],
    }


# ---- why was my token refused ---------------------------------------------------------------------


def test_the_dev_log_says_why_a_token_was_refused_never_the_secret(dev_runtime: dict[str, Any]) -> None:
    victim = mint(dev_runtime, role="caller").json()
    with DovecoteClient(dev_runtime["endpoint"], dev_runtime["tokens"]["admin"]) as admin:
        admin.revoke_token(victim["token_id"])
    stranger_id, stranger = new_token()
    truncated = victim["token"][:30]
    cases = {"revoked": (victim["token"], victim["token_id"]), "unknown": (stranger, stranger_id)}
    cases["malformed"] = (truncated, victim["token_id"])
    for token, _ in cases.values():
        assert whoami(dev_runtime, token).status_code == 403

    def refusals() -> list[dict[str, Any]]:
        lines = []
        for line in dev_runtime["log"].read_text(errors="replace").splitlines():
            if line.startswith("{") and '"token refused"' in line:
                lines.append(json.loads(line))
        return lines

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        seen = {(r["reason"], r.get("token_id")) for r in refusals()}
        if all((reason, token_id) in seen for reason, (_, token_id) in cases.items()):
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"denial lines missing from the dev log: {refusals()}")
    text = dev_runtime["log"].read_text(errors="replace")
    for token, _ in cases.values():
        assert token not in text
    assert victim["token"].split("_", 2)[2] not in text and stranger.split("_", 2)[2] not in text
    assert not re.search(r"dvc_[0-9a-f]{16}_[A-Za-z0-9_-]{20,}", text)  # no whole token of any test


# ---- the CLI and the MCP server -------------------------------------------------------------------


def test_cli_whoami(dev_runtime: dict[str, Any]) -> None:
    token = dev_runtime["tokens"]["worker"]
    env = {"DOVECOTE_ENDPOINT": dev_runtime["endpoint"], "DOVECOTE_TOKEN": token}
    as_json = cli(env, "whoami", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == whoami(dev_runtime, token).json()
    table = cli(env, "whoami")
    assert table.returncode == 0 and str(parse_token(token)) in table.stdout and "dev-worker" in table.stdout
    # Without DOVECOTE_TOKEN, --role picks the dev tokens file's token.
    from_file = cli({"DOVECOTE_TOKENS_FILE": str(dev_runtime["tokens_file"])}, "whoami", "--role", "admin", "--json")
    assert from_file.returncode == 0, from_file.stderr
    assert json.loads(from_file.stdout)["token_id"] == parse_token(dev_runtime["tokens"]["admin"])
    refused = cli({"DOVECOTE_ENDPOINT": dev_runtime["endpoint"], "DOVECOTE_TOKEN": new_token()[1]}, "whoami")
    assert refused.returncode == 1 and "403 forbidden" in refused.stderr


def test_mcp_whoami_is_a_read_only_tool(dev_runtime: dict[str, Any]) -> None:
    token = dev_runtime["tokens"]["caller"]
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "dovecote.cli", "mcp"],
        env={"DOVECOTE_ENDPOINT": dev_runtime["endpoint"], "DOVECOTE_TOKEN": token},
        cwd=str(ROOT),
    )
    seen: dict[str, Any] = {}

    async def body() -> None:
        async with Client(server) as client:
            tool = next(t for t in (await client.list_tools()).tools if t.name == "whoami")
            assert tool.annotations is not None and tool.annotations.read_only_hint is True
            assert not tool.annotations.destructive_hint
            result = await client.call_tool("whoami", {})
            assert not result.is_error, result.content
            seen.update(result.structured_content or {})

    anyio.run(body)
    assert seen == whoami(dev_runtime, token).json()
