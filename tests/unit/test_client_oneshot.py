"""The CLI's one-connection-per-request transport (dovecote.client.oneshot) against a real local HTTP
server: what it sends and reads is what httpx's own transport sends and reads, and every failure is the
httpx exception the SDK's retries and messages expect. Also the CLI's exit without teardown."""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from dovecote.client import DovecoteClient, DovecoteError
from dovecote.client.oneshot import OneShotTransport


class Echo(BaseHTTPRequestHandler):
    """Answers every request with what it received: method, path, headers, body (de-chunked)."""

    protocol_version = "HTTP/1.1"

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _answer(self) -> None:
        body = self._body()
        if self.path.startswith("/gzip"):
            payload = gzip.compress(b"squeezed " * 1000)
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        document = json.dumps(
            {
                "method": self.command,
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body.decode("latin-1"),
            }
        ).encode()
        self.send_response(201 if self.command == "POST" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Set-Cookie", "a=1")
        self.send_header("Set-Cookie", "b=2")
        self.send_header("Content-Length", str(len(document)))
        self.end_headers()
        self.wfile.write(document)

    do_GET = do_POST = do_PUT = do_DELETE = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture()
def http(server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, transport=OneShotTransport(), timeout=5) as client:
        yield client


def test_a_request_arrives_whole(http: httpx.Client) -> None:
    answer = http.post("/v1/tasks/a%2Fb?x=1&y=%20", json={"text": "é"}, headers={"X-Thing": "v"})
    assert answer.status_code == 201
    echoed = answer.json()
    assert echoed["method"] == "POST"
    assert echoed["path"] == "/v1/tasks/a%2Fb?x=1&y=%20"  # the path as encoded, never re-decoded
    assert echoed["headers"]["x-thing"] == "v"
    assert json.loads(echoed["body"].encode("latin-1")) == {"text": "é"}
    assert answer.headers.get_list("set-cookie") == ["a=1", "b=2"]
    assert answer.reason_phrase == "Created"


def test_a_streamed_body_is_chunked_and_arrives_whole(http: httpx.Client) -> None:
    def parts() -> Iterator[bytes]:
        yield b"first,"
        yield b""
        yield b"second"

    echoed = http.put("/blob", content=parts()).json()
    assert echoed["headers"]["transfer-encoding"] == "chunked"
    assert echoed["body"] == "first,second"


def test_a_response_streams_and_is_decoded(http: httpx.Client) -> None:
    with http.stream("GET", "/gzip") as answer:
        text = b"".join(answer.iter_bytes())
    assert text == b"squeezed " * 1000


def test_a_refused_connection_is_a_connect_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: refused
        with httpx.Client(transport=OneShotTransport()) as client, pytest.raises(httpx.ConnectError):
            client.get(f"http://127.0.0.1:{port}/")


def test_a_silent_server_is_a_read_timeout_and_a_cut_is_a_protocol_error() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
        with httpx.Client(transport=OneShotTransport(), timeout=httpx.Timeout(0.3)) as client:
            with pytest.raises(httpx.ReadTimeout):
                client.get(url)

            def cut() -> None:
                conn, _ = listener.accept()  # the timed-out one first
                conn.close()
                conn, _ = listener.accept()
                conn.recv(65536)
                conn.close()

            closer = threading.Thread(target=cut)
            closer.start()
            with pytest.raises(httpx.RemoteProtocolError):
                client.get(url)
            closer.join()


def test_an_unsupported_scheme_is_refused() -> None:
    with httpx.Client(transport=OneShotTransport()) as client, pytest.raises(httpx.UnsupportedProtocol):
        client.get("ftp://127.0.0.1/x")


def test_the_sdk_reports_an_unreachable_endpoint_the_same_way() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        sdk = DovecoteClient(f"http://127.0.0.1:{port}", "dvc_x", transport=OneShotTransport(), max_attempts=1)
        with pytest.raises(DovecoteError) as caught:
            sdk.whoami()
    assert caught.value.code == "unavailable"
    assert "connection refused; is `make dev` running?" in caught.value.message


LEAVE = """
import sys, threading, time
from dovecote.cli import leave
sys.stdout.write("x" * 200000)
if sys.argv[1] == "thread":
    threading.Thread(target=lambda: (time.sleep(0.3), sys.stderr.write("thread done\\n")), daemon=False).start()
    leave(5)
leave(int(sys.argv[1]) if sys.argv[1].isdigit() else sys.argv[1])
"""


@pytest.mark.parametrize(("arg", "code"), [("0", 0), ("3", 3), ("bad thing", 1), ("thread", 5)])
def test_leave_flushes_and_keeps_the_exit_code(arg: str, code: int) -> None:
    done = subprocess.run([sys.executable, "-c", LEAVE, arg], capture_output=True, text=True, timeout=60)
    assert done.returncode == code
    assert done.stdout == "x" * 200000
    if arg == "bad thing":
        assert done.stderr == "bad thing\n"
    if arg == "thread":  # another thread alive: the normal exit, which waits for it
        assert done.stderr == "thread done\n"
