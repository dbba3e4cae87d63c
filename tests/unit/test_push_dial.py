"""The pinned POST (dovecote/push/dial.py) against real loopback receivers: it dials the checked
address whatever the URL's name, follows no redirect, reads a bounded part of the answer, gives up at
its timeout, and reads Retry-After. And the redrive of dead letters (dovecote/push/service.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from dovecote.platform.errors import Forbidden
from dovecote.platform.principal import Principal
from dovecote.push.addresses import Target
from dovecote.push.dial import PinnedPoster
from dovecote.push.memory import MemoryConfigStore, MemoryQueue, MemoryTasks
from dovecote.push.model import Notice
from dovecote.push.service import PushService

SEEN: list[dict[str, str]] = []


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        SEEN.append({k.lower(): v for k, v in self.headers.items()})
        if self.path == "/slow":
            time.sleep(2)
        if self.path == "/redirect":
            return self._empty(302, "Location", "http://127.0.0.1:9/elsewhere")
        if self.path == "/busy":
            return self._empty(503, "Retry-After", "120")
        body = b"x" * (1 << 20)  # a megabyte the sender must not read
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass  # the sender closed after its bounded read

    def _empty(self, status: int, header: str, value: str) -> None:
        """An answer with no body and one header."""
        self.send_response(status)
        self.send_header(header, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def target(port: int, path: str) -> Target:
    # The URL names a public host; the sender dials the checked (here: loopback) address only.
    return Target(f"http://hooks.example.com:{port}{path}", "http", "hooks.example.com", port, path, ("127.0.0.1",))


def test_it_dials_the_pinned_address_with_the_urls_host(port: int) -> None:
    SEEN.clear()
    answer = PinnedPoster().post(target(port, "/ok"), "127.0.0.1", b"{}", {"webhook-id": "wh_1"})
    assert answer.status == 200 and len(answer.detail) <= 200
    assert SEEN[-1]["host"] == f"hooks.example.com:{port}" and SEEN[-1]["webhook-id"] == "wh_1"


def test_a_redirect_is_an_answer_not_followed(port: int) -> None:
    SEEN.clear()
    answer = PinnedPoster().post(target(port, "/redirect"), "127.0.0.1", b"{}", {})
    assert answer.status == 302 and len(SEEN) == 1


def test_it_reads_retry_after(port: int) -> None:
    assert PinnedPoster().post(target(port, "/busy"), "127.0.0.1", b"{}", {}).retry_after == 120


def test_it_gives_up_at_its_timeout(port: int) -> None:
    started = time.monotonic()
    answer = PinnedPoster(timeout_s=0.5).post(target(port, "/slow"), "127.0.0.1", b"{}", {})
    assert answer.status == 0 and time.monotonic() - started < 1.9


def test_the_answer_is_read_up_to_its_bound(port: int) -> None:
    started = time.monotonic()
    answer = PinnedPoster(read_bound=16).post(target(port, "/big"), "127.0.0.1", b"{}", {})
    assert answer.status == 200 and answer.detail == "x" * 16 and time.monotonic() - started < 5


def test_redrive_sends_this_authoritys_dead_letters_again_and_leaves_the_others() -> None:
    queue = MemoryQueue()
    mine, theirs = Notice("acme", "t1", "w1", 3), Notice("other", "t9", "w9", 1)
    queue.bury(mine)
    queue.bury(theirs)
    service = PushService(MemoryConfigStore(), MemoryTasks(), queue=queue, now=lambda: 1000.0)
    with pytest.raises(Forbidden):
        service.redrive(Principal("acme", "caller"))
    moved = service.redrive(Principal("acme", "admin"))
    assert moved == {"moved": 1, "notifications": [{"task_id": "t1", "webhook_id": "w1", "sequence": 3}]}
    (again,) = queue.sent
    assert (again.authority, again.task, again.config, again.sequence) == ("acme", "t1", "w1", 3)
    assert again.redrive and again.deduplication_id != mine.deduplication_id  # not dropped as a duplicate
    assert [n for n, _ in queue.letters] == [theirs]
