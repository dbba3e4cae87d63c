"""What the CLI prints of text an agent wrote (dovecote/cli/common.py): tables and field views show
it literally, never as rich markup and never as terminal control sequences."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from dovecote.cli import common

HOSTILE = "[red]x[/red] [link=https://evil.example]y[/link] \x1b[31mred\x1b[0m \x07bell"


@pytest.fixture
def printed(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    buffer = io.StringIO()
    monkeypatch.setattr(common, "out", Console(file=buffer, width=400, force_terminal=True, color_system=None))
    return buffer


def test_a_table_cell_is_shown_literally(printed: io.StringIO) -> None:
    common.print_table([{"text": HOSTILE}], common.fields("text"))
    text = printed.getvalue()
    assert "[red]x[/red]" in text and "[link=https://evil.example]y[/link]" in text
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b[31mred\\x1b[0m" in text and "\\x07bell" in text


def test_a_field_is_shown_literally_with_its_newlines(printed: io.StringIO) -> None:
    common.print_fields({"message": {"text": HOSTILE + "\nsecond line"}})
    text = printed.getvalue()
    assert "[red]x[/red]" in text and "\x1b" not in text and "\\x1b[31m" in text
    assert "second line" in text.split("\n")[1]


def test_a_webhook_line_says_where_it_is_not_what_it_sent() -> None:
    """`delivered` is the webhook's cursor: a webhook added after five events that sent nothing is at
    event 5; the line does not claim five deliveries."""
    from dovecote.cli.webhooks import _line

    line = _line({"id": "h1", "url": "https://example.com/x", "delivered": 5})
    assert line == "h1  https://example.com/x  at event 5" and "delivered" not in line
    failed = _line({"id": "h1", "url": "u", "delivered": 5, "last_failure": {"status": 503, "reason": "busy"}})
    assert failed.endswith("at event 5  last failure: 503 busy")
