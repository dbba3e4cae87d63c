"""The `dovecote dev --data` journal: framing, a torn tail after kill -9, which requests are
journaled, and that a replay applies them in journal order through moto's own dispatch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.local.journal import (
    Journal,
    JournalingApp,
    decode_request,
    encode_request,
    frame,
    mutates,
    read_records,
    replay,
)


def written(path: Path, payloads: list[bytes]) -> None:
    journal = Journal(path)
    for payload in payloads:
        journal.append(payload)
    journal.close()


@given(st.lists(st.binary(max_size=300), max_size=20))
def test_records_come_back_in_order(payloads: list[bytes]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "j"
        written(path, payloads)
        assert list(read_records(path)) == payloads


@pytest.mark.parametrize("cut", [1, 4, 7, 8, 9, 20])
def test_a_torn_last_record_is_ignored(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "j"
    written(path, [b"first", b"second"])
    torn = frame(b"x" * 30)[:cut]  # kill -9 halfway through the third append
    with path.open("ab") as handle:
        handle.write(torn)
    assert list(read_records(path)) == [b"first", b"second"]


def test_a_corrupt_record_ends_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "j"
    written(path, [b"first", b"second", b"third"])
    data = bytearray(path.read_bytes())
    data[len(frame(b"first")) + 9] ^= 0xFF  # a flipped byte in the second payload fails its CRC
    path.write_bytes(bytes(data))
    assert list(read_records(path)) == [b"first"]


def test_a_missing_journal_is_empty(tmp_path: Path) -> None:
    assert list(read_records(tmp_path / "absent")) == []


def test_encode_keeps_the_request_and_drops_transfer_encoding() -> None:
    environ = {
        "REQUEST_METHOD": "PUT",
        "PATH_INFO": "/bucket/a b",
        "QUERY_STRING": "X-Amz-Expires=60",
        "RAW_URI": "/bucket/a%20b?X-Amz-Expires=60",
        "HTTP_HOST": "127.0.0.1:1",
        "HTTP_TRANSFER_ENCODING": "chunked",
        "wsgi.input": object(),
    }
    meta, body = decode_request(encode_request(environ, b"\x00body\xff"))
    assert body == b"\x00body\xff"
    assert meta == {k: v for k, v in environ.items() if k not in ("HTTP_TRANSFER_ENCODING", "wsgi.input")}


@pytest.mark.parametrize(
    ("environ", "body", "expected"),
    [
        ({"HTTP_X_AMZ_TARGET": "DynamoDB_20120810.PutItem"}, b"{}", True),
        ({"HTTP_X_AMZ_TARGET": "DynamoDB_20120810.TransactWriteItems"}, b"{}", True),
        ({"HTTP_X_AMZ_TARGET": "DynamoDB_20120810.Query"}, b"{}", False),
        ({"HTTP_X_AMZ_TARGET": "DynamoDB_20120810.TransactGetItems"}, b"{}", False),
        ({"HTTP_X_AMZ_TARGET": "AmazonSQS.ReceiveMessage"}, b"{}", False),
        ({"HTTP_X_AMZ_TARGET": "AmazonSQS.DeleteMessageBatch"}, b"{}", True),
        ({"HTTP_X_AMZ_TARGET": "TrentService.GenerateDataKey"}, b"{}", False),
        ({"HTTP_X_AMZ_TARGET": "TrentService.CreateKey"}, b"{}", True),
        ({"CONTENT_TYPE": "application/x-www-form-urlencoded", "REQUEST_METHOD": "POST"}, b"Action=SendMessage", True),
        ({"CONTENT_TYPE": "application/x-www-form-urlencoded", "REQUEST_METHOD": "POST"}, b"Action=GetQueueUrl", False),
        ({"REQUEST_METHOD": "PUT"}, b"object", True),
        ({"REQUEST_METHOD": "DELETE"}, b"", True),
        ({"REQUEST_METHOD": "GET"}, b"", False),
        ({"REQUEST_METHOD": "HEAD"}, b"", False),
    ],
)
def test_which_requests_are_journaled(environ: dict[str, Any], body: bytes, expected: bool) -> None:
    assert mutates(environ, body) is expected


def _call(app: Any, method: str, path: str, body: bytes = b"") -> tuple[str, bytes]:
    import io
    import sys

    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "wsgi.input": io.BytesIO(body),
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.errors": sys.stderr,
        "HTTP_X_ORDER": "kept",
    }
    status: list[str] = []
    chunks = app(environ, lambda s, _h, _e=None: status.append(s))
    return status[0], b"".join(chunks)


class Register:
    """A tiny stateful WSGI app: PUT /k sets k to the body (409 if the body is 'refuse'), GET reads."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}
        self.seen: list[str] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        key = environ["PATH_INFO"]
        if environ["REQUEST_METHOD"] == "GET":
            start_response("200 OK", [])
            return [self.values.get(key, b"")]
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        assert environ["HTTP_X_ORDER"] == "kept"
        if body == b"refuse":
            start_response("409 Conflict", [])
            return [b""]
        self.values[key] = body
        self.seen.append(f"{key}={body.decode()}")
        start_response("200 OK", [])
        return [b""]


def test_journal_then_replay_gives_the_same_state_in_the_same_order(tmp_path: Path) -> None:
    live = Register()
    app = JournalingApp(live)
    assert _call(app, "PUT", "/a", b"0")[0] == "200 OK"  # before a journal is opened: not journaled
    app.journal = Journal(tmp_path / "j")
    for key, value in [("/a", b"1"), ("/b", b"2"), ("/a", b"3"), ("/c", b"refuse"), ("/b", b"4")]:
        _call(app, "PUT", key, value)
    assert _call(app, "GET", "/a") == ("200 OK", b"3")
    app.journal.close()
    records = list(read_records(tmp_path / "j"))
    assert len(records) == 4  # the refused write and the read are not journaled
    restored = Register()
    assert replay(restored, records) == (4, 0)
    assert restored.seen == ["/a=1", "/b=2", "/a=3", "/b=4"]
    assert restored.values == {"/a": b"3", "/b": b"4"}


def test_replay_counts_refusals(tmp_path: Path) -> None:
    payloads = [
        encode_request({"REQUEST_METHOD": "PUT", "PATH_INFO": "/a", "HTTP_X_ORDER": "kept"}, body)
        for body in (b"1", b"refuse", b"2")
    ]
    restored = Register()
    assert replay(restored, payloads) == (3, 1)
    assert restored.values == {"/a": b"2"}


def test_a_journal_record_is_json_head_and_raw_body() -> None:
    payload = encode_request({"REQUEST_METHOD": "POST", "PATH_INFO": "/"}, b"{}")
    meta, body = decode_request(payload)
    assert json.dumps(meta) and body == b"{}"


def test_a_write_after_the_final_compaction_is_refused_not_lost(tmp_path: Path) -> None:
    live = Register()
    app = JournalingApp(live)
    app.closed = True  # DataDir.close: the last snapshot is written, the journal is gone
    assert _call(app, "PUT", "/a", b"1")[0].startswith("503")
    assert live.values == {}
    assert _call(app, "GET", "/a") == ("200 OK", b"")  # reads still answer
