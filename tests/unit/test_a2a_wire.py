"""The A2A wire around the service: the JSON-RPC envelope and the HTTP+JSON routes of the a2a_api
handler (errors as JSON-RPC objects and AIP-193 bodies, the version and content-type checks, the
unsupported streaming and push methods), and `dovecote dev --a2a-unauthenticated`, which only the
local gateway has."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request

from dovecote.a2a import bindings
from dovecote.a2a.service import A2AService
from dovecote.platform.cursors import CursorSigner
from dovecote.tasks.memory import InMemoryTaskStore
from dovecote.tasks.service import TaskService
from functions.a2a_api import handler as a2a_handler
from infra.local import gateway as local_gateway
from infra.routes import A2A_ROUTES

PRINCIPAL = {"authority": "acme", "role": "caller", "worker": "", "agent": "", "token_id": "t", "expires_at": ""}
VERSION = {"a2a-version": "1.0", "content-type": "application/json"}


@pytest.fixture(autouse=True)
def service(monkeypatch: pytest.MonkeyPatch) -> A2AService:
    found = A2AService(TaskService(InMemoryTaskStore(), CursorSigner(b"a2a-wire-test-key-0123456789abcdef")))
    monkeypatch.setattr(a2a_handler, "service", lambda: found)
    return found


def event(route_key: str, body: Any = None, headers: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "routeKey": route_key,
        "headers": {**VERSION, **(headers or {})},
        "requestContext": {"domainName": "api.example", "authorizer": {"lambda": PRINCIPAL}},
        **extra,
    }
    if body is not None:
        out["body"] = body if isinstance(body, str) else json.dumps(body)
    return out


def rpc(method: str, params: Any = None, headers: dict[str, str] | None = None, **envelope: Any) -> dict[str, Any]:
    request = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params or {}, **envelope}
    answer = a2a_handler.route(event("POST /", request, headers))
    assert answer["statusCode"] == 200  # JSON-RPC answers its errors in the body
    return dict(json.loads(answer["body"]))


def rpc_error(answer: dict[str, Any]) -> tuple[int, str]:
    error = answer["error"]
    return error["code"], error["data"][0]["reason"]


SEND = {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}


def test_a_send_answers_a_task_in_the_jsonrpc_envelope() -> None:
    answer = rpc("SendMessage", {**SEND, "configuration": {"returnImmediately": True}})
    assert answer["id"] == 7 and answer["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"


@pytest.mark.parametrize(
    ("body", "code", "reason"),
    [
        ("{not json", -32700, "PARSE_ERROR"),
        ("[" * 100_000 + "]" * 100_000, -32700, "PARSE_ERROR"),  # deeper than the decoder goes: not a 500
        ("[]", -32600, "INVALID_REQUEST"),
        ({"jsonrpc": "1.0", "id": 1, "method": "GetTask"}, -32600, "INVALID_REQUEST"),
        ({"jsonrpc": "2.0", "id": {"x": 1}, "method": "GetTask"}, -32600, "INVALID_REQUEST"),
        ({"jsonrpc": "2.0", "id": 1, "method": "tasks/get"}, -32601, "METHOD_NOT_FOUND"),
        ({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": 5}}, -32602, "INVALID_PARAMS"),
        # An unknown field is ignored (a newer client's), the request goes on
        ({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x", "bogus": 1}}, -32001, "TASK_NOT_FOUND"),
        ({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "no-such"}}, -32001, "TASK_NOT_FOUND"),
        ({"jsonrpc": "2.0", "id": 1, "method": "GetTask"}, -32602, "INVALID_PARAMS"),
        ({"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {}}, -32602, "INVALID_PARAMS"),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": SEND},
            -32004,
            "UNSUPPORTED_OPERATION",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "x"}},
            -32004,
            "UNSUPPORTED_OPERATION",
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig", "params": {}},
            -32003,
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
        ),
        ({"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"}, -32004, "UNSUPPORTED_OPERATION"),
    ],
)
def test_jsonrpc_errors_carry_the_specs_codes(body: Any, code: int, reason: str) -> None:
    answer = a2a_handler.route(event("POST /", body))
    parsed = json.loads(answer["body"])
    assert answer["statusCode"] == 200 and parsed["jsonrpc"] == "2.0"
    assert rpc_error(parsed) == (code, reason)
    assert parsed["error"]["data"][0]["domain"] == "a2a-protocol.org"


@pytest.mark.parametrize("version", ["", "0.3", "2.0"])
def test_a_version_this_agent_does_not_serve_is_version_not_supported(version: str) -> None:
    headers = {"a2a-version": version}
    assert rpc_error(rpc("GetTask", {"id": "x"}, headers)) == (-32009, "VERSION_NOT_SUPPORTED")
    answer = a2a_handler.route(event("GET /a2a/tasks/{id}", headers=headers, pathParameters={"id": "x"}))
    assert answer["statusCode"] == 400
    assert json.loads(answer["body"])["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"


def test_the_version_may_come_as_a_query_parameter_and_the_patch_is_ignored() -> None:
    for headers, query in (({"a2a-version": "1.0.3"}, {}), ({"a2a-version": ""}, {"A2A-Version": "1.0"})):
        answer = a2a_handler.route(
            event("GET /a2a/tasks/{id}", headers=headers, pathParameters={"id": "x"}, queryStringParameters=query)
        )
        assert json.loads(answer["body"])["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"


def test_a_body_that_is_not_json_by_its_content_type_is_content_type_not_supported() -> None:
    body = "{'jsonrpc': '2.0'}"
    answer = json.loads(a2a_handler.route(event("POST /", body, {"content-type": "text/plain"}))["body"])
    assert rpc_error(answer) == (-32005, "CONTENT_TYPE_NOT_SUPPORTED")
    rest = a2a_handler.route(
        event("POST /a2a/{method}", body, {"content-type": "text/plain"}, pathParameters={"method": "message:send"})
    )
    assert rest["statusCode"] == 415


def test_http_json_answers_tasks_and_aip_193_errors() -> None:
    sent = a2a_handler.route(
        event(
            "POST /a2a/{method}",
            {**SEND, "configuration": {"returnImmediately": True}},
            {"content-type": "application/a2a+json"},
            pathParameters={"method": "message:send"},
        )
    )
    assert sent["statusCode"] == 200
    task = json.loads(sent["body"])["task"]
    got = a2a_handler.route(
        event("GET /a2a/tasks/{id}", pathParameters={"id": task["id"]}, queryStringParameters={"historyLength": "0"})
    )
    assert json.loads(got["body"])["id"] == task["id"] and "history" not in json.loads(got["body"])
    listed = json.loads(
        a2a_handler.route(
            event("GET /a2a/tasks", queryStringParameters={"pageSize": "100", "includeArtifacts": "false"})
        )["body"]
    )
    assert listed["nextPageToken"] == "" and listed["pageSize"] == 100 and listed["totalSize"] == 1
    canceled = a2a_handler.route(
        event("POST /a2a/tasks/{id_action}", pathParameters={"id_action": task["id"] + ":cancel"})
    )
    assert json.loads(canceled["body"])["status"]["state"] == "TASK_STATE_CANCELED"
    again = a2a_handler.route(
        event("POST /a2a/tasks/{id_action}", pathParameters={"id_action": task["id"] + ":cancel"})
    )
    assert again["statusCode"] == 200
    for route_key, path, status, reason in (
        ("POST /a2a/{method}", {"method": "message:stream"}, 400, "UNSUPPORTED_OPERATION"),
        ("POST /a2a/{method}", {"method": "message:nope"}, 404, "METHOD_NOT_FOUND"),
        ("POST /a2a/tasks/{id_action}", {"id_action": task["id"] + ":subscribe"}, 400, "UNSUPPORTED_OPERATION"),
        ("GET /a2a/tasks/{id}", {"id": "no-such"}, 404, "TASK_NOT_FOUND"),
        ("GET /a2a/tasks/{id}/pushNotificationConfigs", {"id": "x"}, 400, "PUSH_NOTIFICATION_NOT_SUPPORTED"),
        ("GET /a2a/extendedAgentCard", {}, 400, "UNSUPPORTED_OPERATION"),
    ):
        answer = a2a_handler.route(event(route_key, pathParameters=path))
        error = json.loads(answer["body"])["error"]
        assert (answer["statusCode"], error["code"], error["details"][0]["reason"]) == (status, status, reason)
        assert error["status"] and error["details"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"


@pytest.mark.parametrize(
    "part",
    [{"text": "\ud800"}, {"data": json.loads("[" * 200 + "]" * 200)}, {"text": "x", "metadata": {"k": "\udfff"}}],
    ids=["lone surrogate", "nested too deep", "surrogate in metadata"],
)
def test_what_no_store_could_keep_is_invalid_params_and_stores_nothing(
    part: dict[str, Any], service: A2AService
) -> None:
    params = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [part]}}
    assert rpc_error(rpc("SendMessage", params)) == (-32602, "INVALID_PARAMS")
    assert service.tasks.store.tasks == {}  # type: ignore[attr-defined]


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The deployment's configured endpoint (CDK sets the API's; `dovecote dev` its own)."""
    from dovecote.platform.settings import get_settings

    monkeypatch.setenv("DOVECOTE_PUBLIC_URL", "https://api.example")
    get_settings.cache_clear()
    yield "https://api.example"
    get_settings.cache_clear()


