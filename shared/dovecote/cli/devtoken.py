"""`dovecote dev token`: a token of any authority from the running `dovecote dev` (local only).

The runtime mints it (infra/local/control.py): the CLI reads the endpoint and the control secret
from the tokens file that `dovecote dev` rewrites at every start, and POSTs `/_dev/tokens`. No AWS
credentials, no moto port, nothing kept from an earlier start.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from dovecote.cli.common import EXIT_UNREACHABLE, CliError, Json, TokenAgent, TokenWorker, out, print_json

CONTROL_PATH = "/_dev/tokens"
CONTROL_HEADER = "X-Dovecote-Dev-Control"


def running_tokens_file(tokens_file: Path | None) -> Path:
    """--tokens-file, else DOVECOTE_TOKENS_FILE, else the nearest .dovecote/dev-tokens.json up the tree."""
    import os

    from dovecote.client.config import DEV_TOKENS_FILE, nearest_tokens_file

    if tokens_file is not None:
        return tokens_file
    named = os.environ.get("DOVECOTE_TOKENS_FILE")
    if named:
        return Path(named)
    return nearest_tokens_file() or DEV_TOKENS_FILE


def dev_token(
    authority: Annotated[
        str, typer.Option(help="The authority the token acts in (any id, e.g. a second team; default: dev's own).")
    ] = "dev",
    role: Annotated[str, typer.Option(help="caller, worker or admin.")] = "caller",
    worker: TokenWorker = None,
    agent: TokenAgent = None,
    expires_in_days: Annotated[int | None, typer.Option(help="Lifetime in days (default 365; admin tokens 7).")] = None,
    tokens_file: Annotated[
        Path | None,
        typer.Option(help="The running runtime's tokens file (default: DOVECOTE_TOKENS_FILE, else the dev one)."),
    ] = None,
    as_json: Json = False,
) -> None:
    """Mint a token of any authority from the running `dovecote dev` (local only). Prints the token;
    --json prints {token, token_id, authority, role, worker, agent, expires_at}."""
    import httpx

    from dovecote.client import DovecoteError
    from dovecote.client.config import check_tokens_file

    path = running_tokens_file(tokens_file)
    if path.is_file():
        check_tokens_file(path)  # a file others could plant: its endpoint would get the mint request
    try:
        document = json.loads(path.read_text())
        endpoint, secret = str(document["endpoint"]), str(document["control"])
    except FileNotFoundError:
        raise CliError(
            f"no running dovecote dev: {path.absolute()} does not exist (start `dovecote dev`, or pass --tokens-file)",
            EXIT_UNREACHABLE,
            code="configuration",
        ) from None
    except (OSError, ValueError, KeyError, TypeError):
        raise CliError(
            f"the tokens file {path} names no dev control secret: restart `dovecote dev` (an older one wrote it)",
            EXIT_UNREACHABLE,
            code="configuration",
        ) from None
    body: dict[str, Any] = {"authority": authority, "role": role}
    body.update({k: v for k, v in (("worker", worker), ("agent", agent)) if v is not None})
    if expires_in_days is not None:
        body["expires_in_days"] = expires_in_days
    try:
        response = httpx.post(endpoint + CONTROL_PATH, json=body, headers={CONTROL_HEADER: secret}, timeout=30)
    except httpx.TransportError as exc:
        raise CliError(
            f"cannot reach dovecote dev at {endpoint} (from {path}): is it running? ({exc})",
            EXIT_UNREACHABLE,
            code="unavailable",
        ) from None
    try:
        answer = response.json()
    except ValueError:
        answer = {}
    if response.status_code != 200:
        error = answer.get("error") if isinstance(answer, dict) else None
        if not isinstance(error, dict):
            error = {"code": "unavailable", "message": f"{endpoint} is not a dovecote dev runtime (it answered "
                                                       f"{response.status_code})"}  # fmt: skip
        raise DovecoteError(
            response.status_code, str(error.get("code")), str(error.get("message")), error.get("details") or {}
        )
    if as_json:
        print_json(answer)
    else:
        out.print(answer["token"], highlight=False, soft_wrap=True)
