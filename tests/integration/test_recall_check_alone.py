"""A transcript check (`POST /v1/transcripts/check`, what `recall push` sends first) is served by its
own composition root: a recall function whose first request is a check loads none of search's
modules (RecallService, its ports and results), and answers as RecallService does."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

SCRIPT = r"""
import json, sys
from moto import mock_aws

with mock_aws():
    from dovecote.platform import aws
    from infra.local.resources import DEFAULT_NAMES, create_all
    create_all(dynamodb=aws.client("dynamodb"), s3=aws.client("s3"), secretsmanager=None, names=DEFAULT_NAMES)
    from dovecote.recall.digests import DynamoIngestedDigests
    from dovecote.platform.settings import get_settings
    DynamoIngestedDigests(table=get_settings().recall_table, dynamodb=aws.client("dynamodb")).record("a", "1" * 64)
    from functions.recall_api import handler
    principal = {"authority": "a", "role": "caller", "worker": "", "agent": "", "token_id": ""}
    event = {
        "version": "2.0", "routeKey": "POST /v1/transcripts/check", "rawPath": "/v1/transcripts/check",
        "rawQueryString": "", "headers": {"content-type": "application/json"},
        "requestContext": {"http": {"method": "POST", "path": "/v1/transcripts/check", "sourceIp": "127.0.0.1",
                                    "protocol": "HTTP/1.1"}, "requestId": "r", "routeKey": "POST /v1/transcripts/check",
                           "stage": "$default", "authorizer": {"lambda": principal}},
        "body": json.dumps({"sha256": ["1" * 64, "2" * 64, "1" * 64]}), "isBase64Encoded": False,
    }
    from types import SimpleNamespace
    context = SimpleNamespace(function_name="c", memory_limit_in_mb=1024, aws_request_id="r",
                              invoked_function_arn="arn:aws:lambda:us-east-1:000000000000:function:c")
    response = handler.handler(event, context)
    loaded = sorted(m for m in ("dovecote.recall.service", "dovecote.recall.results", "dovecote.recall.ports")
                    if m in sys.modules)
    print(json.dumps({"status": response["statusCode"], "body": json.loads(response["body"]), "loaded": loaded}))
"""


def test_a_first_check_loads_no_search_module_and_answers_the_unknown_digests() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DOVECOTE_"))}
    env.update(AWS_DEFAULT_REGION="us-east-1", DOVECOTE_CURSOR_KEY="check-cursor-key-0123456789abcdef")
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["status"] == 200 and out["body"] == {"unknown": ["2" * 64]}
    assert out["loaded"] == []
