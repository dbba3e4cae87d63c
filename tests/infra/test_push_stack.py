"""Webhooks in the synthesized template (infra/constructs/push.py): the FIFO queue and its redrive,
the alarms, the signing-key secret, the sender outside any VPC, the loopback switch nowhere, and the
sender's and fan-out's least privilege."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dovecote.push.queue import redrive_max_receives
from infra.routes import PUSH_FANOUT, PUSH_QUEUE_VISIBILITY_S, PUSH_SENDER
from tests.infra.test_stack import _actions, _policy_for, resources


@pytest.fixture(scope="module")
def raw(default_synth: dict[str, Any]) -> dict[str, Any]:
    return dict(default_synth["raw"])


def _queue(raw: dict[str, Any], prefix: str) -> tuple[str, dict[str, Any]]:
    return next((k, q["Properties"]) for k, q in resources(raw, "AWS::SQS::Queue").items() if k.startswith(prefix))


def test_the_webhook_queue_is_fifo_with_its_dead_letter_queue(raw: dict[str, Any]) -> None:
    dlq_id, dlq = _queue(raw, "PushWebhookDeadLetters")
    _, queue = _queue(raw, "PushWebhooks")
    assert queue["FifoQueue"] is True and queue["ContentBasedDeduplication"] is False
    assert dlq["FifoQueue"] is True and dlq["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert queue["VisibilityTimeout"] == PUSH_QUEUE_VISIBILITY_S
    assert queue["RedrivePolicy"]["maxReceiveCount"] == redrive_max_receives()
    assert dlq_id in json.dumps(queue["RedrivePolicy"]["deadLetterTargetArn"])
    assert queue.get("SqsManagedSseEnabled") is True  # a message holds ids only


def test_a_dead_letter_raises_an_alarm(raw: dict[str, Any]) -> None:
    dlq_id, _ = _queue(raw, "PushWebhookDeadLetters")
    alarms = [a["Properties"] for a in resources(raw, "AWS::CloudWatch::Alarm").values()]
    on_dlq = [a for a in alarms if dlq_id in json.dumps(a.get("Dimensions", []))]
    assert [a["MetricName"] for a in on_dlq] == ["ApproximateNumberOfMessagesVisible"]
    assert on_dlq[0]["Threshold"] == 1


def test_no_function_is_in_a_vpc_and_none_may_reach_loopback(raw: dict[str, Any]) -> None:
    for function in resources(raw, "AWS::Lambda::Function").values():
        props = function["Properties"]
        assert "VpcConfig" not in props  # the sender has no route into any private range
        assert "DOVECOTE_ALLOW_LOOPBACK_WEBHOOKS" not in props.get("Environment", {}).get("Variables", {})


def test_the_signing_keys_are_a_generated_secret_under_the_data_key(raw: dict[str, Any]) -> None:
    (secret,) = [s["Properties"] for k, s in resources(raw, "AWS::SecretsManager::Secret").items() if "Webhook" in k]
    assert secret["GenerateSecretString"]["GenerateStringKey"] == "seed"
    assert secret["GenerateSecretString"]["PasswordLength"] == 64
    assert "DataKey" in json.dumps(secret["KmsKeyId"])


def test_the_sender_writes_only_its_cursors_and_the_published_keys(raw: dict[str, Any]) -> None:
    statements = _policy_for(raw, PUSH_SENDER.name)
    puts = [s for s in statements if "dynamodb:PutItem" in _actions(s)]
    assert len(puts) == 1
    assert puts[0]["Condition"] == {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["JWKS"]}}
    actions = {a for s in statements for a in _actions(s)}
    assert not actions & {"dynamodb:DeleteItem", "dynamodb:Scan", "s3:PutObject"}
    # Deletes on the queue are its event source mapping's (a settled message); on the DLQ, none.
    dlq_id, _ = _queue(raw, "PushWebhookDeadLetters")
    assert not [s for s in statements if "sqs:DeleteMessage" in _actions(s) and dlq_id in json.dumps(s["Resource"])]
    tasks = [s for s in statements if "DataTasks" in json.dumps(s["Resource"])]
    assert {a for s in tasks for a in _actions(s)} == {"dynamodb:GetItem", "dynamodb:Query"}


def test_the_fan_out_reads_configs_and_sends_to_the_queue_only(raw: dict[str, Any]) -> None:
    statements = _policy_for(raw, PUSH_FANOUT.name)
    actions = {a for s in statements for a in _actions(s)}
    assert {a for a in actions if a.startswith("dynamodb:") and "Stream" not in a and "Record" not in a} - {
        "dynamodb:GetShardIterator"
    } == {"dynamodb:Query"}
    # The webhook queue, and its stream failure destination (CDK's grant for an on-failure queue).
    assert {a for a in actions if a.startswith("sqs:")} == {
        "sqs:SendMessage",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
    }
    webhook_queue, _ = _queue(raw, "PushWebhooks")
    assert any(webhook_queue in json.dumps(s["Resource"]) for s in statements if "sqs:SendMessage" in _actions(s))
    assert not {a for a in actions if a.startswith(("s3:", "secretsmanager:"))}
