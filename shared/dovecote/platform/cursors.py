"""Opaque, signed cursors. A cursor carries a position, the digest of the filter it was issued
for, and the authority; an HMAC-SHA256 binds them. A cursor that was tampered with, replayed with
another filter, or taken from another authority is `invalid_argument`."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any

from dovecote.platform.errors import InvalidArgument

_VERSION = 1


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class CursorSigner:
    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("cursor key must be at least 16 bytes")
        self._key = key

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()

    def seal(self, *, authority: str, scope: str, position: dict[str, Any]) -> str:
        # The authority is bound through its hash so the cursor does not reveal it.
        body = {
            "v": _VERSION,
            "a": hashlib.sha256(authority.encode()).hexdigest()[:16],
            "s": scope,
            "p": position,
        }
        payload = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
        return _b64(payload) + "." + _b64(self._mac(payload))

    def open(self, cursor: str, *, authority: str, scope: str) -> dict[str, Any]:
        try:
            encoded, _, mac = cursor.partition(".")
            payload = _unb64(encoded)
            valid = hmac.compare_digest(_unb64(mac), self._mac(payload))
        except (ValueError, TypeError):
            valid = False
        if not valid:
            raise InvalidArgument("cursor is malformed or was not issued by this service", field="cursor")
        body = json.loads(payload)
        if body.get("a") != hashlib.sha256(authority.encode()).hexdigest()[:16]:
            raise InvalidArgument("cursor was issued to another authority", field="cursor")
        if body.get("s") != scope:
            raise InvalidArgument("cursor was issued for a different filter", field="cursor")
        position = body.get("p")
        if not isinstance(position, dict):
            raise InvalidArgument("cursor is malformed", field="cursor")
        return position


class LazySigner:
    """A CursorSigner built on first use, so the key fetch (a Secrets Manager call in the cloud) is
    paid by the first list of a container, not by every cold start or command."""

    def __init__(self, signer: CursorSigner | None = None, factory: Callable[[], CursorSigner] | None = None) -> None:
        if signer is None and factory is None:
            raise ValueError("give a signer or a factory")
        self._signer = signer
        self._factory = factory

    def get(self) -> CursorSigner:
        if self._signer is None:
            assert self._factory is not None
            self._signer = self._factory()
        return self._signer
