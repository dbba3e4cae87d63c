"""Recall's cloud resources (infra/constructs/search.py): the OpenSearch domain, the transcript upload
queue and its notifications, the indexer's event source, the alarms, and the recall functions' least
privilege. cdk-nag and cfn-lint over the whole template are tests/infra/test_stack.py's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Template

from dovecote.recall.records import RECALL_TABLE
from infra.constructs.search import ES_ACTIONS, ES_ROOT_PATHS, RECEIVES_BEFORE_DLQ
from infra.routes import FUNCTIONS, TRANSCRIPT_INDEXER, TRANSCRIPT_INDEXER_BATCH_SIZE, TRANSCRIPT_UPLOADS_PREFIX
from tests.infra.test_stack import _actions, _logical_ids, _policy_for, resources

RECALL_FUNCTIONS = ("recall_api", TRANSCRIPT_INDEXER.name)


@pytest.fixture(scope="module")
def synthesized(default_synth: dict[str, Any]) -> dict[str, Any]:
    return default_synth


def one(raw: dict[str, Any], kind: str, prefix: str = "") -> tuple[str, dict[str, Any]]:
    found = [(k, v) for k, v in resources(raw, kind).items() if k.startswith(prefix)]
    assert len(found) == 1, [k for k, _ in found]
    return found[0]


def role_id(raw: dict[str, Any], function: str) -> str:
    spec = {**FUNCTIONS, TRANSCRIPT_INDEXER.name: TRANSCRIPT_INDEXER}[function]
    fn = next(v for v in resources(raw, "AWS::Lambda::Function").values() if v["Properties"]["Handler"] == spec.handler)
    return str(fn["Properties"]["Role"]["Fn::GetAtt"][0])


def text(value: Any) -> str:
    """A CloudFormation string (a Join of literals and references) as one comparable string."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        return "".join(text(part) for part in value["Fn::Join"][1])
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return "<" + ".".join(value["Fn::GetAtt"]) + ">"
    if isinstance(value, dict) and "Ref" in value:
        return "<" + value["Ref"] + ">"
    return json.dumps(value)


def test_the_domain_is_encrypted_signed_and_logged(synthesized: dict[str, Any]) -> None:
    raw = synthesized["raw"]
    _, domain = one(raw, "AWS::OpenSearchService::Domain")
    props = domain["Properties"]
    key, _ = one(raw, "AWS::KMS::Key")
    assert props["EngineVersion"] == "OpenSearch_2.19"
    assert props["EncryptionAtRestOptions"] == {"Enabled": True, "KmsKeyId": {"Ref": key}}
    assert props["NodeToNodeEncryptionOptions"] == {"Enabled": True}
    assert props["DomainEndpointOptions"]["EnforceHTTPS"] is True
    assert props["DomainEndpointOptions"]["TLSSecurityPolicy"].startswith("Policy-Min-TLS-1-2")
    assert "AdvancedSecurityOptions" not in props  # IAM only: no internal users, no basic auth
    assert set(props["LogPublishingOptions"]) == {"SEARCH_SLOW_LOGS", "INDEX_SLOW_LOGS", "ES_APPLICATION_LOGS"}
    groups = resources(raw, "AWS::Logs::LogGroup")
    for option in props["LogPublishingOptions"].values():
        group = groups[option["CloudWatchLogsLogGroupArn"]["Fn::GetAtt"][0]]
        assert group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key, "Arn"]}
    # Outside production: one small node, no zones (tests/infra: production below)
    assert props["ClusterConfig"]["InstanceCount"] == 1 and props["ClusterConfig"]["ZoneAwarenessEnabled"] is False


