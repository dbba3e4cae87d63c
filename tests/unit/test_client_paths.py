"""Ids stay in their route (issue 15 item 1). Every SDK method that puts an id or a ref in the URL
path is called with hostile strings (`../`, `%2e%2e/`, `?x=`, `#`, `/`, encoded slashes, unicode
dots, control characters, lone surrogates, empty), and a request recorder (httpx.MockTransport under
the SDK's own transport) checks each request against the method's route template in infra/routes.py:
the same method, the same literal segments, the id as exactly one segment that decodes back to it,
no query key the method does not set, and the local gateway's matcher picks that same route. What no
route can carry (a `/`, `.`, `..`, the empty string, a lone surrogate) is refused before sending."""

from __future__ import annotations

import inspect
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dovecote.client import DovecoteClient, DovecoteError
from dovecote.client.artifacts import ARTIFACT_INLINE_SEND
from dovecote.client.paths import path, segment
from infra.local.gateway import RouteMatcher, segments
from infra.routes import ALL_ROUTES, ROUTES, STREAM_ROUTES, Route
from tests.conftest import ROOT, examples

HOSTILE = [
    "../",
    "..",
    ".",
    "",
    "/",
    "%2e%2e/",
    "%2e%2e",
    "%2E%2E%2F",
    "..%2f",
    "%2F",
    "%252F",
    "?x=",
    "?",
    "#",
    "#frag",
    "a/b",
    "../admin/tokens/tok-1",
    "../admin/tokens?",
    "\u2024",  # ONE DOT LEADER
    "\u2024\u2024",
    "\u2025",  # TWO DOT LEADER
    "\uff0e\uff0e",  # FULLWIDTH FULL STOP
    "\uff0e\uff0e\uff0f",  # … and FULLWIDTH SOLIDUS
    "\u2215",  # DIVISION SLASH
    " ",
    "\t",
    "\n",
    "\r\n",
    "\x00",
    "\x1b[31m",
    "\\..\\",
    "~",
    "%",
    "%zz",
    ";x",
    "&a=b",
    "+",
    "\ud800",
    "é",
    "t-1",
]
IDS = st.one_of(
    st.sampled_from(HOSTILE),
    st.lists(st.sampled_from([*HOSTILE, "a", "t", ":", "1"]), min_size=1, max_size=5).map("".join),
    st.text(st.characters(exclude_categories=()), max_size=10),
)
ROUTE_BY_KEY = {f"{r.method} {r.path}": r for r in ROUTES + STREAM_ROUTES}
NOT_FOUND = {"error": {"code": "not_found", "message": "nothing here", "details": {}}}
ARTIFACT = {
    "workspace": "ws",
    "id": "a-1",
    "digest": "sha256:" + "0" * 64,
    "base_revision": "b",
    "result_revision": "r",
}

Call = Callable[[DovecoteClient, dict[str, str]], Any]


@dataclass(frozen=True)
class Case:
    """An SDK method: its route, how to call it with the values of the route's variables, and the
    query keys it may set."""

    name: str
    route: str
    call: Call
    query: frozenset[str] = field(default_factory=frozenset)
    # What the SDK documents it sends for a value (recall spells its level separator `~`).
    spelled: Callable[[str], str] = lambda value: value


def recall(value: str) -> str:
    return value.replace("/", "~")