def test_the_card_names_the_configured_endpoint_whatever_the_request_says(endpoint: str) -> None:
    # A forwarded scheme or a Host of the client's choosing never reaches the card (which is cached)
    for headers, domain in (
        ({"x-forwarded-proto": "javascript"}, "api.example"),
        ({"x-forwarded-proto": "https", "host": "evil.example"}, "evil.example"),
        ({}, ""),
    ):
        answer = a2a_handler.route(
            {
                "routeKey": "GET /.well-known/agent-card.json",
                "headers": headers,
                "requestContext": {"domainName": domain},
            }
        )
        urls = {i["protocolBinding"]: i["url"] for i in json.loads(answer["body"])["supportedInterfaces"]}
        assert urls == {"JSONRPC": endpoint, "HTTP+JSON": endpoint + "/a2a"}


def test_a_card_without_a_configured_endpoint_is_an_internal_error_not_a_guess(monkeypatch: pytest.MonkeyPatch) -> None:
    from dovecote.platform.settings import get_settings

    monkeypatch.delenv("DOVECOTE_PUBLIC_URL", raising=False)
    get_settings.cache_clear()
    answer = a2a_handler.route(
        {"routeKey": "GET /.well-known/agent-card.json", "headers": {}, "requestContext": {"domainName": "api.example"}}
    )
    get_settings.cache_clear()
    assert answer["statusCode"] == 500 and "api.example" not in answer["body"]


