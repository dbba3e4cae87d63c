"""A fake of some Dovecote routes behind httpx.MockTransport, for the SDK's worker loop tests."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx


class FakeRoutes:
    """The worker's threads call the transport at once: one request is answered at a time (a
    re-entrant lock, so a hook run while answering may call back). A subclass answers a request with
    its path and its JSON body already read."""

    def __init__(self) -> None:
        self.lock = threading.RLock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self.lock:
            body = json.loads(request.content) if request.content else {}
            return self.answer(request, request.url.path, body)

    def answer(self, request: httpx.Request, path: str, body: dict[str, Any]) -> httpx.Response:
        raise NotImplementedError