TASK = "POST /v1/tasks/{id}/"
CASES = [
    Case("revoke_token", "DELETE /v1/admin/tokens/{token_id}", lambda c, v: c.revoke_token(v["token_id"])),
    Case("get_note_meta", "GET /v1/notes/{ref}", lambda c, v: c.get_note_meta(v["ref"])),
    Case("get_note", "GET /v1/notes/{ref}", lambda c, v: c.get_note(v["ref"])),
    Case("download_note", "GET /v1/notes/{ref}", lambda c, v: c.download_note(v["ref"], io.BytesIO())),
    Case("delete_note", "DELETE /v1/notes/{ref}", lambda c, v: c.delete_note(v["ref"])),
    Case("get_task", "GET /v1/tasks/{id}", lambda c, v: c.get_task(v["id"])),
    Case("read_task", "GET /v1/tasks/{id}", lambda c, v: c.read_task(v["id"])),
    Case(
        "context_tasks",
        "GET /v1/contexts/{context}/tasks",
        lambda c, v: c.context_tasks(v["context"], limit=5, cursor="cur"),
        frozenset({"limit", "cursor"}),
    ),
    Case("reply", TASK + "reply", lambda c, v: c.reply(v["id"], 1, "answer")),
    Case("cancel", TASK + "cancel", lambda c, v: c.cancel(v["id"], 1)),
    Case(
        "messages",
        "GET /v1/tasks/{id}/messages",
        lambda c, v: c.messages(v["id"], 3, 10),
        frozenset({"after", "limit"}),
    ),
    Case(
        "message",
        "GET /v1/tasks/{id}/messages/{message_id}",
        lambda c, v: c.message(v["id"], v["message_id"]),
    ),
    Case(
        "iter_messages",
        "GET /v1/tasks/{id}/messages",
        lambda c, v: list(c.iter_messages(v["id"])),
        frozenset({"after"}),
    ),
    Case("events", "GET /v1/tasks/{id}/events", lambda c, v: c.events(v["id"], 3, 10), frozenset({"after", "limit"})),
    Case("iter_events", "GET /v1/tasks/{id}/events", lambda c, v: list(c.iter_events(v["id"])), frozenset({"after"})),
    Case("grants", "GET /v1/tasks/{id}/grants", lambda c, v: c.grants(v["id"], 3, 10), frozenset({"after", "limit"})),
    Case("iter_grants", "GET /v1/tasks/{id}/grants", lambda c, v: list(c.iter_grants(v["id"])), frozenset({"after"})),
    Case("snapshot", "GET /v1/tasks/{id}/snapshot", lambda c, v: c.snapshot(v["id"])),
    Case("wait_for", "GET /v1/tasks/{id}/snapshot", lambda c, v: c.wait_for(v["id"], timeout=1)),
    Case("watch_until", "GET /v1/tasks/{id}/snapshot", lambda c, v: c.watch_until(v["id"], ("completed",), timeout=1)),
    Case("follow", "GET /v1/tasks/{id}/stream", lambda c, v: list(c.follow(v["id"], max_reconnects=0))),
    Case("acquire", TASK + "lease", lambda c, v: c.acquire(v["id"])),
    Case("lease", "GET /v1/tasks/{id}/lease", lambda c, v: c.lease(v["id"])),
    Case("heartbeat", TASK + "lease/heartbeat", lambda c, v: c.heartbeat(v["id"], 1)),
    Case("fence", TASK + "lease/fence", lambda c, v: c.fence(v["id"], 1)),
    Case("release", TASK + "lease/fence", lambda c, v: c.release(v["id"], 1)),
    Case("accept", TASK + "accept", lambda c, v: c.accept(v["id"], 1, 1)),
    Case("reject", TASK + "reject", lambda c, v: c.reject(v["id"], 1, 1)),
    Case("fail", TASK + "fail", lambda c, v: c.fail(v["id"], 1, 1)),
    Case("request_input", TASK + "request-input", lambda c, v: c.request_input(v["id"], 1, 1, "why?")),
    Case("complete", TASK + "complete", lambda c, v: c.complete(v["id"], 1, 1, "done")),
    Case("worker_command", TASK + "accept", lambda c, v: c.worker_command("accept", v["id"], 1, 1)),
    Case(
        "artifact_payload",
        TASK + "artifacts/uploads",
        lambda c, v: c.artifact_payload(v["id"], b"x" * (ARTIFACT_INLINE_SEND + 1), fence=1),
    ),
    Case("freeze_artifact", TASK + "artifacts", lambda c, v: c.freeze_artifact(v["id"], 1, 1, "a-1", "base", "patch")),
    Case(
        "get_artifact",
        "GET /v1/workspaces/{workspace}/artifacts/{artifact_id}",
        lambda c, v: c.get_artifact(v["workspace"], v["artifact_id"]),
    ),
    Case(
        "download_artifact",
        "GET /v1/workspaces/{workspace}/artifacts/{artifact_id}",
        lambda c, v: c.download_artifact(v["workspace"], v["artifact_id"], io.BytesIO()),
    ),
    Case(
        "artifact_bytes",
        "GET /v1/workspaces/{workspace}/artifacts/{artifact_id}",
        lambda c, v: c.artifact_bytes(v["workspace"], v["artifact_id"]),
    ),
    Case("workspace_head", "GET /v1/workspaces/{workspace}/head", lambda c, v: c.workspace_head(v["workspace"])),
    Case(
        "record_receipt",
        "POST /v1/workspaces/{workspace}/artifacts/{artifact_id}/receipt",
        lambda c, v: c.record_receipt(
            v["workspace"], v["artifact_id"], "rejected", artifact_digest="d", base_revision="b", result_revision="r"
        ),
    ),
    Case(
        "receipt_for",
        "POST /v1/workspaces/{workspace}/artifacts/{artifact_id}/receipt",
        lambda c, v: c.receipt_for({**ARTIFACT, "workspace": v["workspace"], "id": v["artifact_id"]}, "success"),
    ),
    Case(
        "get_receipt",
        "GET /v1/workspaces/{workspace}/artifacts/{artifact_id}/receipt",
        lambda c, v: c.get_receipt(v["workspace"], v["artifact_id"]),
    ),
    Case(
        "recall_read",
        "GET /v1/recall/read/{ref}",
        lambda c, v: c.recall_read(v["ref"], budget=500),
        frozenset({"budget"}),
        recall,
    ),
    Case(
        "recall_outline",
        "GET /v1/recall/outline/{session}",
        lambda c, v: c.recall_outline(v["session"]),
        spelled=recall,
    ),
    Case(
        "memory_write", "GET /v1/memory/writes/{id}", lambda c, v: c.memory_write(v["id"], wait=2), frozenset({"wait"})
    ),
    Case(
        "wait_memory_write",
        "GET /v1/memory/writes/{id}",
        lambda c, v: c.wait_memory_write(v["id"], timeout=1),
        frozenset({"wait"}),
    ),
    Case("cancel_memory_write", "DELETE /v1/memory/writes/{id}", lambda c, v: c.cancel_memory_write(v["id"])),
    Case(
        "judge_relation",
        "POST /v1/memory/relations/{id}/judgment",
        lambda c, v: c.judge_relation(v["id"], "confirmed"),
    ),
    Case(
        "add_webhook",
        "POST /v1/tasks/{id}/webhooks",
        lambda c, v: c.add_webhook(v["id"], "https://hooks.example.com/"),
    ),
    Case("list_webhooks", "GET /v1/tasks/{id}/webhooks", lambda c, v: c.list_webhooks(v["id"])),
    Case(
        "get_webhook",
        "GET /v1/tasks/{id}/webhooks/{webhook_id}",
        lambda c, v: c.get_webhook(v["id"], v["webhook_id"]),
    ),
    Case(
        "delete_webhook",
        "DELETE /v1/tasks/{id}/webhooks/{webhook_id}",
        lambda c, v: c.delete_webhook(v["id"], v["webhook_id"]),
    ),
]
# Methods with an id parameter that never reaches the path (with the reason): the property test
# must cover every other public method that takes one.
NOT_IN_A_PATH = {
    "create_task": "the task id and context go in the body",
    "list_tasks": "context is a query filter",
    "iter_tasks": "filters go in the query",
    "submit_memory": "the write id goes in the body",
    "remember": "the write id goes in the body; the status read uses the id the API answered",
    "freeze_event": "a worker event names its task in the body",
    "ingest_messages": "the session id goes in the body",
    "recall_label": "the ref goes in the body",
    "note_ref": "computes a ref; sends nothing",
    "get_note_at": "the ref is a SHA-256 of the coordinates",
    "delete_note_at": "the ref is a SHA-256 of the coordinates",
}
ID_PARAMETERS = {
    "task_id",
    "ref",
    "token_id",
    "workspace",
    "artifact_id",
    "write_id",
    "relation_id",
    "context",
    "session",
}


