"""The dev request log cannot be forged through the path (issue 15 item 5). `dovecote dev` writes
one line per request with the path as received, still percent-encoded, and every byte that is not
printable ASCII escaped: a `%0A` forges no line, `%1B[31m` sends no escape code, `%00` writes no
NUL, and neither do the same bytes sent raw in the request line."""

from __future__ import annotations

import re
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import start_dev

# Bytes a log line must never hold raw (a tab would be harmless, but is escaped too).
CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]")


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A runtime of this module's own: its whole log is this module's requests (and start-up)."""
    with start_dev(tmp_path_factory.mktemp("dev-request-log")) as runtime:
        yield runtime


def send(endpoint: str, target: bytes, token: str = "") -> int:
    """A GET with exactly this request target, written on a socket (no client rewrites it)."""
    where = urlsplit(endpoint)
    host, port = where.hostname or "127.0.0.1", where.port or 80
    auth = b"Authorization: Bearer %s\r\n" % token.encode() if token else b""
    request = b"GET %s HTTP/1.1\r\nHost: %s:%d\r\n%sConnection: close\r\n\r\n" % (target, host.encode(), port, auth)
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def lines_with(log: Path, marker: str) -> list[bytes]:
    return [line for line in log.read_bytes().split(b"\n") if marker.encode() in line]


FORGERIES = {
    "newline": b"/v1/tasks/x%0A11:99:99%20GET%20/v1/FAKE%20200",
    "carriage-return": b"/v1/tasks/x%0D%0A11:99:99%20GET%20/v1/FAKE%20200",
    "escape": b"/v1/tasks/%1B[31mred%1B[0m",
    "nul": b"/v1/tasks/a%00b",
    "bell-and-delete": b"/v1/tasks/%07%7F%08",
    "c1-csi": b"/v1/tasks/%C2%9B31m",
    "raw-escape": b"/v1/tasks/\x1b[31mred\x1b[0m",
    "raw-nul": b"/v1/tasks/a\x00b",
    "raw-c1": b"/v1/tasks/\x9b31m",
    "backslash": b"/v1/tasks/a\\x0a",
}


@pytest.mark.parametrize("kind", sorted(FORGERIES))
@pytest.mark.parametrize("role", ["", "caller"])
def test_each_request_is_one_line_with_its_path_as_received_and_escaped(
    dev: dict[str, Any], kind: str, role: str
) -> None:
    marker = f"mark{uuid.uuid4().hex}"
    target = FORGERIES[kind] + marker.encode()
    status = send(dev["endpoint"], target, dev["tokens"][role] if role else "")
    assert 400 <= status < 500
    found = lines_with(dev["log"], marker)
    assert len(found) == 1, found
    line = found[0]
    assert not CONTROL.search(line), line
    assert not re.search(rb"[\x80-\xff]", line), line
    # The path as received: still percent-encoded, raw bytes shown as escapes, `\` doubled.
    shown = (
        target.replace(b"\\", b"\\\\").replace(b"\x1b", b"\\x1b").replace(b"\x00", b"\\x00").replace(b"\x9b", b"\\x9b")
    )
    assert b" GET " + shown + b" " in line, (line, shown)


def test_the_whole_log_has_no_raw_control_bytes_and_no_forged_line(dev: dict[str, Any]) -> None:
    for target in FORGERIES.values():
        send(dev["endpoint"], target, dev["tokens"]["caller"])
    text = dev["log"].read_bytes()
    assert b"GET /v1/tasks/" in text  # the requests were logged
    assert not CONTROL.search(text)
    assert not re.search(rb"(^|\n)11:99:99 GET /v1/FAKE", text)
    assert b"\x00" not in text and b"\x1b" not in text
