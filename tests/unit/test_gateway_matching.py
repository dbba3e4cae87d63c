"""The local gateway's route matching and request-log text, in process (issue 15 items 1 and 5): the
path is matched as received, segment by segment, so an encoded slash stays in its segment and no dot
segment is ever resolved; the function gets a `rawPath` that splits where the gateway did; a log
line shows any byte sequence as printable ASCII, unambiguously."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.local.gateway import RouteMatcher, event_path, printable, raw_path, raw_target, segments
from infra.routes import ROUTES, Route

MATCHER = RouteMatcher()
VALUES = ["..", ".", "../admin/tokens/x", "%2e%2e", "a/b", "?x=", "#", "\u2024\u2024", "\uff0e\uff0e", "x\ny", "~"]
VARIABLE_ROUTES = [r for r in ROUTES if "{" in r.path]


def test_every_route_variable_is_one_whole_segment_and_none_is_greedy() -> None:
    for route in ROUTES:
        for part in route.path.split("/")[1:]:
            assert re.fullmatch(r"[a-z0-9.-]+|\{[a-z_]+\}", part), (route.path, part)


def fill(route: Route, values: dict[str, str]) -> bytes:
    """The route's path with each variable's value percent-encoded whole, as the SDK sends it."""
    parts = [quote(values[p[1:-1]], safe="") if p.startswith("{") else p for p in route.path.split("/")]
    return "/".join(parts).encode()


@pytest.mark.parametrize("route", VARIABLE_ROUTES, ids=lambda r: f"{r.method} {r.path}")
@pytest.mark.parametrize("value", VALUES)
def test_an_encoded_value_in_any_variable_matches_that_route_with_that_value(route: Route, value: str) -> None:
    names = re.findall(r"\{(\w+)\}", route.path)
    for name in names:
        filled = {n: (value if n == name else "ok-1") for n in names}
        assert MATCHER.match(route.method, segments(fill(route, filled))) == (route, filled)


@pytest.mark.parametrize(
    ("method", "raw"),
    [
        ("DELETE", b"/v1/notes/../admin/tokens/x"),
        ("DELETE", b"/v1/notes/%2e%2e/admin/tokens/x"),
        ("DELETE", b"/v1%2Fadmin%2Ftokens%2Fx"),
        ("DELETE", b"/v1/admin%2Ftokens/x"),
        ("DELETE", b"/v1/admin/tokens/x/.."),
        ("GET", b"/v1/notes/../admin/tokens"),
        ("GET", b"/v1/tasks/t1/snapshot/../events"),
        ("GET", b"/v1/./health"),
        ("GET", b"//v1/health"),
        ("GET", b"/v1/health/"),
        ("GET", b"/v1/notes/"),
    ],
)
def test_nothing_is_normalized_into_a_route(method: str, raw: bytes) -> None:
    assert MATCHER.match(method, segments(raw)) is None


def test_a_dot_segment_in_a_variable_is_only_a_value() -> None:
    route, found = MATCHER.match("GET", segments(b"/v1/notes/..")) or (None, None)
    assert route is not None and route.path == "/v1/notes/{ref}" and found == {"ref": ".."}
    route, found = MATCHER.match("GET", segments(b"/v1/tasks/t1%2Fevents")) or (None, None)
    assert route is not None and route.path == "/v1/tasks/{id}" and found == {"id": "t1/events"}


def test_the_function_splits_its_raw_path_where_the_gateway_did() -> None:
    parts = segments(b"/v1/tasks/t1%2Fevents%25x")
    assert parts == ["v1", "tasks", "t1/events%x"]
    assert event_path(parts) == "/v1/tasks/t1%2Fevents%25x"
    assert event_path(segments(b"/v1/recall/read/ab12cd34~x%3Aef01")) == "/v1/recall/read/ab12cd34~x:ef01"


@given(st.binary(max_size=40))
def test_the_raw_target_is_the_bytes_the_client_sent(sent: bytes) -> None:
    # What werkzeug's server does with a request line: ISO-8859-1, then its UTF-8 "encoding dance".
    raw_uri = sent.decode("iso-8859-1").encode("utf-8").decode("latin-1")
    assert raw_target({"RAW_URI": raw_uri}) == sent


def test_the_path_of_a_target_has_no_query_and_no_fragment() -> None:
    assert raw_path(b"/v1/notes/a%3Fb?x=1#f") == b"/v1/notes/a%3Fb"
    assert raw_path(b"http://host:1/v1/health?x") == b"/v1/health"
    assert raw_target({"PATH_INFO": "/v1/a b", "QUERY_STRING": "x=1"}) == b"/v1/a%20b?x=1"


@given(st.binary(max_size=40))
def test_a_log_text_is_printable_ascii(data: bytes) -> None:
    shown = printable(data)
    assert all(0x20 <= ord(ch) < 0x7F for ch in shown), shown


@given(st.binary(max_size=20), st.binary(max_size=20))
def test_a_log_text_tells_any_two_inputs_apart(first: bytes, second: bytes) -> None:
    if first != second:
        assert printable(first) != printable(second)


def test_the_issue_s_forgeries_are_shown_escaped() -> None:
    assert printable(b"/v1/tasks/x\n11:99:99 GET") == "/v1/tasks/x\\n11:99:99 GET"
    assert printable("\x1b[31m\x00\r\t\\") == "\\x1b[31m\\x00\\r\\t\\\\"
    assert printable(b"%0A%1B%00") == "%0A%1B%00"  # still percent-encoded: as received