def test_only_the_two_recall_roles_may_call_the_domain(synthesized: dict[str, Any]) -> None:
    raw = synthesized["raw"]
    _, domain = one(raw, "AWS::OpenSearchService::Domain")
    (statement,) = domain["Properties"]["AccessPolicies"]["Statement"]
    assert statement["Effect"] == "Allow" and statement["Action"] == ES_ACTIONS
    assert statement["Principal"]["AWS"] == [{"Fn::GetAtt": [role_id(raw, f), "Arn"]} for f in RECALL_FUNCTIONS]
    assert text(statement["Resource"]).endswith(f":domain/{domain['Properties']['DomainName']}/*")
    # and no other role holds an es: action
    holders = set()
    for policy in resources(raw, "AWS::IAM::Policy").values():
        for s in policy["Properties"]["PolicyDocument"]["Statement"]:
            if any(a.startswith("es:") for a in _actions(s)):
                holders |= {r["Ref"] for r in policy["Properties"]["Roles"]}
    assert holders == {role_id(raw, f) for f in RECALL_FUNCTIONS}


def test_the_recall_roles_reach_only_the_recall_indices(synthesized: dict[str, Any]) -> None:
    raw = synthesized["raw"]
    domain_id, _ = one(raw, "AWS::OpenSearchService::Domain")
    for function in RECALL_FUNCTIONS:
        statements = [s for s in _policy_for(raw, function) if any(a.startswith("es:") for a in _actions(s))]
        assert len(statements) == 1 and _actions(statements[0]) == ES_ACTIONS
        paths = sorted(text(r) for r in statements[0]["Resource"])
        assert paths == sorted(
            [f"<{domain_id}.Arn>/dovecote-recall-*"] + [f"<{domain_id}.Arn>/{p}" for p in ES_ROOT_PATHS]
        )


def test_the_recall_table_is_built_from_its_model(synthesized: dict[str, Any]) -> None:
    _, table = one(synthesized["raw"], "AWS::DynamoDB::Table", "DataRecall")
    props = table["Properties"]
    assert props["TimeToLiveSpecification"] == {"AttributeName": RECALL_TABLE.ttl, "Enabled": True}
    assert sorted(props["KeySchema"], key=lambda k: k["KeyType"]) == RECALL_TABLE.schema()["KeySchema"]


@pytest.mark.parametrize(
    ("function", "table_actions", "object_grants", "listing"),
    [
        (
            "recall_api",
            ["dynamodb:PutItem", "dynamodb:Query"],
            {
                "transcripts/*": ["s3:GetObject", "s3:PutObject"],
                "topics/*": ["s3:GetObject", "s3:PutObject"],
                "uploads/transcripts/*": ["s3:PutObject"],
            },
            ["transcripts/*", "topics/*"],
        ),
        (
            TRANSCRIPT_INDEXER.name,
            ["dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:UpdateItem"],
            {"uploads/transcripts/*": ["s3:DeleteObject", "s3:GetObject"], "transcripts/*": ["s3:PutObject"]},
            ["uploads/transcripts/*"],
        ),
    ],
)
def test_each_recall_function_has_only_what_its_calls_need(
    synthesized: dict[str, Any],
    function: str,
    table_actions: list[str],
    object_grants: dict[str, list[str]],
    listing: list[str],
) -> None:
    raw = synthesized["raw"]
    statements = _policy_for(raw, function)
    tables = resources(raw, "AWS::DynamoDB::Table")
    recall_table, _ = one(raw, "AWS::DynamoDB::Table", "DataRecall")
    bucket, _ = one(raw, "AWS::S3::Bucket", "DataBodies")
    dynamo = [s for s in statements if any(a.startswith("dynamodb:") for a in _actions(s))]
    assert [sorted(_actions(s)) for s in dynamo] == [table_actions]
    assert _logical_ids(dynamo[0]["Resource"]) & set(tables) == {recall_table}
    granted: dict[str, set[str]] = {}
    for s in statements:
        for action in _actions(s):
            if action.startswith("s3:") and action != "s3:ListBucket":
                for resource in s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]:
                    granted.setdefault(text(resource).removeprefix(f"<{bucket}.Arn>/"), set()).add(action)
    assert {k: sorted(v) for k, v in granted.items()} == object_grants
    (listed,) = [s for s in statements if _actions(s) == ["s3:ListBucket"]]
    assert listed["Condition"] == {"StringLike": {"s3:prefix": listing}}


