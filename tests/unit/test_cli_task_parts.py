"""The CLI's message table names a part's filename, URL and size, and each message's id (what
`tasks message` takes); the JSON output is the API's own."""

from __future__ import annotations

import pytest

from dovecote.cli.tasks import MESSAGE_COLUMNS


def test_the_message_table_shows_a_url_part_and_a_filename() -> None:
    text = dict(MESSAGE_COLUMNS)["text"]
    message = {
        "parts": [
            {"media_type": "text/plain", "text": "see", "filename": "a.txt"},
            {"media_type": "image/png", "url": "https://example.com/p.png", "filename": "p.png"},
            {"media_type": "application/pdf", "data_b64": "JVBERi0=", "filename": "r.pdf"},
            {"media_type": "text/plain", "sha256": "a" * 64, "size": 9000, "download_url": "https://s3/x"},
        ]
    }
    assert text(message) == (
        "see <p.png, image/png at https://example.com/p.png> <r.pdf, application/pdf, 5 bytes> <text/plain, 9000 bytes>"
    )


def test_a_parts_size_is_its_bytes_whatever_its_padding() -> None:
    import base64

    text = dict(MESSAGE_COLUMNS)["text"]
    for size in range(7):
        data = base64.b64encode(b"x" * size).decode()
        part = {"media_type": "application/octet-stream", "data_b64": data}
        assert text({"parts": [part]}) == f"<application/octet-stream, {size} bytes>"


def test_the_message_table_shows_each_messages_id() -> None:
    assert dict(MESSAGE_COLUMNS)["id"]({"id": "m-1", "parts": []}) == "m-1"


def test_one_message_shows_its_parts_as_the_table_does_and_json_as_the_api(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from dovecote.cli.tasks import ShowMessage

    message = {
        "id": "m-1",
        "sequence": 2,
        "author": "agent",
        "parts": [
            {"media_type": "text/markdown", "text": "# Why?\n"},
            {"media_type": "application/pdf", "data_b64": "JVBERi0=", "filename": "r.pdf"},
        ],
    }
    ShowMessage("message").print(message, {}, False)
    shown = capsys.readouterr().out
    assert "# Why?\n<r.pdf, application/pdf, 5 bytes>" in shown and "JVBERi0=" not in shown
    ShowMessage("message").print(message, {}, True)
    assert json.loads(capsys.readouterr().out) == {"message": message}