class Recorder:
    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(404, json=NOT_FOUND)


# One client for every example (building an httpx client costs more than a call); each check
# starts from an empty recording.
RECORDER = Recorder()
CLIENT = DovecoteClient("http://dovecote.test", "dvc_t_secret", transport=httpx.MockTransport(RECORDER), max_attempts=1)


def variables(route: Route) -> list[str]:
    return re.findall(r"\{(\w+)\}", route.path)


def unsendable(value: str) -> bool:
    return value in ("", ".", "..") or "/" in value or any(0xD800 <= ord(ch) <= 0xDFFF for ch in value)


def check(case: Case, values: dict[str, str]) -> None:
    route = ROUTE_BY_KEY[case.route]
    recorder, client = RECORDER, CLIENT
    recorder.requests.clear()
    expected = {name: case.spelled(value) for name, value in values.items()}
    try:
        case.call(client, values)
    except DovecoteError as exc:
        outcome: DovecoteError | None = exc
    else:
        outcome = None
    if any(unsendable(value) for value in expected.values()):
        assert recorder.requests == [], [str(r.url) for r in recorder.requests]
        assert outcome is not None and outcome.status == 0 and outcome.code == "invalid_argument", outcome
        return
    assert len(recorder.requests) == 1, [str(r.url) for r in recorder.requests]
    request = recorder.requests[0]
    assert request.method == route.method
    assert request.url.fragment == ""
    raw = request.url.raw_path.split(b"?", 1)[0]
    sent, template = raw.split(b"/"), route.path.split("/")
    assert len(sent) == len(template), (raw, route.path)
    for got, want in zip(sent, template, strict=True):
        name = want[1:-1] if want.startswith("{") else None
        if name is None:
            assert got.decode("ascii") == want, (raw, route.path)
        else:
            assert got not in (b".", b".."), raw
            assert unquote(got.decode("ascii"), errors="strict") == expected[name], (raw, expected)
    assert set(request.url.params.keys()) <= case.query, request.url
    # The local gateway reads the path as received the same way: this route, these values.
    assert RouteMatcher(ALL_ROUTES + STREAM_ROUTES).match(request.method, segments(raw)) == (route, expected)


