"""CDK Template assertions and the cdk-nag gate (AwsSolutions runs inside synth)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk.assertions import Match, Template  # noqa: E402

from infra import stack as stack_module  # noqa: E402
from infra.app import build_app  # noqa: E402
from infra.build import FUNCTIONS as FUNCTIONS_DIR  # noqa: E402
from infra.constructs.streams import STREAM_HANDLER  # noqa: E402
from infra.routes import (
    ALL_ROUTES,
    AUTHORIZER,
    DISPATCHER,
    FUNCTIONS,
    JANITOR,
    MEMORY_WORKER,
    MEMORY_WORKER_BATCH_SIZE,
    PUSH_FANOUT,
    PUSH_SENDER,
    RECONCILER,
    STREAMS,
    TRANSCRIPT_INDEXER,
    Function,  # noqa: E402
)
from tests.infra.conftest import OPTIONS  # noqa: E402

BACKGROUND = (AUTHORIZER, JANITOR, RECONCILER, DISPATCHER, MEMORY_WORKER, TRANSCRIPT_INDEXER, PUSH_FANOUT, PUSH_SENDER)
# The streams function: behind the Lambda Web Adapter, its handler the adapter's start script.
FRONTED = (STREAMS,)


def handler_of(spec: Function) -> str:
    return STREAM_HANDLER if spec is STREAMS else spec.handler


@pytest.fixture(scope="module")
def synthesized(default_synth: dict[str, Any]) -> dict[str, Any]:
    return {**default_synth, "template": Template.from_json(default_synth["raw"])}


# CDK's BucketDeployment function (the console's files, copied at deploy time): not one of ours, held
# to its own checks in tests/infra/test_console_stack.py.
DEPLOY_FUNCTION = "CustomCDKBucketDeployment"
DEPLOY_LAYER = "ConsoleFilesAwsCliLayer"  # the AWS CLI that function copies with


def resources(raw: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    """The template's resources of `kind`; for Lambda functions, the stack's own (not CDK's deploy-time one)."""
    return {
        k: v
        for k, v in raw["Resources"].items()
        if v["Type"] == kind
        and not (kind == "AWS::Lambda::Function" and k.startswith(DEPLOY_FUNCTION))
        and not (kind == "AWS::Lambda::LayerVersion" and k.startswith(DEPLOY_LAYER))
    }


def test_cdk_nag_has_no_unacknowledged_findings(synthesized: dict[str, Any]) -> None:
    report = json.loads((synthesized["outdir"] / "validation-report.json").read_text())
    violations = [v for p in report["pluginReports"] for v in p.get("violations", [])]
    assert violations == []
    assert all(p["conclusion"] == "success" for p in report["pluginReports"])


def test_every_acknowledgment_carries_a_reason(synthesized: dict[str, Any]) -> None:
    stack = synthesized["stack"] or build_app()[1]  # built, not synthesized, when another worker synthesized
    acknowledged = stack_module.ACKNOWLEDGED(stack)
    assert acknowledged
    for _, rule, reason in acknowledged:
        assert rule.startswith("AwsSolutions-") and len(reason) >= 40, rule


def test_a_missing_acknowledgment_fails_synth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = stack_module.ACKNOWLEDGED
    monkeypatch.setattr(stack_module, "ACKNOWLEDGED", lambda s: [a for a in real(s) if a[1] != "AwsSolutions-SMG4"])
    app, _ = build_app(outdir=str(tmp_path))
    with pytest.raises(RuntimeError, match=r"(?s)ValidationFailed.*AwsSolutions-SMG4"):
        app.synth()
    report = json.loads(next(tmp_path.rglob("validation-report.json")).read_text())
    names = [v["ruleName"] for p in report["pluginReports"] for v in p["violations"]]
    assert names == ["AwsSolutions-SMG4"]


def test_cfn_lint_with_the_serverless_rules_finds_nothing(synthesized: dict[str, Any]) -> None:
    from infra.cfn_lint import IGNORED, lint

    result = lint(str(synthesized["outdir"] / "Dovecote.template.json"))
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout + result.stderr
    assert all(len(reason) >= 40 for reason in IGNORED.values())


def test_the_layer_pins_match_the_project_pins() -> None:
    import tomllib

    from infra.build import LAYER_REQUIREMENTS, ROOT

    pinned = {}
    for requirement in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        name, _, version = requirement.partition("==")
        pinned[name.split("[")[0].lower()] = version
    for requirement in LAYER_REQUIREMENTS:
        name, _, version = requirement.partition("==")
        if name in pinned:
            assert pinned[name] == version, name
    assert "pynamodb==6.1.0" in LAYER_REQUIREMENTS


def test_every_function_is_arm64_python312_with_the_layer(synthesized: dict[str, Any]) -> None:
    functions = resources(synthesized["raw"], "AWS::Lambda::Function")
    layers = resources(synthesized["raw"], "AWS::Lambda::LayerVersion")
    assert len(layers) == 1
    layer_id = next(iter(layers))
    assert len(functions) == len(FUNCTIONS) + len(BACKGROUND) + len(FRONTED)
    for props in (f["Properties"] for f in functions.values()):
        assert props["Runtime"] == "python3.12"
        assert props["Architectures"] == ["arm64"]
        # The streams function also runs the Lambda Web Adapter's layer, by its ARN.
        extra = 1 if props["Handler"] == STREAM_HANDLER else 0
        assert props["Layers"][0] == {"Ref": layer_id} and len(props["Layers"]) == 1 + extra
        assert props["TracingConfig"] == {"Mode": "Active"}


def test_handler_paths_exist_in_the_function_asset(synthesized: dict[str, Any]) -> None:
    handlers = {f["Properties"]["Handler"] for f in resources(synthesized["raw"], "AWS::Lambda::Function").values()}
    assert handlers == {handler_of(spec) for spec in (*BACKGROUND, *FRONTED, *FUNCTIONS.values())}
    script = FUNCTIONS_DIR / STREAM_HANDLER
    assert script.exists() and os.access(script, os.X_OK) and "-m functions.streams_api.serve" in script.read_text()
    for handler in handlers - {STREAM_HANDLER}:
        module, attr = handler.rsplit(".", 1)
        path = FUNCTIONS_DIR / (module.replace(".", "/") + ".py")
        assert path.exists(), handler
        assert f"\n{attr} = " in path.read_text() or f"\ndef {attr}(" in path.read_text(), handler


def test_layer_ships_dovecote_but_not_boto3(synthesized: dict[str, Any]) -> None:
    from infra.build import LAYER

    site = LAYER / "python"
    assert (site / "dovecote" / "notes" / "service.py").exists()
    assert (site / "pynamodb" / "models.py").exists()
    assert (site / "pydantic_core").exists() and any((site / "pydantic_core").glob("*aarch64*.so"))
    assert not (site / "boto3").exists() and not (site / "botocore").exists()
    assert not (site / "dovecote" / "cli").exists()


def _policy_for(raw: dict[str, Any], function: str) -> list[dict[str, Any]]:
    fn = next(
        v
        for k, v in resources(raw, "AWS::Lambda::Function").items()
        if v["Properties"]["Handler"] == {**FUNCTIONS, **{f.name: f for f in BACKGROUND}}[function].handler
    )
    role = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    statements: list[dict[str, Any]] = []
    for policy in resources(raw, "AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


def _logical_ids(value: Any) -> set[str]:
    text = json.dumps(value)
    return {part.split('"')[0] for part in text.split('"Fn::GetAtt": ["')[1:]} | {
        part.split('"')[0] for part in text.split('"Ref": "')[1:]
    }


def test_notes_role_touches_only_the_notes_table(synthesized: dict[str, Any]) -> None:
    raw = synthesized["raw"]
    tables = resources(raw, "AWS::DynamoDB::Table")
    notes = next(k for k in tables if k.startswith("DataNotes"))
    dynamo_statements = [
        s for s in _policy_for(raw, "notes_api") if any(a.startswith("dynamodb:") for a in _actions(s))
    ]
    assert dynamo_statements
    for statement in dynamo_statements:
        assert _logical_ids(statement["Resource"]) & set(tables) == {notes}
        assert not any(a in ("dynamodb:*", "dynamodb:Scan") for a in _actions(statement))


def test_tasks_role_touches_only_the_tasks_table(synthesized: dict[str, Any]) -> None:
    raw = synthesized["raw"]
    tables = resources(raw, "AWS::DynamoDB::Table")
    tasks = next(k for k in tables if k.startswith("DataTasks"))
    statements = [s for s in _policy_for(raw, "tasks_api") if any(a.startswith("dynamodb:") for a in _actions(s))]
    assert statements
    for statement in statements:
        assert _logical_ids(statement["Resource"]) & set(tables) == {tasks}
        assert not {"dynamodb:Scan", "dynamodb:DeleteItem", "dynamodb:*"} & set(_actions(statement))


def test_the_dispatcher_scans_only_the_claimable_index_and_updates_only_the_tasks_table(
    synthesized: dict[str, Any],
) -> None:
    """Its reshard pass (after a change of claim_shards) scans the sparse claimable index and moves
    entries with UpdateItem; nothing else of the table is scanned, nothing is deleted."""
    raw = synthesized["raw"]
    tables = resources(raw, "AWS::DynamoDB::Table")
    tasks = next(k for k in tables if k.startswith("DataTasks"))
    statements = [s for s in _policy_for(raw, DISPATCHER.name) if any(a.startswith("dynamodb:") for a in _actions(s))]
    scans = [s for s in statements if "dynamodb:Scan" in _actions(s)]
    assert scans and all(json.dumps(s["Resource"]).count("/index/claimable") == 1 for s in scans), scans
    assert all("/index/*" not in json.dumps(s["Resource"]) for s in statements)
    for statement in statements:
        assert _logical_ids(statement["Resource"]) & set(tables) == {tasks}
        assert not {"dynamodb:DeleteItem", "dynamodb:*"} & set(_actions(statement))


def test_a2a_role_is_the_callers_side_of_the_tasks_only(synthesized: dict[str, Any]) -> None:
    # The A2A function creates, replies, cancels and reads: no UpdateItem of a task item (a worker's
    # heartbeat), no delete, no scan; message parts read and written by digest, artifact payloads only
    # read. Its one UpdateItem is of its blocking-waits items (key prefix AW#, dovecote/a2a/waits.py).
    raw = synthesized["raw"]
    tables = resources(raw, "AWS::DynamoDB::Table")
    tasks = next(k for k in tables if k.startswith("DataTasks"))
    push = next(k for k in tables if k.startswith("DataPush"))
    statements = _policy_for(raw, "a2a_api")
    everything = [s for s in statements if any(a.startswith("dynamodb:") for a in _actions(s))]
    # Its webhooks (push notification configs): their own table, nothing else.
    configs = [s for s in everything if _logical_ids(s["Resource"]) & set(tables) == {push}]
    assert [sorted(_actions(s)) for s in configs] == [
        ["dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"]
    ]
    dynamo = [s for s in everything if s not in configs]
    assert [sorted(_actions(s)) for s in dynamo] == [
        ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"],
        ["dynamodb:UpdateItem"],
    ]
    assert _logical_ids(dynamo[0]["Resource"]) & set(tables) == {tasks}
    assert "index/by_authority" in json.dumps(dynamo[0]["Resource"]) and "index/*" not in json.dumps(dynamo[0])
    assert _logical_ids(dynamo[1]["Resource"]) & set(tables) == {tasks} and "index" not in json.dumps(dynamo[1])
    assert dynamo[1]["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["AW#*"]}}
    s3 = {
        json.dumps(s["Resource"]): sorted(_actions(s))
        for s in statements
        if any(a.startswith("s3:") for a in _actions(s))
    }
    assert sorted(s3.values()) == [["s3:GetObject"], ["s3:GetObject", "s3:PutObject"]]
    assert any("/parts/*" in k and v == ["s3:GetObject", "s3:PutObject"] for k, v in s3.items())
    assert any("/artifacts/*" in k and v == ["s3:GetObject"] for k, v in s3.items())


def test_authorizer_can_only_read_tokens(synthesized: dict[str, Any]) -> None:
    raw = synthesized["raw"]
    tables = resources(raw, "AWS::DynamoDB::Table")
    tokens = next(k for k in tables if k.startswith("DataTokens"))
    statements = [s for s in _policy_for(raw, "authorizer") if any(a.startswith("dynamodb:") for a in _actions(s))]
    assert [_actions(s) for s in statements] == [["dynamodb:GetItem"]]
    assert _logical_ids(statements[0]["Resource"]) & set(tables) == {tokens}
    assert not [s for s in _policy_for(raw, "authorizer") if any(a.startswith("s3:") for a in _actions(s))]


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else list(actions)


def test_bucket_is_kms_encrypted_private_versioned_and_denies_non_tls(synthesized: dict[str, Any]) -> None:
    template: Template = synthesized["template"]
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    Match.object_like({"ServerSideEncryptionByDefault": Match.object_like({"SSEAlgorithm": "aws:kms"})})
                ]
            },
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "VersioningConfiguration": {"Status": "Enabled"},
        },
    )
    bodies_props = next(
        v["Properties"]
        for k, v in resources(synthesized["raw"], "AWS::S3::Bucket").items()
        if k.startswith("DataBodies")
    )
    rules = bodies_props["LifecycleConfiguration"]["Rules"]
    uploads = next(r for r in rules if r.get("Prefix") == "uploads/")
    assert uploads["ExpirationInDays"] == 1 and uploads["NoncurrentVersionExpiration"] == {"NoncurrentDays": 1}
    # No blanket noncurrent expiry outside uploads/: it would expire a pinned body after a failed overwrite.
    assert all(r.get("Prefix") == "uploads/" for r in rules if "NoncurrentVersionExpiration" in r)
    policies = resources(synthesized["raw"], "AWS::S3::BucketPolicy")
    bodies = next(k for k in resources(synthesized["raw"], "AWS::S3::Bucket") if k.startswith("DataBodies"))
    policy = next(p for p in policies.values() if p["Properties"]["Bucket"] == {"Ref": bodies})
    deny = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert any(s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} and s["Action"] == "s3:*" for s in deny)


