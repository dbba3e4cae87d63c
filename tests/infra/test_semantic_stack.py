"""The semantic tier in the cloud (infra/constructs/search.py): with the context `embedder=bedrock`, the two
recall functions may invoke exactly Titan Text Embeddings V2 in the stack's region and read the
embedder settings, an hourly schedule runs the indexer's backfill, and cdk-nag still passes with no
new acknowledgment; without it (the default) none of that is in the template. The default stack's
own gates are tests/infra/test_stack.py's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.app import build_app
from infra.routes import TRANSCRIPT_INDEXER
from tests.infra.conftest import OPTIONS
from tests.infra.test_recall_opensearch_stack import RECALL_FUNCTIONS, text
from tests.infra.test_stack import _actions, _policy_for, resources

TITAN_V2_ARN = "arn:<AWS::Partition>:bedrock:<AWS::Region>::foundation-model/amazon.titan-embed-text-v2:0"


@pytest.fixture(scope="module")
def with_bedrock(options_synth: dict[str, Any]) -> dict[str, Any]:
    """The options synthesis (tests/infra/conftest.py), which turns the tier on at 256 dimensions."""
    assert (OPTIONS["embedder"], OPTIONS["embedding_dimension"]) == ("bedrock", 256)
    outdir = options_synth["outdir"]
    report = json.loads((outdir / "validation-report.json").read_text())
    return {"raw": options_synth["raw"], "report": report, "template": outdir / "Dovecote.template.json"}


@pytest.fixture(scope="module")
def lexical_only(default_synth: dict[str, Any]) -> dict[str, Any]:
    return default_synth


def bedrock_statements(raw: dict[str, Any], function: str) -> list[dict[str, Any]]:
    return [s for s in _policy_for(raw, function) if any(a.startswith("bedrock:") for a in _actions(s))]


def function_env(raw: dict[str, Any], handler: str) -> dict[str, Any]:
    fn = next(v for v in resources(raw, "AWS::Lambda::Function").values() if v["Properties"]["Handler"] == handler)
    return dict(fn["Properties"]["Environment"]["Variables"])


def test_each_recall_function_may_invoke_exactly_titan_v2_in_the_stacks_region(with_bedrock: dict[str, Any]) -> None:
    raw = with_bedrock["raw"]
    for function in RECALL_FUNCTIONS:
        statements = bedrock_statements(raw, function)
        assert len(statements) == 1, function
        statement = statements[0]
        assert statement["Effect"] == "Allow"
        assert _actions(statement) == ["bedrock:InvokeModel"]
        assert text(statement["Resource"]) == TITAN_V2_ARN
        assert "Condition" not in statement
    # No other role may call Bedrock at all.
    every = [
        s
        for policy in resources(raw, "AWS::IAM::Policy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if any(a.startswith("bedrock:") for a in _actions(s))
    ]
    assert len(every) == len(RECALL_FUNCTIONS)


def test_the_recall_functions_read_the_embedder_and_its_dimension(with_bedrock: dict[str, Any]) -> None:
    from infra.routes import FUNCTIONS

    for handler in (FUNCTIONS["recall_api"].handler, TRANSCRIPT_INDEXER.handler):
        env = function_env(with_bedrock["raw"], handler)
        assert env["DOVECOTE_EMBEDDER"] == "bedrock"
        assert env["DOVECOTE_EMBED_DIMENSION"] == "256"
    notes = function_env(with_bedrock["raw"], FUNCTIONS["notes_api"].handler)
    assert "DOVECOTE_EMBEDDER" not in notes


def test_an_hourly_schedule_runs_the_indexers_backfill(with_bedrock: dict[str, Any]) -> None:
    raw = with_bedrock["raw"]
    rules = list(resources(raw, "AWS::Events::Rule").values())
    backfill = [r for r in rules if r["Properties"].get("ScheduleExpression") == "rate(1 hour)"]
    assert len(backfill) == 1
    (target,) = backfill[0]["Properties"]["Targets"]
    indexer = next(
        k
        for k, v in resources(raw, "AWS::Lambda::Function").items()
        if v["Properties"]["Handler"] == TRANSCRIPT_INDEXER.handler
    )
    assert target["Arn"] == {"Fn::GetAtt": [indexer, "Arn"]}
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 0  # the next hour retries
    dlq = next(k for k in resources(raw, "AWS::SQS::Queue") if k.startswith("SearchTranscriptFailures"))
    assert target["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": [dlq, "Arn"]}  # alarmed (transcript-failures)
    (invoke,) = [
        v
        for v in resources(raw, "AWS::Lambda::EventInvokeConfig").values()
        if v["Properties"]["FunctionName"] == {"Fn::GetAtt": [indexer, "Arn"]}
    ]
    assert invoke["Properties"]["MaximumRetryAttempts"] == 0
    assert invoke["Properties"]["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": [dlq, "Arn"]}
    permissions = [
        p["Properties"]
        for p in resources(raw, "AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "events.amazonaws.com"
    ]
    assert any(p["FunctionName"] == {"Fn::GetAtt": [indexer, "Arn"]} for p in permissions)


def test_cdk_nag_passes_with_the_tier_on(with_bedrock: dict[str, Any]) -> None:
    report = with_bedrock["report"]
    violations = [v for p in report["pluginReports"] for v in p.get("violations", [])]
    assert violations == []
    assert all(p["conclusion"] == "success" for p in report["pluginReports"])


def test_cfn_lint_finds_nothing_with_the_tier_on(with_bedrock: dict[str, Any]) -> None:
    from infra.cfn_lint import lint

    result = lint(str(with_bedrock["template"]))
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout + result.stderr


def test_by_default_no_role_may_call_bedrock_and_nothing_is_scheduled(lexical_only: dict[str, Any]) -> None:
    from infra.routes import FUNCTIONS

    raw = lexical_only["raw"]
    for function in RECALL_FUNCTIONS:
        assert bedrock_statements(raw, function) == []
        spec = TRANSCRIPT_INDEXER if function == TRANSCRIPT_INDEXER.name else FUNCTIONS[function]
        assert "DOVECOTE_EMBEDDER" not in function_env(raw, spec.handler)
    assert not [
        r
        for r in resources(raw, "AWS::Events::Rule").values()
        if r["Properties"].get("ScheduleExpression") == "rate(1 hour)"
    ]


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"embedder": "local"}, "context embedder must be one of"),
        ({"embedder": "bedrock", "embedding_dimension": "384"}, "context embedding_dimension must be one of"),
    ],
)
def test_a_wrong_context_value_fails_the_synth(tmp_path: Path, context: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_app(outdir=str(tmp_path), context=dict(context))


def test_the_domain_runs_a_version_with_lucene_filtered_knn(with_bedrock: dict[str, Any]) -> None:
    """The engine's knn query puts the search's filters inside it (the Lucene engine's efficient
    filtering, OpenSearch 2.4 and later); every domain has the k-NN plugin."""
    (domain,) = resources(with_bedrock["raw"], "AWS::OpenSearchService::Domain").values()
    engine, version = domain["Properties"]["EngineVersion"].split("_")
    major, minor = (int(part) for part in version.split(".")[:2])
    assert engine == "OpenSearch" and (major, minor) >= (2, 4)