SETTINGS = settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@SETTINGS
@given(data=st.data())
def test_every_id_stays_one_segment_of_its_own_route(case: Case, data: st.DataObject) -> None:
    names = variables(ROUTE_BY_KEY[case.route])
    values = {name: data.draw(IDS, label=name) for name in names}
    check(case, values)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_listed_hostile_string_in_every_position(case: Case) -> None:
    names = variables(ROUTE_BY_KEY[case.route])
    for hostile in HOSTILE:
        for name in names:
            check(case, {other: hostile if other == name else "ok-1" for other in names})


def test_every_method_that_takes_an_id_is_covered() -> None:
    covered = {case.name for case in CASES}
    missing = []
    for name, member in inspect.getmembers(DovecoteClient, inspect.isfunction):
        if name.startswith("_") or name in covered or name in NOT_IN_A_PATH:
            continue
        parameters = set(inspect.signature(member).parameters)
        if parameters & ID_PARAMETERS or name == "receipt_for":
            missing.append(name)
    assert missing == []
    assert {case.route for case in CASES} >= {key for key in ROUTE_BY_KEY if "{" in key and "message_id" not in key}


def test_the_reproduction_never_reaches_the_admin_routes() -> None:
    recorder = Recorder()
    client = DovecoteClient(
        "http://dovecote.test", "dvc_admin", transport=httpx.MockTransport(recorder), max_attempts=1
    )
    for attempt in (
        lambda: client.delete_note("../admin/tokens/0123456789abcdef"),
        lambda: client.get_note_meta("../admin/tokens?"),
    ):
        with pytest.raises(DovecoteError) as refused:
            attempt()
        assert refused.value.status == 0 and refused.value.code == "invalid_argument"
    assert recorder.requests == []
    with pytest.raises(DovecoteError):
        client.get_note_meta("..%2Fadmin%2Ftokens%3F")  # sent, as one segment of the notes route
    assert [r.url.raw_path for r in recorder.requests] == [b"/v1/notes/..%252Fadmin%252Ftokens%253F"]


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (("tasks", "t.1", "reply"), "/v1/tasks/t.1/reply"),
        (("notes", "a?b#c d"), "/v1/notes/a%3Fb%23c%20d"),
        (("recall", "read", "ab12cd34~x:ef01"), "/v1/recall/read/ab12cd34~x%3Aef01"),
        (("notes", "%2e%2e"), "/v1/notes/%252e%252e"),
        (("notes", "\u2024\u2024"), "/v1/notes/%E2%80%A4%E2%80%A4"),
        (("tasks", 7), "/v1/tasks/7"),
    ],
)
def test_path_encodes_each_segment_whole(parts: tuple[object, ...], expected: str) -> None:
    assert path(*parts) == expected