def test_model_tables_match_their_models(synthesized: dict[str, Any]) -> None:
    """One schema: the synthesized keys, attribute types, GSIs, projections, stream and TTL are the
    ones the PynamoDB models declare (the local runtime and the tests create tables from them too)."""
    from infra.local.resources import model_tables

    tables = resources(synthesized["raw"], "AWS::DynamoDB::Table")
    prefixes = {
        "tokens_table": "DataTokens",
        "notes_table": "DataNotes",
        "tasks_table": "DataTasks",
        "memory_table": "DataMemory",
        "recall_table": "DataRecall",
        "push_table": "DataPush",
    }
    for table in model_tables():
        props = next(t["Properties"] for k, t in tables.items() if k.startswith(prefixes[table.setting]))
        want = table.schema()
        assert sorted(props["KeySchema"], key=lambda k: k["KeyType"]) == want["KeySchema"], table.setting
        assert sorted(props["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == sorted(
            want["AttributeDefinitions"], key=lambda a: a["AttributeName"]
        ), table.setting
        got_indexes = {
            i["IndexName"]: (sorted(i["KeySchema"], key=lambda k: k["KeyType"]), i["Projection"])
            for i in props.get("GlobalSecondaryIndexes", [])
        }
        want_indexes = {i["IndexName"]: (i["KeySchema"], i["Projection"]) for i in want["GlobalSecondaryIndexes"]}
        assert got_indexes == want_indexes, table.setting
        if table.stream:
            assert props["StreamSpecification"] == {"StreamViewType": table.stream}
        else:
            assert "StreamSpecification" not in props
        if table.ttl:
            assert props["TimeToLiveSpecification"] == {"AttributeName": table.ttl, "Enabled": True}


def test_the_token_listing_index_never_holds_the_hash(synthesized: dict[str, Any]) -> None:
    tables = resources(synthesized["raw"], "AWS::DynamoDB::Table")
    tokens = next(t["Properties"] for k, t in tables.items() if k.startswith("DataTokens"))
    (index,) = tokens["GlobalSecondaryIndexes"]
    assert index["Projection"]["ProjectionType"] == "INCLUDE"
    assert "token_hash" not in index["Projection"]["NonKeyAttributes"]


def test_tables_are_on_demand_with_pitr_and_the_list_indexes(synthesized: dict[str, Any]) -> None:
    tables = resources(synthesized["raw"], "AWS::DynamoDB::Table")
    from infra.local.resources import model_tables

    assert len(tables) == len(model_tables())
    tasks = next(t["Properties"] for k, t in tables.items() if k.startswith("DataTasks"))
    assert {i["IndexName"] for i in tasks["GlobalSecondaryIndexes"]} == {
        "claimable",
        "leases",
        "by_context",
        "by_authority",
        "expiring",
    }
    for props in (t["Properties"] for t in tables.values()):
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        assert props["SSESpecification"]["SSEEnabled"] is True
    notes = next(t["Properties"] for k, t in tables.items() if k.startswith("DataNotes"))
    # Views are items in the base table (strongly consistent lists), not GSIs.
    assert "GlobalSecondaryIndexes" not in notes
    assert notes["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}


def test_janitor_consumes_only_note_removals_and_replacements(synthesized: dict[str, Any]) -> None:
    mappings = resources(synthesized["raw"], "AWS::Lambda::EventSourceMapping")
    streams = [
        m["Properties"]
        for m in mappings.values()
        if "StreamArn" in json.dumps(m["Properties"]["EventSourceArn"])
        and "DataNotes" in json.dumps(m["Properties"]["EventSourceArn"])
    ]
    assert len(streams) == 1
    props = streams[0]
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    queues = resources(synthesized["raw"], "AWS::SQS::Queue")
    (dlq,) = _logical_ids(props["DestinationConfig"]["OnFailure"]["Destination"])
    assert dlq.startswith("ApiJanitorFailures")
    pattern = json.loads(props["FilterCriteria"]["Filters"][0]["Pattern"])
    assert pattern == {"eventName": ["REMOVE", "MODIFY"], "dynamodb": {"Keys": {"pk": {"S": [{"prefix": "a#"}]}}}}
    janitor = [
        s for s in _policy_for(synthesized["raw"], "notes_janitor") if any(a.startswith("s3:") for a in _actions(s))
    ]
    assert [sorted(_actions(s)) for s in janitor] == [["s3:DeleteObject", "s3:DeleteObjectVersion"]]
    # The failure destination holds metadata only: SQS-managed encryption, no KMS grant for it.
    assert queues[dlq]["Properties"].get("SqsManagedSseEnabled") is True


def test_routes_come_from_the_route_table(synthesized: dict[str, Any]) -> None:
    routes = resources(synthesized["raw"], "AWS::ApiGatewayV2::Route")
    keys = {r["Properties"]["RouteKey"]: r["Properties"] for r in routes.values()}
    assert set(keys) == {f"{r.method} {r.path}" for r in ALL_ROUTES}
    for route in ALL_ROUTES:
        props = keys[f"{route.method} {route.path}"]
        assert props.get("AuthorizationType", "NONE") == ("CUSTOM" if route.authorized else "NONE")
    authorizer = next(iter(resources(synthesized["raw"], "AWS::ApiGatewayV2::Authorizer").values()))["Properties"]
    assert authorizer["EnableSimpleResponses"] is True
    assert authorizer["IdentitySource"] == ["$request.header.Authorization"]
    assert authorizer["AuthorizerResultTtlInSeconds"] == 300


def test_log_retention_encryption_and_access_logs(synthesized: dict[str, Any]) -> None:
    groups = resources(synthesized["raw"], "AWS::Logs::LogGroup")
    assert (
        len(groups) == len(FUNCTIONS) + len(BACKGROUND) + len(FRONTED) + 1 + 3
    )  # + API access logs + the domain's three
    key = next(iter(resources(synthesized["raw"], "AWS::KMS::Key")))
    for group in groups.values():
        assert group["Properties"]["RetentionInDays"] == 30
        assert group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key, "Arn"]}
    stage = next(iter(resources(synthesized["raw"], "AWS::ApiGatewayV2::Stage").values()))["Properties"]
    assert "DestinationArn" in stage["AccessLogSettings"]
    access_format = json.loads(stage["AccessLogSettings"]["Format"])
    assert access_format["authority"] == "$context.authorizer.authority"
    assert (
        access_format["role"] == "$context.authorizer.role" and access_format["worker"] == "$context.authorizer.worker"
    )


