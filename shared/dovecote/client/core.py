"""The SDK's client (httpx): one typed method per route (docs/reference/http-api.md), with the same names and fields.
Import it as `from dovecote.client import DovecoteClient` (the package loads this module on first use).

Layout: this module holds the client and its transport; `notes.py`, `tasks.py`, `artifacts.py`
(artifacts, workspace heads, apply receipts, worker events), `recall.py` and `memory.py` are mixins
with the methods of each service, `worker.py` the worker loop, `config.py` how `from_env` finds an
endpoint and a token, `errors.py` the one exception.

Transport rules (what makes a retry safe):
- Every command carries a `command_id`, generated once per call when the caller gives none, and the
  message and submission ids a command carries are derived from it (`derived_id`), so a retry of the
  call is the *same* command and the API replays the original answer instead of running it twice or
  answering `409 idempotency_conflict`.
- A request is retried, with the same body, after a transport error (refused, reset, cut, timed
  out), `429 throttled`, `503 commit_unknown` / `503 unavailable` (and 502/504 from the gateway),
  with exponential backoff and full jitter (or the answer's Retry-After), `max_attempts` in all.
  A request that is not idempotent (minting a token) is retried only when it was never sent or was
  throttled. No other 4xx is ever retried.
- Whatever fails reaches the caller as a `DovecoteError` with a stable code; network failures are
  `unavailable` (status 0), never a raw httpx error.
- Bearer tokens go only to the endpoint: presigned S3 URLs get a separate client without them.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import random
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from dovecote.client.artifacts import ArtifactsMixin
from dovecote.client.config import ClientConfig, resolve
from dovecote.client.errors import BAD_RESPONSE, UNAVAILABLE, DovecoteError
from dovecote.client.memory import MemoryMixin
from dovecote.client.notes import NotesMixin
from dovecote.client.paging import keyset_items, query
from dovecote.client.paths import path
from dovecote.client.recall import RecallMixin
from dovecote.client.streams import StreamsMixin
from dovecote.client.tasks import TasksMixin
from dovecote.client.webhooks import WebhooksMixin

__all__ = ["DovecoteClient", "error_from_response"]  # the package (`dovecote.client`) exports the rest

# Codes of the gateway's own answers, which carry only {"message"}.
GATEWAY_CODES = {401: "unauthenticated", 403: "forbidden", 404: "not_found", 413: "payload_too_large", 429: "throttled"}
LOOPBACK_HOSTS = ("localhost",)


def _is_loopback(endpoint: str) -> bool:
    host = urlsplit(endpoint).hostname or ""
    if host in LOOPBACK_HOSTS:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def _verify(endpoint: str) -> bool | ssl.SSLContext:
    """httpx's default TLS verification for an https endpoint. An http endpoint (`dovecote dev`) gets a
    context that trusts no certificate: loading the CA bundle costs ~50 ms at every client's creation,
    for a client that only ever asks its own http base URL (no redirects are followed), and a TLS
    connection through it would fail, never pass unverified."""
    if urlsplit(endpoint).scheme == "https":
        return True
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def _reason(exc: httpx.TransportError) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectTimeout):
        return "the connection timed out"
    if isinstance(exc, httpx.ConnectError):
        return "connection refused" if "refused" in text.lower() else text
    if isinstance(exc, httpx.TimeoutException):
        return "no answer in time"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return "the connection was cut before the answer"
    return text


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _from_gateway(response: httpx.Response) -> bool:
    """An answer of API Gateway itself ({"message"}), not of a function (the error envelope)."""
    try:
        body = response.json()
    except ValueError:
        return True
    return not (isinstance(body, dict) and isinstance(body.get("error"), dict))


def error_from_response(response: httpx.Response, *, attempts: int = 1, command_id: str | None = None) -> DovecoteError:
    """The error envelope as an exception; the gateway's `{"message"}` answers get a code by status."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("code"):
        return DovecoteError(
            response.status_code,
            str(error.get("code")),
            str(error.get("message", "")),
            error.get("details") if isinstance(error.get("details"), dict) else None,
            attempts=attempts,
            command_id=command_id,
        )
    message = body.get("message") if isinstance(body, dict) else None
    code = GATEWAY_CODES.get(response.status_code, "unavailable" if response.status_code >= 502 else "http_error")
    return DovecoteError(
        response.status_code,
        code,
        str(message or response.text[:300] or response.reason_phrase),
        attempts=attempts,
        command_id=command_id,
    )