@pytest.mark.parametrize("value", ["", ".", "..", "/", "a/b", "../x", "\udfff"])
def test_segment_refuses_what_no_route_can_carry(value: str) -> None:
    with pytest.raises(DovecoteError) as refused:
        segment(value)
    assert refused.value.status == 0 and refused.value.code == "invalid_argument"
    assert refused.value.details["segment"] == value


@pytest.mark.parametrize("value", [None, True, 1.5, b"t1", ["t1"]])
def test_segment_refuses_what_is_not_text_rather_than_sending_its_str(value: object) -> None:
    with pytest.raises(DovecoteError) as refused:
        segment(value)
    assert refused.value.status == 0 and refused.value.code == "invalid_argument"
    assert refused.value.details == {"segment": repr(value), "reason": "not text"}


# The before-stop hook's check, as a test: no path is pasted together by hand.
HAND_MADE = re.compile(r'f"/v1/[^"]*\{[a-z_]+\}')


def test_no_sdk_cli_or_mcp_module_builds_a_path_with_an_f_string() -> None:
    sources = [p for d in ("client", "mcp", "cli") for p in (ROOT / "shared" / "dovecote" / d).glob("*.py")]
    assert len(sources) > 20
    offenders = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in sources for m in HAND_MADE.finditer(p.read_text())]
    assert offenders == []


def test_the_hand_made_pattern_would_see_one() -> None:
    assert HAND_MADE.search('self.request("GET", f"/v1/tasks/{task_id}/lease")')
    assert not HAND_MADE.search('self.request("GET", path("tasks", task_id, "lease"))')


@pytest.mark.parametrize(
    "args",
    [
        ["worker", "lease", "../admin/tokens/tok-1"],
        ["tasks", "get", "../admin/tokens"],
        ["tasks", "events", "x/../../admin/tokens"],
    ],
)
def test_the_cli_goes_through_the_same_builder(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    """Nothing listens at the endpoint: a refusal (not `unavailable`) proves no request was tried."""
    from typer.testing import CliRunner

    from dovecote.cli import app

    monkeypatch.setenv("DOVECOTE_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("DOVECOTE_TOKEN", "dvc_x")
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 2, result.output  # a bad argument (usage), not an answer of the API
    assert json.loads(result.stdout)["error"]["code"] == "invalid_argument"
    plain = CliRunner().invoke(app, args)
    assert plain.exit_code == 2 and plain.stderr.startswith("error: invalid_argument: ")
    assert plain.stderr.count("\n") == 1, plain.stderr
