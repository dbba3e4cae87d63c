"""A fresh authority in the `dovecote dev` runtime of the e2e session, for tests whose workers claim
"the oldest claimable task": in the shared `dev` authority that could be another test's task.

Its first admin token is minted the bootstrap way (AWS credentials, straight into the tokens table of
the runtime's moto); callers and workers are then minted over HTTP with that admin token."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.support.moto_server import moto_client


def moto_endpoint(dev_runtime: dict[str, Any]) -> str:
    """The runtime's in-process moto server, as a presigned upload URL names it."""
    upload = httpx.post(
        dev_runtime["endpoint"] + "/v1/notes/uploads",
        json={"key": "probe", "run": 1, "name": "n", "size": 1, "sha256": "0" * 64},
        headers={"Authorization": f"Bearer {dev_runtime['tokens']['caller']}"},
        timeout=30,
    )
    url = httpx.URL(upload.json()["upload_url"])
    return f"{url.scheme}://{url.host}:{url.port}"


@dataclass
class Authority:
    name: str
    endpoint: str
    admin: str
    minted: dict[str, str] = field(default_factory=dict)

    def token(self, role: str, worker: str | None = None) -> str:
        key = f"{role}:{worker or ''}"
        if key not in self.minted:
            answer = httpx.post(
                self.endpoint + "/v1/admin/tokens",
                json={"authority": self.name, "role": role, **({"worker": worker} if worker else {})},
                headers={"Authorization": f"Bearer {self.admin}"},
                timeout=30,
            )
            answer.raise_for_status()
            self.minted[key] = answer.json()["token"]
        return self.minted[key]


def fresh_authority(dev_runtime: dict[str, Any], prefix: str = "t") -> Authority:
    from dovecote.admin.dynamo import DynamoTokenStore
    from dovecote.admin.service import TokenService

    dynamodb = moto_client("dynamodb", moto_endpoint(dev_runtime))
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    token, _ = TokenService(DynamoTokenStore(table="dovecote-tokens", dynamodb=dynamodb)).mint(
        None, name, "admin", None
    )
    return Authority(name, dev_runtime["endpoint"], token)