def test_the_access_log_bucket_takes_logs_through_a_bucket_policy_not_an_acl(synthesized: dict[str, Any]) -> None:
    raw = synthesized["raw"]
    logs_bucket = next(k for k in resources(raw, "AWS::S3::Bucket") if k.startswith("DataAccessLogs"))
    props = raw["Resources"][logs_bucket]["Properties"]
    assert "AccessControl" not in props
    assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    policy = next(
        p for p in resources(raw, "AWS::S3::BucketPolicy").values() if p["Properties"]["Bucket"] == {"Ref": logs_bucket}
    )
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s.get("Principal") == {"Service": "logging.s3.amazonaws.com"} and s["Action"] == "s3:PutObject"
        for s in statements
    )


def test_every_kms_grant_is_bound_to_a_service_and_an_encryption_context(synthesized: dict[str, Any]) -> None:
    raw = synthesized["raw"]
    grants = payload_grants = 0
    for policy in resources(raw, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if not any(a.startswith("kms:") for a in _actions(statement)):
                continue
            grants += 1
            conditions = statement.get("Condition") or {}
            contexts = [k for op in conditions.values() for k in op if k.startswith("kms:EncryptionContext:")]
            if contexts == ["kms:EncryptionContext:dovecote"]:
                # Protected payloads: tasks_api (and a2a_api) ask KMS for data keys, bound to the payload
                # context, and may do nothing else with the key.
                assert conditions["StringEquals"]["kms:EncryptionContext:dovecote"] == "payload"
                assert sorted(_actions(statement)) == ["kms:Decrypt", "kms:GenerateDataKey"], statement
                payload_grants += 1
                continue
            assert "kms:ViaService" in conditions.get("StringEquals", {}), statement
            # The stream reader is the one grant without a context: DynamoDB Streams sets none.
            assert contexts or _actions(statement) == ["kms:Decrypt"], statement
    assert grants >= 8
    # tasks_api, a2a_api and the streams function (messages sent over A2A on the streaming front) seal payloads;
    # push_api seals webhook credentials, push_sender opens them (and the task's payloads it notifies of)
    assert payload_grants == 5


def test_each_function_receives_only_the_settings_it_names(synthesized: dict[str, Any]) -> None:
    for spec in (*BACKGROUND, *FRONTED, *FUNCTIONS.values()):
        fn = next(
            f["Properties"]
            for f in resources(synthesized["raw"], "AWS::Lambda::Function").values()
            if f["Properties"]["Handler"] == handler_of(spec)
        )
        names = {k for k in fn["Environment"]["Variables"] if k.startswith("DOVECOTE_")}
        assert names <= {f"DOVECOTE_{s.upper()}" for s in spec.settings}, spec.name
        assert fn["ReservedConcurrentExecutions"] == spec.reserved
    authorizer = next(
        f["Properties"]
        for f in resources(synthesized["raw"], "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == AUTHORIZER.handler
    )
    assert set(authorizer["Environment"]["Variables"]) == {
        "DOVECOTE_TOKENS_TABLE",
        "POWERTOOLS_SERVICE_NAME",
        "POWERTOOLS_METRICS_NAMESPACE",
        "POWERTOOLS_TRACE_DISABLED",
        "PYDANTIC_DISABLE_PLUGINS",
    }
    assert authorizer["Environment"]["Variables"]["POWERTOOLS_TRACE_DISABLED"] == "true"


def test_the_agent_card_names_the_streaming_front(synthesized: dict[str, Any]) -> None:
    # Configured from the stack itself, never from a request's Host or X-Forwarded-Proto: the A2A
    # interface lives on the streaming front (infra/constructs/streams.py).
    raw = synthesized["raw"]
    a2a = next(
        f["Properties"]
        for f in resources(raw, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == FUNCTIONS["a2a_api"].handler
    )
    url = a2a["Environment"]["Variables"]["DOVECOTE_PUBLIC_URL"]
    front = set(resources(raw, "AWS::ApiGateway::RestApi"))
    assert len(front) == 1 and {"Ref": next(iter(front))} in url["Fn::Join"][1], url
    assert url["Fn::Join"][1][-1].endswith("/streams")
    streams = next(
        f["Properties"]
        for f in resources(raw, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == STREAM_HANDLER
    )
    assert streams["Environment"]["Variables"]["DOVECOTE_PUBLIC_URL"] == url


def test_functions_run_with_the_environment_the_cold_start_bench_measures(synthesized: dict[str, Any]) -> None:
    """bench/coldstart.py runs each probe with Function.environment: the deployed values must be those."""
    functions = resources(synthesized["raw"], "AWS::Lambda::Function").values()
    for spec in (*BACKGROUND, *FUNCTIONS.values()):
        fn = next(f["Properties"] for f in functions if f["Properties"]["Handler"] == spec.handler)
        variables = fn["Environment"]["Variables"]
        expected = spec.environment(subsegments=False)
        assert {k: variables.get(k) for k in expected} == expected, spec.name
        assert expected["PYDANTIC_DISABLE_PLUGINS"] == "__all__"


def test_notes_can_tell_a_missing_upload_from_a_denied_one(synthesized: dict[str, Any]) -> None:
    statements = _policy_for(synthesized["raw"], "notes_api")
    listing = [s for s in statements if _actions(s) == ["s3:ListBucket"]]
    assert len(listing) == 1
    assert listing[0]["Condition"] == {"StringLike": {"s3:prefix": ["uploads/notes/*"]}}


def test_the_reconciler_runs_on_a_schedule_with_only_its_permissions(synthesized: dict[str, Any]) -> None:
    raw = synthesized["raw"]
    rules = resources(raw, "AWS::Events::Rule")
    assert sorted(r["Properties"]["ScheduleExpression"] for r in rules.values()) == ["rate(1 day)", "rate(1 minute)"]
    actions = sorted(
        a
        for s in _policy_for(raw, "notes_reconciler")
        for a in _actions(s)
        if not a.startswith(("logs:", "xray:", "kms:"))
    )
    assert actions == [
        "dynamodb:BatchGetItem",
        "s3:DeleteObjectVersion",
        "s3:ListBucketVersions",
        "sqs:GetQueueAttributes",  # its failure destination
        "sqs:GetQueueUrl",
        "sqs:SendMessage",
    ]


def test_production_context_retains_data(production_template: Template) -> None:
    production_template.has_resource(
        "AWS::DynamoDB::Table",
        {"DeletionPolicy": "Retain", "Properties": Match.object_like({"DeletionProtectionEnabled": True})},
    )


def test_memory_writes_flow_through_a_fifo_queue_with_a_dead_letter_queue(synthesized: dict[str, Any]) -> None:
    from dovecote.memory.worker import REDRIVE_MAX_RECEIVES

    raw = synthesized["raw"]
    queues = resources(raw, "AWS::SQS::Queue")
    writes = next(q["Properties"] for k, q in queues.items() if k.startswith("MemoryWrites"))
    failures_id = next(k for k in queues if k.startswith("MemoryWriteFailures"))
    failures = queues[failures_id]["Properties"]
    assert writes["FifoQueue"] is True and failures["FifoQueue"] is True
    assert writes.get("ContentBasedDeduplication") in (None, False)
    assert writes["RedrivePolicy"]["maxReceiveCount"] == REDRIVE_MAX_RECEIVES
    assert _logical_ids(writes["RedrivePolicy"]["deadLetterTargetArn"]) == {failures_id}
    assert writes["VisibilityTimeout"] >= 6 * MEMORY_WORKER.timeout_s
    mapping = next(
        m["Properties"]
        for m in resources(raw, "AWS::Lambda::EventSourceMapping").values()
        if any(k.startswith("MemoryWrites") for k in _logical_ids(m["Properties"]["EventSourceArn"]))
    )
    assert mapping["BatchSize"] == MEMORY_WORKER_BATCH_SIZE
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # The worker sends only to the DLQ; its other queue actions are the event source mapping's.
    worker_sqs = [s for s in _policy_for(raw, "memory_worker") if any(a.startswith("sqs:") for a in _actions(s))]
    sends = [s for s in worker_sqs if "sqs:SendMessage" in _actions(s)]
    assert [_logical_ids(s["Resource"]) for s in sends] == [{failures_id}]
    api_sqs = [s for s in _policy_for(raw, "memory_api") if any(a.startswith("sqs:") for a in _actions(s))]
    assert sorted(a for s in api_sqs for a in _actions(s)) == [
        "sqs:ChangeMessageVisibility",
        "sqs:DeleteMessage",
        "sqs:ReceiveMessage",
        "sqs:SendMessage",
    ]
    assert not any(a.startswith("dynamodb:Scan") for s in _policy_for(raw, "memory_api") for a in _actions(s))


@pytest.fixture(scope="module")
def snapstart(options_synth: dict[str, Any]) -> dict[str, Any]:
    assert OPTIONS["snapstart"] is True
    return options_synth


def test_snapstart_is_off_unless_asked(synthesized: dict[str, Any]) -> None:
    raw = synthesized["raw"]
    assert not resources(raw, "AWS::Lambda::Alias") and not resources(raw, "AWS::Lambda::Version")
    assert all("SnapStart" not in f["Properties"] for f in resources(raw, "AWS::Lambda::Function").values())


def test_snapstart_serves_the_api_from_published_versions_behind_an_alias(snapstart: dict[str, Any]) -> None:
    raw = snapstart["raw"]
    functions = resources(raw, "AWS::Lambda::Function")
    by_handler = {f["Properties"]["Handler"]: k for k, f in functions.items()}
    api = {AUTHORIZER.handler, *(spec.handler for spec in FUNCTIONS.values())}
    for handler, logical in by_handler.items():
        expected = {"ApplyOn": "PublishedVersions"} if handler in api else None
        assert functions[logical]["Properties"].get("SnapStart") == expected, handler
    aliases = resources(raw, "AWS::Lambda::Alias")
    versions = resources(raw, "AWS::Lambda::Version")
    assert len(aliases) == len(versions) == len(api)
    aliased = {}
    for logical, alias in aliases.items():
        props = alias["Properties"]
        assert props["Name"] == "live"
        version = versions[props["FunctionVersion"]["Fn::GetAtt"][0]]["Properties"]
        aliased[logical] = version["FunctionName"]["Ref"]
    assert sorted(aliased.values()) == sorted(by_handler[h] for h in api)
    # API Gateway invokes the aliases, never the unpublished $LATEST of a SnapStart function.
    targets = [i["Properties"]["IntegrationUri"] for i in resources(raw, "AWS::ApiGatewayV2::Integration").values()]
    authorizer = next(iter(resources(raw, "AWS::ApiGatewayV2::Authorizer").values()))["Properties"]
    text = json.dumps([targets, authorizer["AuthorizerUri"]])
    assert all(f'"Ref": "{logical}"' in text for logical in aliases)
    assert not any(f'"{by_handler[h]}"' in text for h in api)


def test_snapstart_passes_cdk_nag_and_cfn_lint(snapstart: dict[str, Any]) -> None:
    from infra.cfn_lint import lint

    report = json.loads((snapstart["outdir"] / "validation-report.json").read_text())
    assert [v for p in report["pluginReports"] for v in p.get("violations", [])] == []
    assert all(p["conclusion"] == "success" for p in report["pluginReports"])
    result = lint(str(snapstart["outdir"] / "Dovecote.template.json"))
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout + result.stderr


def test_the_claim_shards_context_reaches_every_function_that_writes_task_items(
    options_synth: dict[str, Any], synthesized: dict[str, Any]
) -> None:
    """`-c claim_shards=N`: the claimable index's layout, so the tasks API, A2A and the dispatcher (a
    fence rewrites the task item) must all agree on it; without the context none is told (the code's
    default)."""
    assert OPTIONS["claim_shards"] == 16  # the default is 1 (the reference's strict order): a fleet's option
    raw = options_synth["raw"]

    def told(template: dict[str, Any]) -> dict[str, str]:
        return {
            f["Properties"]["Handler"]: f["Properties"]["Environment"]["Variables"]["DOVECOTE_CLAIM_SHARDS"]
            for f in resources(template, "AWS::Lambda::Function").values()
            if "DOVECOTE_CLAIM_SHARDS" in f["Properties"].get("Environment", {}).get("Variables", {})
        }

    writers = {FUNCTIONS["tasks_api"].handler, FUNCTIONS["a2a_api"].handler, DISPATCHER.handler, STREAM_HANDLER}
    assert told(raw) == dict.fromkeys(writers, "16")
    assert told(synthesized["raw"]) == {}
