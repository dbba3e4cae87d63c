"""Where a client finds its endpoint and token: DOVECOTE_ENDPOINT / DOVECOTE_TOKEN, else the dev
tokens file that `dovecote dev` writes (`.dovecote/dev-tokens.json` in the working directory, or
DOVECOTE_TOKENS_FILE). Every failure names what was looked at, in one sentence."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from dovecote.client.errors import CONFIGURATION, DovecoteError

DEV_TOKENS_FILE = Path(".dovecote/dev-tokens.json")


@dataclass(frozen=True)
class ClientConfig:
    endpoint: str
    token: str
    source: str  # what the endpoint came from, for messages: "DOVECOTE_ENDPOINT" or the file path


def tokens_file_path(tokens_file: Path | None = None) -> Path:
    if tokens_file is not None:
        return tokens_file
    named = os.environ.get("DOVECOTE_TOKENS_FILE")
    return Path(named) if named else DEV_TOKENS_FILE


def resolve(role: str = "caller", tokens_file: Path | None = None) -> ClientConfig:
    path = tokens_file_path(tokens_file)
    endpoint = os.environ.get("DOVECOTE_ENDPOINT") or ""
    token = os.environ.get("DOVECOTE_TOKEN") or ""
    source = "DOVECOTE_ENDPOINT" if endpoint else ""
    if endpoint and token:
        return ClientConfig(endpoint, token, source)
    if not path.is_file():
        where = f"{path.absolute()} (written by `make dev`)"
        if endpoint:
            raise DovecoteError(
                0, CONFIGURATION, f"DOVECOTE_ENDPOINT is set but DOVECOTE_TOKEN is not, and there is no {where}"
            )
        raise DovecoteError(
            0,
            CONFIGURATION,
            "no Dovecote configuration: set DOVECOTE_ENDPOINT and DOVECOTE_TOKEN, or run `make dev`, which "
            f"writes {path.absolute()} (looked there; DOVECOTE_TOKENS_FILE names another file)",
            {"tokens_file": str(path.absolute())},
        )
    try:
        dev = json.loads(path.read_text())
        file_endpoint = str(dev["endpoint"])
        file_token = str(dev["tokens"][role])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        reason = (
            f"names no endpoint or no {role} token"
            if isinstance(exc, KeyError | TypeError)
            else f"cannot be read ({exc})"
        )
        raise DovecoteError(
            0, CONFIGURATION, f"the tokens file {path} {reason}: run `make dev` again, or set DOVECOTE_TOKEN"
        ) from None
    if not endpoint:
        endpoint, source = file_endpoint, str(path)
    return ClientConfig(endpoint, token or file_token, source)
