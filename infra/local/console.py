"""`dovecote dev` serves the web console (console/, built by `make install` into console/dist) at
/console/, in front of the API Gateway emulator, as CloudFront serves it in the cloud: the same
files, the same security headers (infra/console.py). The console then calls the API on the same
origin, so its config.json names no API origin.

Only the built files are served, by name, from that one directory (no listing, no path outside it,
no dot file); a missing build answers a page that says how to build it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from infra.console import PREFIX, TYPES, cache_control, security_headers

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "console" / "dist"
NOT_BUILT = (
    "<!doctype html><html lang=en><meta charset=utf-8><title>Dovecote console: not built</title>"
    "<h1>The Dovecote console is not built</h1><p>Its build needs Node.js and npm: install them "
    "(Debian: <code>apt-get install nodejs npm</code>), then run <code>make install</code> and "
    "restart <code>dovecote dev</code>.</p></html>"
)
log = logging.getLogger("dovecote-dev")


def console_url(endpoint: str) -> str:
    return endpoint.rstrip("/") + PREFIX


class ConsoleAssets:
    """WSGI middleware: GET/HEAD under /console/ is answered here, the rest passes."""

    def __init__(self, app: Callable[..., Iterable[bytes]], dist: Path = DIST) -> None:
        self.app = app
        self.dist = dist

    @property
    def built(self) -> bool:
        return (self.dist / "index.html").is_file()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", ""))
        if path == PREFIX.rstrip("/"):
            start_response("308 Permanent Redirect", [("Location", PREFIX), ("Content-Length", "0")])
            return [b""]
        if not path.startswith(PREFIX):
            return self.app(environ, start_response)
        method = environ.get("REQUEST_METHOD")
        if method not in ("GET", "HEAD"):
            return _answer(
                start_response, 405, "text/plain; charset=utf-8", b"GET only\n", extra=[("Allow", "GET, HEAD")]
            )
        name = path[len(PREFIX) :] or "index.html"
        if not self.built:
            return _answer(start_response, 503, TYPES[".html"], NOT_BUILT.encode(), name="index.html")
        file = self._file(name)
        if file is None:
            return _answer(start_response, 404, "application/json", json.dumps({"message": "Not Found"}).encode())
        body = file.read_bytes()
        return _answer(
            start_response, 200, TYPES[file.suffix], b"" if method == "HEAD" else body, name=name, size=len(body)
        )

    def _file(self, name: str) -> Path | None:
        """A built file by its plain name (one segment, a known type), or None."""
        if "/" in name or "\\" in name or name.startswith(".") or Path(name).suffix not in TYPES:
            return None
        candidate = self.dist / name
        return candidate if candidate.is_file() else None


def _answer(
    start_response: Callable[..., Any],
    status: int,
    content_type: str,
    body: bytes,
    *,
    name: str = "",
    size: int | None = None,
    extra: list[tuple[str, str]] | None = None,
) -> list[bytes]:
    from http import HTTPStatus

    headers = [("Content-Type", content_type), ("Content-Length", str(len(body) if size is None else size))]
    headers += list(security_headers().items())
    headers.append(("Cache-Control", cache_control(name) if status == 200 else "no-store"))
    start_response(f"{status} {HTTPStatus(status).phrase}", headers + (extra or []))
    return [body]