def test_the_card_is_cacheable_and_revalidates_by_its_etag(endpoint: str) -> None:
    first = a2a_handler.route({"routeKey": "GET /.well-known/agent-card.json", "headers": {}, "requestContext": {}})
    etag = first["headers"]["ETag"]
    assert first["statusCode"] == 200 and "max-age" in first["headers"]["Cache-Control"]
    again = a2a_handler.route(
        {"routeKey": "GET /.well-known/agent-card.json", "headers": {"If-None-Match": etag}, "requestContext": {}}
    )
    assert again["statusCode"] == 304 and again["headers"]["ETag"] == etag and not again["body"]


def test_a_route_without_a_principal_is_refused_not_guessed() -> None:
    answer = a2a_handler.route({"routeKey": "POST /", "headers": {}, "requestContext": {}, "body": "{}"})
    assert answer["statusCode"] in (401, 403)


# ---- dovecote dev --a2a-unauthenticated -----------------------------------------------------------------


class Recorded:
    def __init__(self) -> None:
        self.authorized: list[str] = []
        self.ran: list[str] = []


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Recorded:
    """The gateway with a recording authorizer and functions (the real ones are tested elsewhere)."""
    seen = Recorded()

    def handler(gateway: local_gateway.Gateway, function: Any) -> Any:
        if function.name == "authorizer":

            def authorize(auth_event: dict[str, Any], _context: Any) -> dict[str, Any]:
                seen.authorized.append(auth_event["identitySource"][0])
                return {"isAuthorized": True, "context": PRINCIPAL}

            return authorize

        def run(fn_event: dict[str, Any], _context: Any) -> dict[str, Any]:
            seen.ran.append(fn_event["routeKey"])
            return {"statusCode": 200, "body": "{}"}

        return run

    monkeypatch.setattr(local_gateway.Gateway, "_handler", handler)
    return seen


