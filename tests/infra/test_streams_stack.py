"""The streaming front in the synthesized template (infra/constructs/streams.py): a REST API whose
Lambda proxy integrations stream (responseTransferMode STREAM, 15 minutes), in front of the streams
function behind the Lambda Web Adapter; throttled and access-logged; the function reads the tokens
table only by GetItem (it checks the token with the authorizer's code)."""

from __future__ import annotations

from typing import Any

import pytest

from infra.constructs.streams import LWA_ENVIRONMENT, STREAM_HANDLER
from tests.infra.test_stack import resources


@pytest.fixture(scope="module")
def synthesized(default_synth: dict[str, Any]) -> dict[str, Any]:
    return default_synth


def _streams(raw: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return next(
        (k, f["Properties"])
        for k, f in resources(raw, "AWS::Lambda::Function").items()
        if f["Properties"]["Handler"] == STREAM_HANDLER
    )


def test_every_method_of_the_front_streams_from_the_streams_function(synthesized: dict[str, Any]) -> None:
    raw = synthesized["raw"]
    name, _ = _streams(raw)
    methods = resources(raw, "AWS::ApiGateway::Method")
    assert len(methods) == 2  # the root (A2A's JSON-RPC URL) and {proxy+}
    for method in methods.values():
        props = method["Properties"]
        integration = props["Integration"]
        assert props["HttpMethod"] == "ANY" and props["AuthorizationType"] == "NONE"
        assert integration["Type"] == "AWS_PROXY" and integration["ResponseTransferMode"] == "STREAM"
        assert integration["TimeoutInMillis"] == 900_000
        assert name in str(integration["Uri"])
        # The streaming invoke: API Gateway calls InvokeWithResponseStream, not Invoke.
        assert "response-streaming-invocations" in str(integration["Uri"])


def test_the_function_runs_behind_the_web_adapter_for_15_minutes(synthesized: dict[str, Any]) -> None:
    _, fn = _streams(synthesized["raw"])
    variables = fn["Environment"]["Variables"]
    assert {k: variables[k] for k in LWA_ENVIRONMENT} == LWA_ENVIRONMENT
    assert variables["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert "LambdaAdapterLayerArm64" in str(fn["Layers"][1])
    assert fn["Timeout"] == 900
    # A stream ends itself before the front's 15 minutes (event: reconnect).
    assert int(variables["DOVECOTE_STREAM_SECONDS"]) < 900


def test_the_stage_is_throttled_traced_and_access_logged(synthesized: dict[str, Any]) -> None:
    stages = resources(synthesized["raw"], "AWS::ApiGateway::Stage")
    assert len(stages) == 1
    stage = next(iter(stages.values()))["Properties"]
    assert stage["StageName"] == "streams" and stage["TracingEnabled"] is True
    assert stage["AccessLogSetting"]["DestinationArn"]
    settings = stage["MethodSettings"][0]
    assert settings["ThrottlingRateLimit"] == 100 and settings["ThrottlingBurstLimit"] == 200
    assert "StreamEndpoint" in synthesized["raw"]["Outputs"]


def test_the_streams_role_reads_tokens_by_getitem_only(synthesized: dict[str, Any]) -> None:
    raw = synthesized["raw"]
    name, fn = _streams(raw)
    role = fn["Role"]["Fn::GetAtt"][0]
    policies = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in resources(raw, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
    ]
    statements = [s for group in policies for s in group]
    tokens = [s for s in statements if "Tokens" in str(s.get("Resource"))]
    assert tokens and all(s["Action"] == "dynamodb:GetItem" for s in tokens), tokens
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert not any(a.endswith("*") or a == "dynamodb:Scan" for a in actions), statement
        # The one delete: A2A's DeleteTaskPushNotificationConfig, of the push table's config items only.
        if "dynamodb:DeleteItem" in actions:
            assert "DataPush" in str(statement["Resource"]) and "DataTasks" not in str(statement["Resource"])
