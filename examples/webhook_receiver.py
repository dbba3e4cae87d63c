"""A webhook receiver for Dovecote's push notifications (docs/guides/webhooks.md): it verifies each
notification's Standard Webhooks signature (`webhook-signature: v1a,<base64 Ed25519>` over
"{webhook-id}.{webhook-timestamp}.{body}") against the deployment's JWKS, refuses a timestamp more
than five minutes off, and handles each `webhook-id` once (a retry carries the same id), then
prints the A2A StreamResponse it got.

    .venv/bin/python examples/webhook_receiver.py --port 8790
    # then register it (dovecote dev --allow-loopback-webhooks lets a webhook be plain http to loopback):
    .venv/bin/dovecote tasks webhooks add TASK_ID http://127.0.0.1:8790/hook --token my-check

It answers 2xx for a notification it verified (or saw before), 401 for one it could not verify, and
re-reads the JWKS once when a signature matches no key it holds (a key rotation). The ids it has
seen are kept in memory here; a real receiver keeps them as long as a retry may come (hours: the
sender retries for up to about 5.4 hours) in its own store, next to what it does with them.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

TOLERANCE_S = 300  # Standard Webhooks' advice: refuse a timestamp more than five minutes off


class Verifier:
    """Verifies notifications against the JWKS at `jwks_url`, fetched on first use and again when a
    signature matches none of the keys held."""

    def __init__(self, jwks_url: str, *, fetch: Callable[[str], dict[str, Any]] | None = None) -> None:
        self.jwks_url = jwks_url
        self._fetch = fetch or (lambda url: httpx.get(url, timeout=10).raise_for_status().json())
        self._keys: list[Ed25519PublicKey] = []
        self._lock = threading.Lock()

    def _load(self) -> None:
        keys = []
        for jwk in self._fetch(self.jwks_url).get("keys", []):
            if jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519":
                keys.append(Ed25519PublicKey.from_public_bytes(base64.urlsafe_b64decode(jwk["x"] + "==")))
        self._keys = keys

    def verify(self, headers: dict[str, str], body: bytes, now: float | None = None) -> bool:
        """Whether the notification is Dovecote's, unaltered, and recent."""
        headers = {k.lower(): v for k, v in headers.items()}
        webhook_id, stamp = headers.get("webhook-id", ""), headers.get("webhook-timestamp", "")
        signatures = headers.get("webhook-signature", "").split(" ")
        if not webhook_id or not stamp.isdigit() or abs((now or time.time()) - int(stamp)) > TOLERANCE_S:
            return False
        message = f"{webhook_id}.{stamp}.".encode() + body
        for attempt in range(2):
            with self._lock:
                if attempt or not self._keys:
                    self._load()
                keys = list(self._keys)
            for signature in signatures:
                version, _, value = signature.partition(",")
                if version != "v1a":
                    continue
                try:
                    raw = base64.b64decode(value, validate=True)
                except ValueError:
                    continue
                for key in keys:
                    try:
                        key.verify(raw, message)
                        return True
                    except InvalidSignature:
                        continue
        return False


class Receiver:
    """Verified notifications, each webhook-id handled once."""

    def __init__(self, verifier: Verifier, token: str = "", handle: Callable[[str, Any], None] | None = None) -> None:
        self.verifier, self.token = verifier, token
        self.handle = handle or (lambda webhook_id, update: print(webhook_id, json.dumps(update), flush=True))
        self.seen: set[str] = set()
        self._lock = threading.Lock()

    def receive(self, headers: dict[str, str], body: bytes) -> int:
        """The status to answer."""
        lower = {k.lower(): v for k, v in headers.items()}
        if self.token and lower.get("x-a2a-notification-token") != self.token:
            return 401
        if not self.verifier.verify(lower, body):
            return 401
        webhook_id = lower["webhook-id"]
        with self._lock:
            if webhook_id in self.seen:
                return 200  # a retry of one already handled: acknowledge it, do nothing
            self.seen.add(webhook_id)
        self.handle(webhook_id, json.loads(body))
        return 200


def serve(receiver: Receiver, port: int, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            size = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(size, 8 * 1024 * 1024))
            self.send_response(receiver.receive(dict(self.headers.items()), body))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    return ThreadingHTTPServer((host, port), Handler)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8790)
    parser.add_argument("--endpoint", default="", help="the deployment (default: the CLI's, e.g. dovecote dev's)")
    parser.add_argument("--token", default="", help="the X-A2A-Notification-Token the webhook was registered with")
    args = parser.parse_args()
    endpoint = args.endpoint
    if not endpoint:
        from dovecote.client import DovecoteClient

        endpoint = DovecoteClient.from_env().endpoint
    server = serve(Receiver(Verifier(endpoint.rstrip("/") + "/.well-known/jwks.json"), args.token), args.port)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/hook", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
