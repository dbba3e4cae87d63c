"""Run every API handler once with tracing on, as Lambda would, against moto. Used by
tests/integration/test_traces_hold_no_secrets.py in a fresh interpreter (the X-Ray SDK patches
botocore process-wide), with AWS_XRAY_DAEMON_ADDRESS pointing at the test's UDP socket.

Prints, as JSON on its last line, the secrets the requests carried or produced: tokens, note text,
message text, presigned URLs. No datagram may hold any of them."""

from __future__ import annotations

import json
import os
import secrets
import sys
from typing import Any

from moto import mock_aws

SECRET_TEXT = "s3cr3t-body-" + secrets.token_hex(8)


def trace_id() -> str:
    return f"Root=1-{secrets.token_hex(4)}-{secrets.token_hex(12)};Parent={secrets.token_hex(8)};Sampled=1"


class Context:
    function_name = "traced"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:traced"
    aws_request_id = "req-1"
    log_group_name = "/aws/lambda/traced"
    log_stream_name = "s"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


def event(
    method: str,
    path: str,
    route: str,
    principal: dict[str, str],
    body: Any = None,
    path_params: dict[str, str] | None = None,
) -> dict[str, Any]:
    e: dict[str, Any] = {
        "version": "2.0",
        "routeKey": f"{method} {route}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json", "authorization": "Bearer " + principal.get("_token", "")},
        "requestContext": {
            "http": {"method": method, "path": path, "sourceIp": "127.0.0.1", "protocol": "HTTP/1.1", "userAgent": "t"},
            "requestId": secrets.token_hex(8),
            "routeKey": f"{method} {route}",
            "stage": "$default",
            "authorizer": {"lambda": {k: v for k, v in principal.items() if not k.startswith("_")}},
        },
        "isBase64Encoded": False,
    }
    if body is not None:
        e["body"] = json.dumps(body)
    if path_params:
        e["pathParameters"] = path_params
    return e


def main() -> None:
    with mock_aws():
        from dovecote.platform import aws
        from dovecote.platform.settings import get_settings
        from infra.local.resources import DEFAULT_NAMES, create_all

        os.environ.update(
            create_all(dynamodb=aws.client("dynamodb"), s3=aws.client("s3"), secretsmanager=None, names=DEFAULT_NAMES)
        )
        get_settings.cache_clear()
        from dovecote.admin.dynamo import DynamoTokenStore
        from dovecote.admin.service import TokenService
        from functions.admin_api.handler import handler as admin
        from functions.authorizer.handler import handler as authorizer
        from functions.notes_api.handler import handler as notes
        from functions.tasks_api.handler import handler as tasks

        seen: list[str] = [SECRET_TEXT]
        store = DynamoTokenStore(table=get_settings().tokens_table, dynamodb=aws.client("dynamodb"))
        admin_token, record = TokenService(store, audit=lambda *_: None).mint(None, "acme", "admin", None)
        seen.append(admin_token)
        p = {"authority": "acme", "role": "admin", "worker": "w1", "token_id": record.token_id, "_token": admin_token}

        def call(fn: Any, e: dict[str, Any]) -> dict[str, Any]:
            os.environ["_X_AMZN_TRACE_ID"] = trace_id()
            result = fn(e, Context())
            assert result["statusCode"] < 500, result
            return json.loads(result["body"]) if result.get("body") else {}

        os.environ["_X_AMZN_TRACE_ID"] = trace_id()
        auth = authorizer(
            {"headers": {"authorization": "Bearer " + admin_token}, "routeKey": "PUT /v1/notes"}, Context()
        )
        assert auth["isAuthorized"], auth
        minted = call(
            admin, event("POST", "/v1/admin/tokens", "/v1/admin/tokens", p, {"authority": "acme", "role": "caller"})
        )
        seen.append(minted["token"])
        put = call(
            notes, event("PUT", "/v1/notes", "/v1/notes", p, {"key": "k", "run": 1, "name": "n", "text": SECRET_TEXT})
        )
        got = call(
            notes, event("GET", f"/v1/notes/{put['ref']}", "/v1/notes/{ref}", p, path_params={"ref": put["ref"]})
        )
        assert got["text"] == SECRET_TEXT
        up = call(
            notes,
            event(
                "POST",
                "/v1/notes/uploads",
                "/v1/notes/uploads",
                p,
                {"key": "k", "run": 1, "name": "big", "size": 3, "sha256": "a" * 64},
            ),
        )
        seen.append(up["upload_url"])
        message = {"id": "m1", "parts": [{"media_type": "text/plain", "text": SECRET_TEXT + "-message"}]}
        seen.append(SECRET_TEXT + "-message")
        call(
            tasks,
            event(
                "POST",
                "/v1/tasks",
                "/v1/tasks",
                p,
                {"command_id": "c1", "workspace": "w", "id": "t1", "context": "x", "message": message},
            ),
        )
        msgs = call(
            tasks, event("GET", "/v1/tasks/t1/messages", "/v1/tasks/{id}/messages", p, path_params={"id": "t1"})
        )
        assert msgs["items"][0]["parts"][0]["text"] == SECRET_TEXT + "-message"
        # An error path too: the envelope must not carry request data into the trace either.
        call(notes, event("PUT", "/v1/notes", "/v1/notes", p, {"key": "", "run": 1, "name": SECRET_TEXT}))
    print(json.dumps(seen))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
