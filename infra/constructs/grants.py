"""What every construct does the same way when it wires the functions: least-privilege statements,
the stack's data key only through the service that uses it, an SQS event source, and the private
queues. Api, MemoryQueue and Search use it; none of them imports another for it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.constructs.data import Data
from infra.event_sources import QueueSource, StreamSource


def private_queue(scope: Construct, id: str, **options: Any) -> sqs.Queue:
    """A queue that takes TLS only, encrypted with SQS-managed keys (its messages hold no data: a KMS
    key would only widen grants), keeping messages 14 days unless `options` say otherwise."""
    options.setdefault("retention_period", Duration.days(14))
    return sqs.Queue(scope, id, encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True, **options)


def fifo_queues(
    scope: Construct, id: str, dlq_id: str, *, max_receives: int, visibility: Duration, **options: Any
) -> tuple[sqs.Queue, sqs.Queue]:
    """A FIFO queue (`private_queue`) whose deduplication ids its senders choose (content-based
    deduplication off), and its FIFO dead-letter queue (same group, same rules), to which SQS moves a
    message received `max_receives` times: the queue and the dead-letter queue."""
    dlq = private_queue(scope, dlq_id, fifo=True, content_based_deduplication=False)
    queue = private_queue(
        scope,
        id,
        fifo=True,
        content_based_deduplication=False,
        visibility_timeout=visibility,
        dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=max_receives, queue=dlq),
        **options,
    )
    return queue, dlq


def sqs_source(function: lambda_.Function, queue: sqs.IQueue, spec: QueueSource) -> None:
    """`function` consumes `queue` in batches as its row of infra/event_sources.py says, reporting
    the messages that failed."""
    options: dict[str, Any] = {"batch_size": spec.batch_size}
    if spec.max_concurrency is not None:
        options["max_concurrency"] = spec.max_concurrency
    function.add_event_source(event_sources.SqsEventSource(queue, report_batch_item_failures=True, **options))
    for child in function.node.find_all():
        if isinstance(child, lambda_.CfnEventSourceMapping):
            # An SQS source has no on-failure destination (Lambda offers those for streams and
            # Kafka): a message that keeps failing moves to the queue's dead-letter queue.
            child.add_metadata("cfn-lint", {"config": {"ignore_checks": ["ES1001"]}})


def stream_source(function: lambda_.Function, id: str, table: Any, spec: StreamSource, failures: sqs.IQueue) -> None:
    """`function` reads `table`'s stream from its start, as its row of infra/event_sources.py says
    (batch, retries, filter), bisecting a failing batch and reporting the records that failed; a batch
    that fails every retry is recorded in `failures` (Lambda sends the batch's metadata only)."""
    function.add_event_source_mapping(
        id,
        event_source_arn=table.table_stream_arn,
        starting_position=lambda_.StartingPosition.TRIM_HORIZON,
        batch_size=spec.batch_size,
        bisect_batch_on_error=True,
        retry_attempts=spec.retry_attempts,
        report_batch_item_failures=True,
        on_failure=event_sources.SqsDlq(failures),
        filters=[{"pattern": json.dumps(spec.filter)}] if spec.filter else None,
    )


class Grants:
    """Statements added to the functions' roles, by function name."""

    def __init__(self, scope: Construct, functions: Mapping[str, lambda_.Function], data: Data) -> None:
        self._functions = functions
        self._data = data
        self._region = Stack.of(scope).region

    def allow(self, name: str, actions: list[str], resources: list[str], **conditions: Any) -> None:
        self._functions[name].add_to_role_policy(
            iam.PolicyStatement(actions=actions, resources=resources, conditions=conditions or None)
        )

    def key(self, name: str, service: str, actions: list[str], context: dict[str, dict[str, Any]]) -> None:
        """The data key, only through `service` and only for the named resources' encryption
        context, so a leaked role cannot decrypt anything else the key protects."""
        conditions: dict[str, dict[str, Any]] = {
            "StringEquals": {"kms:ViaService": f"{service}.{self._region}.amazonaws.com"}
        }
        for operator, pairs in context.items():
            conditions.setdefault(operator, {}).update(pairs)
        self.allow(name, actions, [self._data.key.key_arn], **conditions)

    def table_key(self, name: str, *tables: Any, write: bool) -> None:
        actions = ["kms:Decrypt", "kms:DescribeKey"] + (["kms:Encrypt", "kms:GenerateDataKey"] if write else [])
        names = [t.table_name for t in tables]
        self.key(
            name,
            "dynamodb",
            actions,
            {"ForAnyValue:StringEquals": {"kms:EncryptionContext:aws:dynamodb:tableName": names}},
        )

    def bucket_key(self, name: str, *, write: bool) -> None:
        # Bucket keys are on: the encryption context is the bucket's ARN.
        actions = ["kms:Decrypt"] + (["kms:GenerateDataKey"] if write else [])
        arn = self._data.bucket.bucket_arn
        self.key(name, "s3", actions, {"StringEquals": {"kms:EncryptionContext:aws:s3:arn": arn}})

    def payload_key(self, name: str) -> None:
        """Sealing message parts and artifact payloads (platform/protection.py): data keys straight
        from KMS, only under the payload encryption context, so this grant opens nothing else."""
        self.allow(
            name,
            ["kms:GenerateDataKey", "kms:Decrypt"],
            [self._data.key.key_arn],
            StringEquals={"kms:EncryptionContext:dovecote": "payload"},
        )

    def cursor_secret(self, name: str) -> None:
        """The secret the cursor signing key is derived from, and the key to decrypt it."""
        arn = self._data.cursor_secret.secret_arn
        self.allow(name, ["secretsmanager:GetSecretValue"], [arn])
        self.key(name, "secretsmanager", ["kms:Decrypt"], {"StringEquals": {"kms:EncryptionContext:SecretARN": arn}})

    def stream_read(self, name: str, table: Any) -> None:
        """What an event source mapping needs to read `table`'s stream, the key only through DynamoDB
        (CDK's grant_stream_read would grant kms:Decrypt without conditions; DynamoDB Streams sets no
        encryption context to bind it to)."""
        self.allow(
            name,
            ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"],
            [table.table_stream_arn or ""],
        )
        self.allow(name, ["dynamodb:ListStreams"], ["*"])
        self.allow(
            name,
            ["kms:Decrypt"],
            [self._data.key.key_arn],
            StringEquals={"kms:ViaService": f"dynamodb.{self._region}.amazonaws.com"},
        )

    def foundation_model(self, name: str, model_arn: str) -> None:
        """Invoking one Bedrock foundation model (the semantic tier's embedder), nothing else: not
        other models, not streaming, not provisioned throughput."""
        self.allow(name, ["bedrock:InvokeModel"], [model_arn])