def call(
    gateway: local_gateway.Gateway,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    host: str = "localhost:8787",
) -> int:
    environ = EnvironBuilder(method=method, path=path, headers=headers or {}, base_url=f"http://{host}/").get_environ()
    return int(gateway.dispatch(Request(environ), path.encode()).status_code)


def test_only_the_flag_lets_a2a_requests_without_a_token_in_as_the_dev_caller(recorded: Recorded) -> None:
    plain = local_gateway.Gateway(log_requests=False)
    assert call(plain, "GET", "/a2a/tasks") == 401  # as API Gateway: no token, no authorizer run
    assert recorded.authorized == []
    flagged = local_gateway.Gateway(log_requests=False, a2a_caller_token="dev-caller-token")
    assert call(flagged, "GET", "/a2a/tasks") == 200
    assert call(flagged, "POST", "/") == 200
    # Through the real authorizer, with the dev caller's token
    assert recorded.authorized == ["Bearer dev-caller-token", "Bearer dev-caller-token"]
    # A token the client sends is the one used; the rest of the API still needs one
    assert call(flagged, "GET", "/a2a/tasks", {"Authorization": "Bearer mine"}) == 200
    assert recorded.authorized[-1] == "Bearer mine"
    assert call(flagged, "GET", "/v1/tasks") == 401
    assert all(r.function == "a2a_api" for r in A2A_ROUTES)


@pytest.mark.parametrize(
    ("host", "headers"),
    [
        ("evil.example:8787", {}),  # DNS rebinding: a page whose domain resolved to 127.0.0.1
        ("127.0.0.1.evil.example", {}),
        ("localhost:8787", {"Origin": "https://evil.example"}),  # another site's page
        ("localhost:8787", {"Origin": "null"}),  # a sandboxed frame, a file:// page
        ("localhost:8787", {"Origin": "http://localhost.evil.example:8787"}),
        ("localhost:8787", {"Sec-Fetch-Site": "cross-site"}),
        ("localhost:8787", {"Sec-Fetch-Site": "same-site"}),  # another port of this machine
    ],
)
def test_the_flag_serves_no_foreign_host_and_no_other_sites_page(
    recorded: Recorded, host: str, headers: dict[str, str]
) -> None:
    flagged = local_gateway.Gateway(log_requests=False, a2a_caller_token="dev-caller-token")
    assert call(flagged, "POST", "/", headers, host=host) == 403
    assert call(flagged, "GET", "/a2a/tasks", headers, host=host) == 403
    assert recorded.authorized == [] and recorded.ran == []  # neither the authorizer nor the function ran


@pytest.mark.parametrize(
    ("host", "headers"),
    [
        ("localhost:8787", {}),
        ("127.0.0.1:18787", {"Origin": "http://127.0.0.1:18787", "Sec-Fetch-Site": "same-origin"}),
        ("[::1]:8787", {"Origin": "http://[::1]:8787"}),
    ],
)
def test_the_flag_serves_a_loopback_client(recorded: Recorded, host: str, headers: dict[str, str]) -> None:
    flagged = local_gateway.Gateway(log_requests=False, a2a_caller_token="dev-caller-token")
    assert call(flagged, "POST", "/", headers, host=host) == 200
    # A request with its own token is authorized as any other, whatever its Host
    assert call(flagged, "POST", "/", {"Authorization": "Bearer mine"}, host="evil.example") == 200
    assert recorded.authorized == ["Bearer dev-caller-token", "Bearer mine"]


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::", "my-laptop.lan"])  # noqa: S104 - refused binds
def test_the_flag_refuses_to_start_on_an_address_others_reach(host: str, tmp_path: Any) -> None:
    from infra.local.runtime import LocalRuntime, UnsafeOptions

    runtime = LocalRuntime(host=host, port=0, a2a_unauthenticated=True, data_dir=tmp_path / "data")
    with pytest.raises(UnsafeOptions, match="loopback"):
        runtime.start()
    assert not (tmp_path / "data").exists()  # refused before anything was written or bound


