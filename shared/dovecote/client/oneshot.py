"""An httpx transport over the standard library's http.client, one connection per request, for the
short-lived `dovecote` commands.

Why by hand: httpx's own transport imports httpcore and h11 when a client is created (about a tenth of
a `dovecote notes get`), and pools connections that a command sending one or two requests never
reuses. This one imports nothing new (httpx itself already loads http.client and ssl), and keeps
everything the SDK relies on: httpx's Request and Response (hooks, content decoding, streaming), its
TLS settings (`httpx.create_ssl_context`: certifi, or SSL_CERT_FILE / SSL_CERT_DIR), its timeouts and
its exception types, so retries and the "cannot reach" message are the same. Environment proxies stay
with httpx: it mounts its own transports for them in front of this one. Long-lived clients (the
worker loop, the MCP server, `recall push`) keep httpx's pooled transport.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import httpx

CHUNK = 64 * 1024


class _Body(httpx.SyncByteStream):
    """The response body as httpx reads it; closing it closes the connection."""

    def __init__(self, response: http.client.HTTPResponse, connection: http.client.HTTPConnection) -> None:
        self._response = response
        self._connection = connection

    def __iter__(self) -> Iterator[bytes]:
        try:
            # read1: what has arrived (one chunk of a chunked body), so a stream's events come as
            # they are sent (`tasks watch`); read(CHUNK) would wait for 64 KiB or the end.
            while chunk := self._response.read1(CHUNK):
                yield chunk
        except TimeoutError as exc:
            raise httpx.ReadTimeout(str(exc) or "read timed out") from exc
        except (http.client.HTTPException, OSError) as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__) from exc

    def close(self) -> None:
        self._response.close()
        self._connection.close()


class OneShotTransport(httpx.BaseTransport):
    """One http.client connection per request (see the module docstring)."""

    def __init__(self, verify: ssl.SSLContext | bool = True) -> None:
        self._verify = verify
        self._tls: ssl.SSLContext | None = None

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            verify = self._verify
            self._tls = verify if isinstance(verify, ssl.SSLContext) else httpx.create_ssl_context(verify=verify)
        return self._tls

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        timeout: dict[str, float | None] = request.extensions.get("timeout", {})
        connection: http.client.HTTPConnection
        if url.scheme == "https":
            connection = http.client.HTTPSConnection(
                url.host, url.port, timeout=timeout.get("connect"), context=self._context()
            )
        elif url.scheme == "http":
            connection = http.client.HTTPConnection(url.host, url.port, timeout=timeout.get("connect"))
        else:
            raise httpx.UnsupportedProtocol(f"Request URL has an unsupported protocol '{url.scheme}://'.")
        try:
            connection.connect()
        except TimeoutError as exc:
            connection.close()
            raise httpx.ConnectTimeout(str(exc) or "connect timed out") from exc
        except OSError as exc:
            connection.close()
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        try:
            response = self._exchange(connection, request, timeout)
        except BaseException:
            connection.close()
            raise
        return httpx.Response(
            response.status,
            headers=[(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.getheaders()],
            stream=_Body(response, connection),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": response.reason.encode("latin-1")},
        )

    @staticmethod
    def _exchange(
        connection: http.client.HTTPConnection, request: httpx.Request, timeout: dict[str, float | None]
    ) -> http.client.HTTPResponse:
        sock: socket.socket | None = connection.sock
        try:
            if sock is not None:
                sock.settimeout(timeout.get("write"))
            connection.putrequest(request.method, request.url.raw_path.decode("ascii"), True, True)
            for name, value in request.headers.raw:
                connection.putheader(name.decode("latin-1"), value.decode("latin-1"))
            # httpx frames the body: Content-Length, or Transfer-Encoding: chunked for a stream.
            chunked = request.headers.get("transfer-encoding", "").lower() == "chunked"
            connection.endheaders()
            for chunk in request.stream:  # type: ignore[union-attr]
                connection.send(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked and chunk else chunk)
            if chunked:
                connection.send(b"0\r\n\r\n")
        except TimeoutError as exc:
            raise httpx.WriteTimeout(str(exc) or "write timed out") from exc
        except OSError as exc:
            raise httpx.WriteError(str(exc) or type(exc).__name__) from exc
        try:
            if sock is not None:
                sock.settimeout(timeout.get("read"))
            return connection.getresponse()
        except TimeoutError as exc:
            raise httpx.ReadTimeout(str(exc) or "read timed out") from exc
        except http.client.RemoteDisconnected as exc:
            raise httpx.RemoteProtocolError(str(exc) or "the server closed the connection") from exc
        except (http.client.HTTPException, OSError) as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__) from exc

    def close(self) -> None:
        """Nothing is pooled."""


def oneshot_options(**options: Any) -> dict[str, Any]:
    """The client options of a short command: this transport unless the caller gave one."""
    options.setdefault("transport", OneShotTransport())
    return options
