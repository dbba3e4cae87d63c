"""Recall in the cloud: the OpenSearch Service domain, the transcript upload queue (fed by the
bucket's notifications for `uploads/transcripts/`), and the recall functions' access to them.

- The domain (OpenSearch 2.19, the version the tests run): encrypted at rest with the data key,
  node-to-node encryption, HTTPS only (TLS 1.2 with forward secrecy), no fine-grained access control
  and no VPC: every request is SigV4-signed, and the access policy admits only the two recall
  roles, for the HTTP methods the engine uses. Slow-search, slow-index and error logs go to log groups encrypted with
  the data key. Sizing: one t3.small.search with 10 GB of gp3 outside production; in production
  two m6g.large.search nodes in two zones with 20 GB each (one replica of every shard).
  A domain rather than a serverless collection: its floor is a small instance (about $27 a month
  against 1 to 2 OCUs, $175 to $350), and the engine relies on real-time GETs, scripted updates,
  custom routing and `refresh=wait_for` (dovecote/recall/opensearch.py).
- The queue: S3 notifies it of every object created under `uploads/transcripts/` (the notification
  is set on the bucket itself: CDK's notification helper would deploy a custom-resource function);
  the transcript indexer consumes it one file per invocation, reporting batch item failures; a
  file that fails 5 receives goes to the dead-letter queue. SQS-managed encryption: S3 can publish
  to it without a grant on the data key, and a message holds only a bucket key.
- Access, per function (`connect`), in the shape of infra/constructs/api.py's grants: the recall
  table (the actions each one's ledger calls use), its own S3 prefixes, the domain's recall indices,
  and the data key only through DynamoDB or S3 and only for this table's or this bucket's context.
- The semantic tier (context `embedder=bedrock`, `embedding_dimension=256|512|1024`; off by
  default): both recall functions may invoke exactly one model, Titan Text Embeddings V2, in the
  stack's region (the API embeds the question, the indexer the messages), and an hourly schedule
  runs the indexer over every authority's messages still without a vector (those indexed before the
  embedder was turned on, or while Bedrock failed). The messages index's knn_vector field is made
  by the engine (dovecote/recall/opensearch_vectors.py): every OpenSearch Service domain has the
  k-NN plugin.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_opensearchservice as opensearch
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from dovecote.embedding.bedrock import DIMENSIONS, TITAN_V2
from dovecote.platform.settings import Settings
from infra.constructs.data import Data
from infra.constructs.grants import Grants, private_queue, sqs_source
from infra.event_sources import queue_of, schedule_of
from infra.routes import TRANSCRIPT_INDEXER, TRANSCRIPT_UPLOADS_PREFIX

# The HTTP methods the engine sends: GET (the state document), HEAD (index exists), POST (search,
# msearch, update, bulk, scroll), PUT (create an index, index a topic), DELETE (clear a scroll).
ES_ACTIONS = ["es:ESHttpGet", "es:ESHttpHead", "es:ESHttpPost", "es:ESHttpPut", "es:ESHttpDelete"]
# The paths outside the recall indices that the engine calls.
ES_ROOT_PATHS = ("_bulk", "_msearch", "_search/scroll")
RECEIVES_BEFORE_DLQ = 5
QUEUE_AGE_ALARM_SECONDS = 900
EMBEDDERS = ("off", "bedrock")  # the cloud's: the local model and the hashing fake are for one machine


def embedder_context(scope: Construct) -> tuple[str, int]:
    """The `embedder` and `embedding_dimension` context options, checked (a wrong value fails the
    synth rather than the first search)."""
    embedder = str(scope.node.try_get_context("embedder") or "off").lower()
    if embedder not in EMBEDDERS:
        raise ValueError(f"context embedder must be one of {EMBEDDERS}, got {embedder!r}")
    raw = scope.node.try_get_context("embedding_dimension")
    dimension = int(raw) if raw is not None else int(Settings.default("embed_dimension"))
    if dimension not in DIMENSIONS:
        raise ValueError(f"context embedding_dimension must be one of {DIMENSIONS}, got {raw!r}")
    return embedder, dimension


class Search(Construct):
    def __init__(
        self, scope: Construct, id: str, *, data: Data, production: bool, log_retention: logs.RetentionDays
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        removal = RemovalPolicy.RETAIN if production else RemovalPolicy.DESTROY
        self._data = data
        self.index_prefix = str(Settings.default("opensearch_index_prefix"))
        self.embedder, self.embedding_dimension = embedder_context(self)
        # Titan V2 in this stack's region, nothing else: foundation models have no account in their ARN.
        self.embedding_model_arn = stack.format_arn(
            service="bedrock", account="", resource="foundation-model", resource_name=TITAN_V2
        )
        # A fixed name: the access policy names the domain's ARN, which it cannot read from itself.
        self.domain_name = f"{stack.stack_name.lower()}-recall"[:28]
        self.domain_arn = stack.format_arn(service="es", resource="domain", resource_name=self.domain_name)

        self.log_groups = {
            kind: logs.LogGroup(
                self, f"{kind}-logs", retention=log_retention, encryption_key=data.key, removal_policy=removal
            )
            for kind in ("search-slow", "index-slow", "errors")
        }
        # What CDK's logging option would add through a custom resource: OpenSearch may write to
        # these groups, for domains of this account.
        logs_policy = logs.CfnResourcePolicy(
            self,
            "LogsPolicy",
            policy_name=f"{self.domain_name}-logs",
            policy_document=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "es.amazonaws.com"},
                            "Action": ["logs:PutLogEvents", "logs:CreateLogStream"],
                            "Resource": [f"{g.log_group_arn}:*" for g in self.log_groups.values()],
                            "Condition": {"StringEquals": {"aws:SourceAccount": stack.account}},
                        }
                    ],
                }
            ),
        )
        self.volume_gb = 20 if production else 10
        self.zone_aware = production
        self.domain = opensearch.Domain(
            self,
            "Domain",
            version=opensearch.EngineVersion.OPENSEARCH_2_19,
            domain_name=self.domain_name,
            capacity=opensearch.CapacityConfig(
                data_node_instance_type="m6g.large.search" if production else "t3.small.search",
                data_nodes=2 if production else 1,
                multi_az_with_standby_enabled=False,
            ),
            zone_awareness=opensearch.ZoneAwarenessConfig(enabled=True, availability_zone_count=2)
            if self.zone_aware
            else opensearch.ZoneAwarenessConfig(enabled=False),
            ebs=opensearch.EbsOptions(volume_size=self.volume_gb, volume_type=_gp3()),
            encryption_at_rest=opensearch.EncryptionAtRestOptions(enabled=True, kms_key=data.key),
            node_to_node_encryption=True,
            enforce_https=True,
            tls_security_policy=opensearch.TLSSecurityPolicy.TLS_1_2_PFS,
            logging=opensearch.LoggingOptions(
                slow_search_log_enabled=True,
                slow_search_log_group=self.log_groups["search-slow"],
                slow_index_log_enabled=True,
                slow_index_log_group=self.log_groups["index-slow"],
                app_log_enabled=True,
                app_log_group=self.log_groups["errors"],
            ),
            suppress_logs_resource_policy=True,
            enable_auto_software_update=True,
            removal_policy=removal,
        )
        self.domain.node.default_child.add_resource_dependency(logs_policy)  # type: ignore[union-attr]
        self.url = f"https://{self.domain.domain_endpoint}"

        self.dlq = private_queue(self, "TranscriptFailures")
        self.queue = private_queue(
            self,
            "TranscriptUploads",
            # Lambda's advice for an SQS source: six times the function's timeout.
            visibility_timeout=Duration.seconds(6 * TRANSCRIPT_INDEXER.timeout_s),
            retention_period=Duration.days(4),
            dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=RECEIVES_BEFORE_DLQ, queue=self.dlq),
        )
        self._notify(data.bucket, stack.account)

    def _notify(self, bucket: s3.Bucket, account: str) -> None:
        """S3 → queue for `uploads/transcripts/`, on the bucket's own NotificationConfiguration.
        S3 checks the queue policy when the configuration is applied, so the bucket waits for it;
        the policy names this account rather than the bucket (naming the bucket would make the
        two wait on each other)."""
        self.queue.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("s3.amazonaws.com")],
                actions=["sqs:SendMessage"],
                resources=[self.queue.queue_arn],
                conditions={"StringEquals": {"aws:SourceAccount": account}},
            )
        )
        policy = self.queue.node.find_child("Policy").node.default_child
        cfn_bucket: s3.CfnBucket = bucket.node.default_child  # type: ignore[assignment]
        cfn_bucket.notification_configuration = s3.CfnBucket.NotificationConfigurationProperty(
            queue_configurations=[
                s3.CfnBucket.QueueConfigurationProperty(
                    event="s3:ObjectCreated:*",
                    queue=self.queue.queue_arn,
                    filter=s3.CfnBucket.NotificationFilterProperty(
                        s3_key=s3.CfnBucket.S3KeyFilterProperty(
                            rules=[s3.CfnBucket.FilterRuleProperty(name="prefix", value=TRANSCRIPT_UPLOADS_PREFIX)]
                        )
                    ),
                )
            ]
        )
        cfn_bucket.add_resource_dependency(policy)  # type: ignore[arg-type]

    @property
    def settings(self) -> dict[str, str]:
        """The settings the recall functions read (infra/routes.py names which each receives)."""
        settings = {"opensearch_url": self.url, "opensearch_aws_service": "es"}
        if self.embedder != "off":
            settings |= {"embedder": self.embedder, "embed_dimension": str(self.embedding_dimension)}
        return settings

    def connect(self, functions: Mapping[str, lambda_.Function]) -> None:
        """The indexer's event source, and each recall function's least privilege."""
        d = self._data
        sqs_source(functions[TRANSCRIPT_INDEXER.name], self.queue, queue_of(TRANSCRIPT_INDEXER))
        grants = Grants(self, functions, d)
        allow = grants.allow
        index_paths = [f"{self.domain.domain_arn}/{self.index_prefix}-*"] + [
            f"{self.domain.domain_arn}/{path}" for path in ES_ROOT_PATHS
        ]

        # recall_api: ledger add (PutItem) and pending (Query); archive put/keys/get and topics
        # (rebuild); the presigned upload PUT is signed with this role, so it may PutObject there.
        allow("recall_api", ["dynamodb:PutItem", "dynamodb:Query"], [d.recall.table_arn])
        grants.table_key("recall_api", d.recall, write=True)
        allow(
            "recall_api",
            ["s3:GetObject", "s3:PutObject"],
            [d.bucket.arn_for_objects("transcripts/*"), d.bucket.arn_for_objects("topics/*")],
        )
        allow("recall_api", ["s3:PutObject"], [d.bucket.arn_for_objects(f"{TRANSCRIPT_UPLOADS_PREFIX}*")])
        allow(
            "recall_api",
            ["s3:ListBucket"],
            [d.bucket.bucket_arn],
            StringLike={"s3:prefix": ["transcripts/*", "topics/*"]},
        )
        grants.bucket_key("recall_api", write=True)
        grants.cursor_secret("recall_api")
        allow("recall_api", ES_ACTIONS, index_paths)

        # transcript_indexer: ledger get/fail/clear; the upload (read, then deleted) and its archive
        # copy. ListBucket on the uploads prefix, so a missing upload is NoSuchKey, not AccessDenied.
        name = TRANSCRIPT_INDEXER.name
        allow(name, ["dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"], [d.recall.table_arn])
        grants.table_key(name, d.recall, write=True)
        allow(name, ["s3:GetObject", "s3:DeleteObject"], [d.bucket.arn_for_objects(f"{TRANSCRIPT_UPLOADS_PREFIX}*")])
        allow(name, ["s3:PutObject"], [d.bucket.arn_for_objects("transcripts/*")])
        allow(
            name, ["s3:ListBucket"], [d.bucket.bucket_arn], StringLike={"s3:prefix": [f"{TRANSCRIPT_UPLOADS_PREFIX}*"]}
        )
        grants.bucket_key(name, write=True)
        allow(name, ES_ACTIONS, index_paths)

        if self.embedder == "bedrock":
            for function in ("recall_api", name):
                grants.foundation_model(function, self.embedding_model_arn)
            self._backfill(functions[name])

        # The domain's own policy admits exactly these two roles (set on the L1: CDK's
        # add_access_policies would deploy a custom-resource function to apply it).
        cfn_domain: opensearch.CfnDomain = self.domain.node.default_child  # type: ignore[assignment]
        cfn_domain.access_policies = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": [functions[n].role.role_arn for n in ("recall_api", name)]},  # type: ignore[union-attr]
                    "Action": ES_ACTIONS,
                    "Resource": f"{self.domain_arn}/*",
                }
            ],
        }

    def _backfill(self, indexer: lambda_.Function) -> None:
        """The indexer's scheduled run embeds what is still pending everywhere. Invoked
        asynchronously without retries (the next hour repeats the work, which is idempotent); a run
        that fails lands in the transcript dead-letter queue, which is alarmed (a redrive of it to
        the upload queue ignores such an event: it names no upload)."""
        indexer.configure_async_invoke(
            retry_attempts=0, max_event_age=Duration.hours(1), on_failure=destinations.SqsDestination(self.dlq)
        )
        for child in indexer.node.find_all():
            if isinstance(child, lambda_.CfnEventInvokeConfig):
                # By ARN, as the schedule's permission names it (cfn-lint compares the two literally).
                child.function_name = indexer.function_arn
        events.Rule(
            self,
            "EmbeddingBackfill",
            schedule=events.Schedule.rate(Duration.seconds(schedule_of(TRANSCRIPT_INDEXER).every_s)),
            targets=[targets.LambdaFunction(indexer, dead_letter_queue=self.dlq, retry_attempts=0)],
        )


def _gp3() -> Any:
    from aws_cdk import aws_ec2 as ec2

    return ec2.EbsDeviceVolumeType.GP3