def test_a2a_posts_must_say_json_even_without_a_body() -> None:
    # A browser's cross-site POST carries no Content-Type (or text/plain) without a CORS preflight
    for headers in ({"content-type": ""}, {"content-type": "text/plain"}):
        answer = a2a_handler.route(event("POST /", {"jsonrpc": "2.0", "id": 1, "method": "ListTasks"}, headers))
        assert rpc_error(json.loads(answer["body"])) == (-32005, "CONTENT_TYPE_NOT_SUPPORTED")
        empty = a2a_handler.route(
            event("POST /a2a/tasks/{id_action}", headers=headers, pathParameters={"id_action": "t:cancel"})
        )
        assert empty["statusCode"] == 415


def test_a2a_refuses_a_query_that_is_not_utf8_as_every_route_does() -> None:
    for raw in ("pageSize=1%FF", "historyLength=%ED%A0%80"):
        rest = a2a_handler.route(event("GET /a2a/tasks", rawQueryString=raw))
        assert rest["statusCode"] == 400, rest["body"]
        assert json.loads(rest["body"])["error"]["details"][0]["reason"] == "INVALID_PARAMS"
        body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ListTasks", "params": {}})
        answer = json.loads(a2a_handler.route(event("POST /", body, rawQueryString=raw))["body"])
        assert answer["id"] == 3 and rpc_error(answer) == (-32602, "INVALID_PARAMS")


def test_a2a_refuses_a_body_that_is_not_utf8() -> None:
    # The local gateway passes a byte that is not UTF-8 (here 0xFF) as a lone surrogate (surrogateescape)
    body = '{"jsonrpc": "2.0", "id": 3, "method": "ListTasks", "params": {"contextId": "x\udcff"}}'
    answer = json.loads(a2a_handler.route(event("POST /", body))["body"])
    assert rpc_error(answer) == (-32700, "PARSE_ERROR")


def test_the_cloud_stack_has_no_such_switch() -> None:
    # The flag exists in the local gateway only: nothing the CDK app reads names it.
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for source in [*root.glob("infra/*.py"), *root.glob("infra/constructs/*.py"), *root.glob("functions/**/*.py")]:
        text = source.read_text()
        assert "a2a_caller_token" not in text and "a2a_unauthenticated" not in text, source


def test_bindings_name_every_streaming_and_push_method_of_the_spec() -> None:
    assert bindings.STREAMING_METHODS == {"SendStreamingMessage", "SubscribeToTask"}
    assert len(bindings.PUSH_METHODS) == 4


@pytest.mark.parametrize("url", ["javascript:alert(1)", "file:///etc/passwd", "data:text/plain,hi"])
def test_a_url_part_of_another_scheme_than_http_is_invalid_params_and_stores_nothing(
    url: str, service: A2AService
) -> None:
    params = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"url": url, "mediaType": "text/plain"}]}}
    answer = rpc("SendMessage", params)
    assert answer["id"] == 7 and rpc_error(answer) == (-32602, "INVALID_PARAMS")
    assert service.tasks.store.tasks == {}  # type: ignore[attr-defined]


# ---- inputs protobuf JSON cannot hold: InvalidParams with the request's id (issue 29) -------------------

BIG = "1" + "0" * 400  # beyond a double's range: protobuf's parse overflows


def raw_send(message_json: str, request_id: int = 41) -> dict[str, Any]:
    """A JSON-RPC SendMessage whose message is given as JSON text (Python's json writes no 1e999)."""
    body = (
        f'{{"jsonrpc":"2.0","id":{request_id},"method":"SendMessage",'
        f'"params":{{"configuration":{{"returnImmediately":true}},"message":{message_json}}}}}'
    )
    answer = a2a_handler.route(event("POST /", body))
    assert answer["statusCode"] == 200
    return dict(json.loads(answer["body"]))


