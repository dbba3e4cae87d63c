"""What the functions log about a request path, in the cloud (issue 15 item 5). The handlers write
through one Powertools Logger (JSON, one object per line) and log nothing about the path itself; a
path can reach a log line only inside an error, the `unhandled error` record of an exception whose
text carries it. Run through the real entry point (`lambda_entry` over `new_resolver`):
- a path holding a control character is refused (404) before any handler runs, and logs nothing;
- hostile text that does reach a handler's error record is escaped by the JSON encoding: one line,
  no raw control byte, and it reads back exactly.
(The local gateway's own request line is tested over HTTP in tests/e2e/test_request_log.py.)"""

from __future__ import annotations

import io
import json
import logging
import re
import uuid
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from aws_lambda_powertools.event_handler.openapi.params import Query

from dovecote.platform.http import lambda_entry, new_resolver
from dovecote.platform.observability import logger
from tests.support.lambda_events import Context, http_event

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics")
# Raw in a log line, any of these splits it or drives a terminal (U+009B is CSI, U+2028 a line break).
C0 = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
FORGERIES = [
    "\x9b31mred",
    "x\u2028forged line\u2029",
    "x\n11:99:99 GET /v1/FAKE 200",
    "x\r\n11:99:99 GET /v1/FAKE 200",
    "\x1b[31mred\x1b[0m",
    "a\x00b",
    "\x07\x08\x0b\x0c",
]


app = new_resolver()


@app.get("/v1/probe/<name>")
def probe(name: str, note: Annotated[str, Query()] = "") -> dict[str, Any]:
    # Stands for any handler whose failure message carries request text (an id, a filter).
    raise RuntimeError(f"cannot serve {name}: {note}")


handler = lambda_entry(app)


def event(raw_path: str, note: str = "") -> dict[str, Any]:
    return http_event(
        "GET",
        "GET /v1/probe/{name}",
        raw_path,
        queryStringParameters={"note": note} if note else None,
        pathParameters={"name": raw_path.rsplit("/", 1)[-1]},
    )


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """What the functions' logger writes, from its own handler and formatter."""
    stream = io.StringIO()
    handler_ = logger.registered_handler
    assert isinstance(handler_, logging.StreamHandler)
    previous = handler_.setStream(stream)
    try:
        yield stream
    finally:
        handler_.setStream(previous)


@pytest.mark.parametrize("text", FORGERIES)
def test_a_path_with_a_control_character_is_refused_before_any_handler_and_logs_nothing(
    log_lines: io.StringIO, text: str
) -> None:
    answer = handler(event(f"/v1/probe/{text}"), Context())
    assert answer["statusCode"] == 404
    assert json.loads(answer["body"])["error"]["code"] == "not_found"
    assert "cannot serve" not in log_lines.getvalue()
    assert not C0.search(log_lines.getvalue().replace("\n", ""))


@pytest.mark.parametrize("text", FORGERIES)
def test_hostile_text_in_an_error_record_is_one_json_line_that_reads_back(log_lines: io.StringIO, text: str) -> None:
    marker = uuid.uuid4().hex
    answer = handler(event(f"/v1/probe/{marker}", note=text), Context())
    assert answer["statusCode"] == 500  # the probe's failure: the record below is what it logs
    written = log_lines.getvalue()
    assert written.endswith("\n")
    lines = [line for line in written.split("\n") if marker in line]
    assert len(lines) == 1, written
    assert not C0.search(lines[0]), lines[0]
    record = json.loads(lines[0])
    assert record["message"] == "unhandled error"
    assert f"cannot serve {marker}: {text}" in record["exception"]


def test_the_logger_escapes_the_same_text_given_as_a_field(log_lines: io.StringIO) -> None:
    for text in FORGERIES:
        logger.info("probe", extra={"path": f"/v1/tasks/{text}"})
    lines = log_lines.getvalue().rstrip("\n").split("\n")
    assert len(lines) == len(FORGERIES)
    for line, text in zip(lines, FORGERIES, strict=True):
        assert not C0.search(line)
        assert json.loads(line)["path"] == f"/v1/tasks/{text}"
