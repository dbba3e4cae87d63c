"""`dovecote mcp`: serve Dovecote to an agent's model over the Model Context Protocol, on stdio (the
default: an MCP client such as Claude Code or Codex launches it) or on streamable HTTP with
`--http PORT` (at `http://HOST:PORT/mcp`). Its endpoint and token are the CLI's (`--profile`,
DOVECOTE_ENDPOINT / DOVECOTE_TOKEN, the profiles, the nearest dev tokens file: dovecote.client.config),
so it works from any directory. Nothing is printed on stdout: on stdio it carries the protocol."""

from __future__ import annotations

import logging
import os
import sys
from enum import StrEnum
from typing import Annotated

import typer

from dovecote.cli.common import EXIT_USAGE, CliError, client
from dovecote.cli.groups import new_app

app = new_app("Serve the tools over the Model Context Protocol.", no_args_is_help=False)


class WorkerTools(StrEnum):
    auto = "auto"
    on = "on"
    off = "off"


@app.command("mcp")
def mcp(
    http: Annotated[
        int | None,
        typer.Option("--http", metavar="PORT", help="Serve streamable HTTP on PORT (path /mcp) instead of stdio."),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to bind with --http.")] = "127.0.0.1",
    role: Annotated[
        str,
        typer.Option(
            envvar="DOVECOTE_MCP_ROLE",
            help="Which token to use where the configuration has one per role (the dev tokens file, the dev "
            "profiles): caller or worker.",
        ),
    ] = "caller",
    worker_tools: Annotated[
        WorkerTools,
        typer.Option(help="Offer the worker tools: auto asks the API whether the token may run worker commands."),
    ] = WorkerTools.auto,
) -> None:
    """Serve the notes, tasks, recall and memory tools over MCP (stdio, or HTTP with --http PORT).

    Endpoint and token as every command: --profile, DOVECOTE_ENDPOINT and DOVECOTE_TOKEN, the
    profiles of ~/.config/dovecote/config.toml, the nearest dev tokens file (the token of --role)."""
    if role not in ("caller", "worker", "admin"):
        raise CliError(f"--role must be caller, worker or admin, not {role!r}", EXIT_USAGE)
    from dovecote.mcp.server import build_server

    logging.basicConfig(stream=sys.stderr, level=os.environ.get("DOVECOTE_MCP_LOG", "WARNING").upper())
    sdk = client(role, pooled=True)  # the server lives on: keep httpx's connection pool
    forced = {WorkerTools.auto: None, WorkerTools.on: True, WorkerTools.off: False}[worker_tools]
    server = build_server(sdk, worker_tools=forced)
    try:
        if http is None:
            server.run("stdio")
        else:
            sys.stderr.write(f"dovecote mcp serving streamable HTTP at http://{host}:{http}/mcp\n")
            server.run("streamable-http", host=host, port=http)
    finally:
        sdk.close()