class DovecoteClient(NotesMixin, TasksMixin, StreamsMixin, ArtifactsMixin, RecallMixin, MemoryMixin, WebhooksMixin):
    """A client of one endpoint with one token. Thread-safe: the worker loop heartbeats from a
    background thread over the same client while a handler runs commands."""

    def __init__(
        self,
        endpoint: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        max_attempts: int = 5,
        backoff: float = 0.2,
        max_backoff: float = 5.0,
        transport: httpx.BaseTransport | None = None,
        event_hooks: dict[str, list[Any]] | None = None,
        source: str = "",
        stream_endpoint: str | None = None,
    ) -> None:
        """`max_attempts` bounds the attempts of one call (1 turns retries off); the pause before
        attempt n+1 is a random share of min(max_backoff, backoff * 2**(n-1)). `transport` goes to
        httpx for the API and the presigned URLs, `event_hooks` for the API only (tests count or
        alter requests with them). `source` names where
        the endpoint came from, for error messages. `stream_endpoint`: where task streams are served
        (the cloud's streaming front, the stack's StreamEndpoint output; DOVECOTE_STREAM_ENDPOINT for
        `from_env`); by default the endpoint itself, as `dovecote dev` serves both on one port."""
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._token = token or ""
        self.endpoint = endpoint.rstrip("/")
        self.stream_endpoint = (stream_endpoint or os.environ.get("DOVECOTE_STREAM_ENDPOINT") or endpoint).rstrip("/")
        self.source = source
        self.max_attempts = max_attempts
        self._backoff = (backoff, max_backoff)
        self._http = httpx.Client(
            base_url=self.endpoint,
            headers=headers,
            timeout=timeout,
            transport=transport,
            event_hooks=event_hooks,
            verify=_verify(self.endpoint),
        )
        self._transport = transport
        self._blobs: httpx.Client | None = None
        # Where `from_env` found the endpoint and token (None for a client built by hand): what
        # `dovecote whoami` prints, and what a refused token or a token of the wrong role is blamed on.
        self.config: ClientConfig | None = None

    @classmethod
    def from_env(
        cls, role: str = "caller", tokens_file: Path | None = None, *, profile: str | None = None, **options: Any
    ) -> DovecoteClient:
        """The endpoint and the token of `role` as the CLI and the MCP server find them
        (`dovecote.client.config`): `profile` (or `tokens_file`) when given; DOVECOTE_ENDPOINT and
        DOVECOTE_TOKEN (or DOVECOTE_TOKENS_FILE); the DOVECOTE_PROFILE or `default` profile of
        `~/.config/dovecote/config.toml`; the nearest `.dovecote/dev-tokens.json` up from the working
        directory (one you own that no one else can write); the `dev` profile. Endpoint and token
        always come from the same place. Raises a `DovecoteError` with code `configuration` that
        says where it looked, or why a tokens file or half of the environment was not used."""
        config: ClientConfig = resolve(role, tokens_file, profile=profile)
        client = cls(config.endpoint, config.token, source=config.source, **options)
        client.config = config
        return client

    @property
    def settings(self) -> str:
        """Where the endpoint and the token came from: `the environment (…)`, `profile NAME in PATH`,
        `file PATH`, or the `source` a client built by hand was given."""
        return self.config.settings if self.config is not None else self.source

    @property
    def token_source(self) -> str:
        return self.config.token_source if self.config is not None else self.source

    def close(self) -> None:
        self._http.close()
        if self._blobs is not None:
            self._blobs.close()

    def __enter__(self) -> DovecoteClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def derived_id(self, prefix: str, *parts: object) -> str:
        """A command (or message, submission) id that is the same every time for the same parts,
        across restarts, yet unguessable without this client's token. Command ids share one
        namespace per authority, so guessable ids (`echo.t1.1.accept`) would let anyone in the
        authority take a worker's id first and block its command."""
        material = "\x1f".join(str(p) for p in parts).encode("utf-8")
        digest = hmac.new(self._token.encode("utf-8"), material, hashlib.sha256).hexdigest()[:32]
        return f"{prefix}-{digest}"

    # ---- transport ----------------------------------------------------------------------------

    def _pause(self, attempt: int, retry_after: float | None = None) -> None:
        base, cap = self._backoff
        if retry_after is not None:
            time.sleep(min(retry_after, 20.0))
            return
        time.sleep(random.uniform(0, min(cap, base * 2 ** (attempt - 1))))

    def unreachable(
        self, exc: httpx.TransportError, *, attempts: int = 1, command_id: str | None = None
    ) -> DovecoteError:
        """A transport failure as a one-sentence `unavailable` error that names the endpoint."""
        reason = _reason(exc)
        where = self.endpoint
        if self.source and self.source != "DOVECOTE_ENDPOINT":
            where += f" (from {self.source})"
        message = f"cannot reach Dovecote at {where}: {reason}"
        if isinstance(exc, httpx.ConnectError) and _is_loopback(self.endpoint):
            message += "; is `make dev` running?"
        return DovecoteError(
            0,
            UNAVAILABLE,
            message,
            {"endpoint": self.endpoint, "reason": reason},
            attempts=attempts,
            command_id=command_id,
        )

    def send(
        self,
        method: str,
        path: str,
        *,
        idempotent: bool = True,
        command_id: str | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """One call with the retry policy; the 2xx response, or a `DovecoteError`."""
        attempt = 0
        request_timeout: Any = httpx.USE_CLIENT_DEFAULT if timeout is None else timeout
        while True:
            attempt += 1
            try:
                response = self._http.request(method, path, timeout=request_timeout, **kwargs)
            except httpx.TransportError as exc:
                never_sent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
                if attempt < self.max_attempts and (idempotent or never_sent):
                    self._pause(attempt)
                    continue
                raise self.unreachable(exc, attempts=attempt, command_id=command_id) from exc
            if response.status_code < 400:
                return response
            status = response.status_code
            retry = status == 429 or (idempotent and status in (502, 503, 504))
            if retry and attempt < self.max_attempts:
                self._pause(attempt, _retry_after(response))
                continue
            error = error_from_response(response, attempts=attempt, command_id=command_id)
            if status in (401, 403) and _from_gateway(response):
                raise self._refused(error)
            raise self._wrong_role(error) if status == 403 else error

    def _stream_error(self, response: httpx.Response, attempts: int) -> DovecoteError:
        """A stream's refusal (status < 500, read in full) as `send` raises it."""
        error = error_from_response(response, attempts=attempts)
        if response.status_code in (401, 403) and _from_gateway(response):
            return self._refused(error)
        return self._wrong_role(error) if response.status_code == 403 else error

    def _refused(self, error: DovecoteError) -> DovecoteError:
        """The gateway's own 401/403 (its authorizer ran before any function: {"message"} only) says
        what was refused and where the token came from, instead of a bare "Forbidden"."""
        where = f" (the token from {self.token_source})" if self.token_source else ""
        if error.status == 401:
            error.message = f"the gateway wants a token and got none{where}: {error.message}"
        else:
            error.message = (
                f"the token was refused{where}: it is unknown, expired or revoked, or not for this "
                f"endpoint ({self.endpoint}); the gateway said {error.message!r}"
            )
        error.args = (f"{error.status} {error.code}: {error.message}",)
        return error

    def _wrong_role(self, error: DovecoteError) -> DovecoteError:
        """A function's `role 'caller' may not run this command` says which role the command needs,
        whose token was sent, and (when the configuration had no token of that role) how to add one."""
        role, allowed = error.details.get("role"), error.details.get("allowed")
        if error.code != "forbidden" or not isinstance(role, str) or not isinstance(allowed, list) or not allowed:
            return error
        needed = " or ".join(str(name) for name in allowed)
        whose = f"the token from {self.token_source}" if self.token_source else "this token"
        error.message += f": this command needs a {needed} token; {whose} is a {role} token"
        if self.config is not None and self.config.role_hint:
            error.message += f" ({self.config.role_hint})"
        error.args = (f"{error.status} {error.code}: {error.message}",)
        return error

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """`send`, then the JSON answer (None for 204 or an empty body)."""
        response = self.send(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise DovecoteError(
                response.status_code, BAD_RESPONSE, f"the answer to {method} {path} is not JSON"
            ) from None

    def blob_client(self) -> httpx.Client:
        """The client for presigned S3 URLs: no bearer token, long timeouts for large bodies."""
        if self._blobs is None:
            self._blobs = httpx.Client(timeout=httpx.Timeout(300.0, connect=10.0), transport=self._transport)
        return self._blobs

    # ---- meta and tokens ----------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """`GET /v1/health`: {status, version}; needs no token."""
        return dict(self.request("GET", "/v1/health"))

    def whoami(self) -> dict[str, Any]:
        """`GET /v1/whoami`: the principal of this client's token, {authority, role, worker?, agent?,
        token_id, expires_at}. Any valid token; a refused one is `forbidden` (the authorizer's log
        says why)."""
        return dict(self.request("GET", "/v1/whoami"))

    def create_token(
        self,
        authority: str,
        role: str,
        worker: str | None = None,
        *,
        agent: str | None = None,
        expires_in_days: int | None = None,
    ) -> dict[str, Any]:
        """Mint a token (admin). The answer holds the token once; only its hash is stored. Not
        idempotent: retried only when the request was never sent or was throttled."""
        body: dict[str, Any] = {"authority": authority, "role": role}
        for name, value in (("worker", worker), ("agent", agent), ("expires_in_days", expires_in_days)):
            if value is not None:
                body[name] = value
        return dict(self.request("POST", "/v1/admin/tokens", json=body, idempotent=False))

    def list_tokens(self, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        """One page of the authority's tokens, newest first (admin): ids and claims, never secrets."""
        return dict(self.request("GET", "/v1/admin/tokens", params=query(limit=limit, cursor=cursor)))

    def iter_tokens(self) -> Iterator[dict[str, Any]]:
        return keyset_items(lambda cursor: self.list_tokens(cursor=cursor))

    def revoke_token(self, token_id: str) -> None:
        """Revoke a token of the authority (admin). Effective once the authorizer cache expires."""
        try:
            self.request("DELETE", path("admin", "tokens", token_id))
        except DovecoteError as exc:
            # A retry after a cut connection finds it already revoked (gone from the table's view).
            if not (exc.status == 404 and exc.attempts > 1):
                raise
