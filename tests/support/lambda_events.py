"""What Lambda hands a function behind an HTTP API (payload 2.0), for tests that run a handler
through its real entry point (`lambda_entry`) without the local gateway."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any


@dataclass
class Context:
    function_name: str = "probe"
    memory_limit_in_mb: int = 128
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:000000000000:function:probe"
    aws_request_id: str = "req-1"


def http_event(method: str, route_key: str, path: str, **fields: Any) -> dict[str, Any]:
    """The event API Gateway sends for `method path` matched by `route_key`, from a caller of the
    `acme` authority; `fields` adds to it or replaces its top-level fields (pathParameters, ...)."""
    return {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": path,
        "rawQueryString": "",
        "headers": {},
        "requestContext": {
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
            "requestId": str(uuid.uuid4()),
            "routeKey": route_key,
            "stage": "$default",
            "authorizer": {"lambda": {"authority": "acme", "role": "caller", "token_id": "t1"}},
        },
        "isBase64Encoded": False,
        **fields,
    }