def test_the_indexer_consumes_the_upload_queue_one_file_at_a_time(synthesized: dict[str, Any]) -> None:
    raw = synthesized["raw"]
    queue_id, queue = one(raw, "AWS::SQS::Queue", "SearchTranscriptUploads")
    dlq_id, dlq = one(raw, "AWS::SQS::Queue", "SearchTranscriptFailures")
    mapping = next(
        m["Properties"]
        for m in resources(raw, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"].get("EventSourceArn") == {"Fn::GetAtt": [queue_id, "Arn"]}
    )
    assert mapping["BatchSize"] == TRANSCRIPT_INDEXER_BATCH_SIZE
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["FunctionName"] == {
        "Ref": next(k for k in resources(raw, "AWS::Lambda::Function") if "indexer" in k)
    }
    assert queue["Properties"]["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": RECEIVES_BEFORE_DLQ,
    }
    assert queue["Properties"]["VisibilityTimeout"] >= 6 * TRANSCRIPT_INDEXER.timeout_s
    for props in (queue["Properties"], dlq["Properties"]):
        assert props["SqsManagedSseEnabled"] is True


def test_the_bucket_notifies_the_queue_of_transcript_uploads_only(synthesized: dict[str, Any]) -> None:
    raw = synthesized["raw"]
    queue_id, _ = one(raw, "AWS::SQS::Queue", "SearchTranscriptUploads")
    _, bucket = one(raw, "AWS::S3::Bucket", "DataBodies")
    (config,) = bucket["Properties"]["NotificationConfiguration"]["QueueConfigurations"]
    assert config["Event"] == "s3:ObjectCreated:*"
    assert config["Queue"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    assert config["Filter"] == {"S3Key": {"Rules": [{"Name": "prefix", "Value": TRANSCRIPT_UPLOADS_PREFIX}]}}
    # S3 checks the queue policy when the configuration is applied: the bucket waits for it.
    policy_id, policy = next(
        (k, v)
        for k, v in resources(raw, "AWS::SQS::QueuePolicy").items()
        if v["Properties"]["Queues"] == [{"Ref": queue_id}]
    )
    assert policy_id in bucket["DependsOn"]
    (allow,) = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "s3.amazonaws.com"} and allow["Action"] == "sqs:SendMessage"
    assert allow["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    # No notification custom resource (and its function) was deployed for it (the console's file copier
    # is the one custom resource: tests/infra/test_console_stack.py).
    custom = [k for k, v in raw["Resources"].items() if v["Type"].startswith("Custom::")]
    assert [raw["Resources"][k]["Type"] for k in custom] == ["Custom::CDKBucketDeployment"]


def test_the_queue_and_the_domain_are_alarmed(synthesized: dict[str, Any]) -> None:
    raw = synthesized["raw"]
    queue_id, _ = one(raw, "AWS::SQS::Queue", "SearchTranscriptUploads")
    dlq_id, _ = one(raw, "AWS::SQS::Queue", "SearchTranscriptFailures")
    alarms = [a["Properties"] for a in resources(raw, "AWS::CloudWatch::Alarm").values()]

    def on(metric: str, dimension: Any) -> dict[str, Any]:
        (found,) = [a for a in alarms if a["MetricName"] == metric and dimension in json.dumps(a["Dimensions"])]
        return found

    depth = on("ApproximateNumberOfMessagesVisible", dlq_id)
    assert (depth["Threshold"], depth["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    age = on("ApproximateAgeOfOldestMessage", queue_id)
    assert age["Threshold"] == 900 and age["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert {a["MetricName"] for a in alarms if a["Namespace"] == "AWS/ES"} == {
        "ClusterStatus.red",
        "ClusterIndexWritesBlocked",
        "FreeStorageSpace",
    }


def test_production_runs_two_zones_and_retains_the_domain(production_template: Template) -> None:
    (domain,) = production_template.find_resources("AWS::OpenSearchService::Domain").values()
    cluster = domain["Properties"]["ClusterConfig"]
    assert cluster["InstanceCount"] == 2 and cluster["ZoneAwarenessEnabled"] is True
    assert cluster["ZoneAwarenessConfig"] == {"AvailabilityZoneCount": 2}
    assert domain["DeletionPolicy"] == "Retain"
