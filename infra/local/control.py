"""`dovecote dev token`: the local runtime mints a token of any authority (a second authority to try
isolation, a worker of another team), so no one needs the AWS endpoint of its moto.

An admin token mints only inside its own authority, and `tokens bootstrap` needs AWS credentials
and the tokens table's endpoint: locally that was moto's port, never printed. Instead the runtime
serves one extra route, in front of the API Gateway emulator, that exists only here:

    POST /_dev/tokens   {"authority", "role", "worker"?, "agent"?, "expires_in_days"?}
    X-Dovecote-Dev-Control: <secret>

- the route is not in the route table (infra/routes.py): CDK never builds it, and the runtime's
  gateway never sees the request;
- only a loopback peer may call it (`--host 0.0.0.0` does not open it to the network);
- the secret is random, kept 0600 in `--data DIR` and written, with the endpoint, to the tokens file
  (0600) the CLI already reads: whoever can read the dev tokens can mint, no one else.

The token goes through the same gate as every mint (`TokenService.mint`, minted_by `bootstrap`): a
bad authority or role is `400 invalid_argument` and stores nothing. The answer is the minted token
as `tokens bootstrap` prints it; the log line names the token id, never the token.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dovecote.admin.model import MintedToken

PATH = "/_dev/tokens"
PREFIX = "/_dev/"
HEADER = "HTTP_X_DOVECOTE_DEV_CONTROL"  # X-Dovecote-Dev-Control
_MAX_BODY = 16 * 1024
log = logging.getLogger("dovecote-dev")

Mint = Callable[[dict[str, Any]], "MintedToken"]


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _answer(start_response: Callable[..., Any], status: int, body: dict[str, Any]) -> list[bytes]:
    from http import HTTPStatus

    payload = json.dumps(body).encode()
    start_response(
        f"{status} {HTTPStatus(status).phrase}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))],
    )
    return [payload]


def _error(start_response: Callable[..., Any], status: int, code: str, message: str) -> list[bytes]:
    return _answer(start_response, status, {"error": {"code": code, "message": message, "details": {}}})


class LocalControl:
    """WSGI middleware in front of the gateway: `/_dev/…` is answered here, the rest passes."""

    def __init__(self, app: Callable[..., Iterable[bytes]], *, secret: str, mint: Mint) -> None:
        self.app = app
        self._secret = secret.encode()
        self._mint = mint

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", ""))
        if not path.startswith(PREFIX):
            return self.app(environ, start_response)
        if not _loopback(str(environ.get("REMOTE_ADDR", ""))):
            return _error(start_response, 403, "forbidden", "the dev control route answers loopback clients only")
        if path != PATH:
            return _error(start_response, 404, "not_found", "no such dev control route")
        if environ.get("REQUEST_METHOD") != "POST":
            return _error(start_response, 405, "method_not_allowed", "POST only")
        given = str(environ.get(HEADER, "")).encode()
        if not given or not hmac.compare_digest(given, self._secret):
            return _error(start_response, 403, "forbidden", "a dev control secret from the tokens file is required")
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = -1
        if not 0 < length <= _MAX_BODY:
            return _error(start_response, 400, "invalid_argument", "a JSON object body is required")
        try:
            body = json.loads(environ["wsgi.input"].read(length))
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return _error(start_response, 400, "invalid_argument", "the body must be a JSON object")
        from dovecote.platform.errors import DomainError

        try:
            minted = self._mint(body)
        except DomainError as exc:
            return _answer(start_response, exc.status, exc.envelope())
        log.info(
            "dev token minted: authority %s, role %s, token id %s",
            minted.authority,
            minted.role,
            minted.token_id,
        )
        return _answer(start_response, 200, asdict(minted))


def mint_any_authority(expires_in_days: int, *, admin_days: int | None = None) -> Mint:
    """The runtime's mint: the bootstrap path of TokenService (no admin principal), against the
    runtime's own tokens table. Fields are checked by its gate; unknown fields are refused. Without
    `expires_in_days` a token lasts `expires_in_days` days, an admin token `admin_days`."""

    def mint(body: dict[str, Any]) -> MintedToken:
        from dovecote.admin.dynamo import DynamoTokenStore
        from dovecote.admin.model import MintedToken
        from dovecote.admin.service import TokenService
        from dovecote.platform import aws
        from dovecote.platform.errors import InvalidArgument
        from dovecote.platform.settings import get_settings

        unknown = sorted(set(body) - {"authority", "role", "worker", "agent", "expires_in_days"})
        if unknown:
            raise InvalidArgument(f"unknown field {unknown[0]!r}", field=unknown[0])
        for name in ("authority", "role", "worker", "agent"):
            if body.get(name) is not None and not isinstance(body[name], str):
                raise InvalidArgument(f"{name} must be a string", field=name)
        default = admin_days if body.get("role") == "admin" and admin_days is not None else expires_in_days
        days = body.get("expires_in_days", default)
        if not isinstance(days, int) or isinstance(days, bool):
            raise InvalidArgument("expires_in_days must be an integer", field="expires_in_days")
        service = TokenService(DynamoTokenStore(table=get_settings().tokens_table, dynamodb=aws.client("dynamodb")))
        token, record = service.mint(
            None,
            body.get("authority") or "",
            body.get("role") or "caller",
            body.get("worker"),
            agent=body.get("agent"),
            expires_in_days=days,
        )
        return MintedToken.of(token, record)

    return mint