@pytest.mark.parametrize(
    "message",
    [
        *[f'{{"messageId":"m","role":"ROLE_USER","parts":[{{"data":{v}}}]}}' for v in ("1e999", "NaN", BIG)],
        '{"messageId":"m","role":"ROLE_USER","parts":[{"data":{"a":[1,-Infinity]}}]}',
        *[
            f'{{"messageId":"m","role":"ROLE_USER","parts":[{{"text":"x"}}],"metadata":{{"k":{v}}}}}'
            for v in ("1e999", "NaN", BIG)
        ],
        *[
            f'{{"messageId":"m","role":"ROLE_USER","parts":[{{"text":"x","metadata":{{"k":{v}}}}}]}}'
            for v in ("NaN", BIG)
        ],
        *[f'{{"messageId":"m","role":{r},"parts":[{{"text":"x"}}]}}' for r in ("5", "-1", '"-5"', '"ROLE_BOGUS"')],
    ],
)
def test_what_protobuf_json_cannot_hold_is_invalid_params_with_the_request_id(
    message: str, service: A2AService
) -> None:
    answer = raw_send(message)
    assert answer["id"] == 41 and rpc_error(answer) == (-32602, "INVALID_PARAMS")
    assert service.tasks.store.tasks == {}  # type: ignore[attr-defined]


def test_the_http_json_binding_refuses_them_as_400() -> None:
    body = '{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"data":NaN}]}}'
    answer = a2a_handler.route(event("POST /a2a/{method}", body, pathParameters={"method": "message:send"}))
    error = json.loads(answer["body"])["error"]
    assert (answer["statusCode"], error["details"][0]["reason"]) == (400, "INVALID_PARAMS")


def test_a_status_filter_that_names_no_state_is_refused_not_ignored() -> None:
    rest = a2a_handler.route(event("GET /a2a/tasks", queryStringParameters={"status": "BOGUS"}))
    assert rest["statusCode"] == 400
    assert json.loads(rest["body"])["error"]["details"][0]["reason"] == "INVALID_PARAMS"
    assert rpc_error(rpc("ListTasks", {"status": "BOGUS"})) == (-32602, "INVALID_PARAMS")
    assert rpc_error(rpc("ListTasks", {"status": 99})) == (-32602, "INVALID_PARAMS")
    assert "result" in rpc("ListTasks", {"status": "TASK_STATE_WORKING"})


def test_a_version_that_is_no_version_is_refused_without_being_echoed() -> None:
    junk = "1.0" + "<script>" * 2000
    answer = rpc("GetTask", {"id": "x"}, {"a2a-version": junk})
    assert rpc_error(answer) == (-32009, "VERSION_NOT_SUPPORTED")
    assert "<script>" not in json.dumps(answer) and len(json.dumps(answer)) < 1000


def test_a_message_over_the_part_limit_is_refused_before_it_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    # 300,000 parts cost seconds of protobuf parsing before the task gate refused them: the limit
    # is checked on the raw request, and the parse never runs.
    from google.protobuf import json_format

    parsed: list[Any] = []
    real = json_format.ParseDict
    monkeypatch.setattr(json_format, "ParseDict", lambda *a, **k: parsed.append(a) or real(*a, **k))
    parts = ",".join(['{"text":"x"}'] * 300_000)
    answer = raw_send(f'{{"messageId":"m","role":"ROLE_USER","parts":[{parts}]}}')
    assert rpc_error(answer) == (-32602, "INVALID_PARAMS") and answer["id"] == 41
    assert "32" in answer["error"]["message"] and parsed == []


def test_the_local_gateway_answers_over_lambdas_response_limit_as_api_gateway_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Lambda refuses a response over 6 MB, measured as JSON (the body's quotes escaped once more);
    # API Gateway then answers 500. An answer too large for the cloud fails locally too.
    body = [""]

    def handler(gateway: local_gateway.Gateway, function: Any) -> Any:
        return lambda _event, _context: {"statusCode": 200, "body": body[0]}

    monkeypatch.setattr(local_gateway.Gateway, "_handler", handler)
    gateway = local_gateway.Gateway(log_requests=False)
    for answer, status in (
        ("x" * (6 * 1024 * 1024 - 1000), 200),
        ("x" * (6 * 1024 * 1024 + 1), 500),
        ('"' * (3 * 1024 * 1024 + 10), 500),  # 3 MiB of body, 6 MiB once Lambda escapes it
    ):
        body[0] = answer
        assert call(gateway, "GET", "/v1/health") == status
