"""The identity tool: `whoami` (docs/clients/http.md#admin-and-meta-routes, `GET /v1/whoami`). A model that is refused
can ask which token it holds (authority, role, worker, agent claim, expiry) instead of guessing."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

from dovecote.client import DovecoteClient
from dovecote.mcp.annotations import tool


def register(server: MCPServer, client: DovecoteClient) -> None:
    @tool(server, "whoami")
    def whoami() -> dict[str, Any]:
        """Who this server's token is: {authority, role, worker?, agent?, token_id, expires_at}. An
        agent claim means notes may be written and deleted only with that author."""
        return client.whoami()
