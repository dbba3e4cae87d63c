"""Stateful resources: the KMS key, DynamoDB tables, the bodies bucket and the cursor secret.

Tables whose items are PynamoDB models are built from their `TableDef` (keys, GSIs, projections,
stream, TTL), the same definition the local runtime and the tests create tables from;
tests/infra checks the synthesized template against the models.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as ddb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as sm
from constructs import Construct

from dovecote.admin.records import TOKENS_TABLE
from dovecote.memory.records import MEMORY_TABLE
from dovecote.notes.records import NOTES_TABLE
from dovecote.platform.dynamo import TableDef
from dovecote.push.records import PUSH_TABLE
from dovecote.recall.records import RECALL_TABLE
from dovecote.tasks.records import TASKS_TABLE

_TYPES = {"S": ddb.AttributeType.STRING, "N": ddb.AttributeType.NUMBER, "B": ddb.AttributeType.BINARY}
_STREAMS = {
    "NEW_AND_OLD_IMAGES": ddb.StreamViewType.NEW_AND_OLD_IMAGES,
    "NEW_IMAGE": ddb.StreamViewType.NEW_IMAGE,
    "OLD_IMAGE": ddb.StreamViewType.OLD_IMAGE,
    "KEYS_ONLY": ddb.StreamViewType.KEYS_ONLY,
}
# Uploads that were never committed, and upload URLs used again, expire from `uploads/` after this.
UPLOAD_DAYS = 1


class Data(Construct):
    def __init__(self, scope: Construct, id: str, *, production: bool) -> None:
        super().__init__(scope, id)
        removal = RemovalPolicy.RETAIN if production else RemovalPolicy.DESTROY
        self._removal = removal
        self._production = production
        self.key = kms.Key(
            self, "Key", enable_key_rotation=True, description="Dovecote data key", removal_policy=removal
        )
        region, account = Stack.of(self).region, Stack.of(self).account
        # CloudWatch Logs encrypts the function and access log groups with this key; the service may
        # use it only for log groups of this account and region.
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal(f"logs.{region}.amazonaws.com")],
                actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
                resources=["*"],
                conditions={
                    "ArnLike": {"kms:EncryptionContext:aws:logs:arn": f"arn:aws:logs:{region}:{account}:log-group:*"}
                },
            )
        )

        self.tokens = self.model_table("Tokens", TOKENS_TABLE)
        # Note items and view items share the table; its stream drives the body janitor.
        self.notes = self.model_table("Notes", NOTES_TABLE)

        # Tasks, messages, events, grants and receipts share one table (dovecote/tasks/dynamo.py).
        self.tasks = self.model_table("Tasks", TASKS_TABLE)

        # Memory writes, memories, postings, relations (dovecote/memory/dynamo.py).
        self.memory = self.model_table("Memory", MEMORY_TABLE)
        # Recall's ingest ledger: uploads handed a URL and not indexed yet (dovecote/recall/records.py).
        self.recall = self.model_table("Recall", RECALL_TABLE)
        # Webhook configs per task, their secrets sealed, and the published signing keys (dovecote/push).
        self.push = self.model_table("Push", PUSH_TABLE)

        # Server access logs: the destination bucket cannot use SSE-KMS, so it uses SSE-S3. The
        # logging service writes through a bucket policy (ownership enforced: no ACLs at all).
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(90))],
            removal_policy=removal,
            auto_delete_objects=False,
        )
        self.bucket = s3.Bucket(
            self,
            "Bodies",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.key,
            bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            # Note items pin the body version they committed. No blanket noncurrent expiry: a failed
            # overwrite makes the *pinned* version noncurrent, and expiring it would lose the note.
            # The janitor and the reconciler delete exactly the versions nothing pins.
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="uploads-expire",
                    prefix="uploads/",
                    expiration=Duration.days(UPLOAD_DAYS),
                    noncurrent_version_expiration=Duration.days(UPLOAD_DAYS),
                ),
                s3.LifecycleRule(
                    id="multipart-abort",
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                    expired_object_delete_marker=True,
                ),
            ],
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="bodies/",
            removal_policy=removal,
        )
        self.cursor_secret = sm.Secret(
            self,
            "CursorKey",
            description="HMAC key that signs Dovecote list cursors",
            encryption_key=self.key,
            generate_secret_string=sm.SecretStringGenerator(password_length=64, exclude_punctuation=True),
            removal_policy=removal,
        )

    def model_table(self, name: str, table: TableDef) -> ddb.Table:
        """A table exactly as its models declare it."""
        schema = table.schema()
        types = {a["AttributeName"]: _TYPES[a["AttributeType"]] for a in schema["AttributeDefinitions"]}
        keys = {k["KeyType"]: k["AttributeName"] for k in schema["KeySchema"]}

        def attribute(name: str) -> ddb.Attribute:
            return ddb.Attribute(name=name, type=types[name])

        built = ddb.Table(
            self,
            name,
            partition_key=attribute(keys["HASH"]),
            sort_key=attribute(keys["RANGE"]) if "RANGE" in keys else None,
            billing_mode=ddb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=ddb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=ddb.TableEncryption.CUSTOMER_MANAGED,
            encryption_key=self.key,
            deletion_protection=self._production,
            removal_policy=self._removal,
            stream=_STREAMS[table.stream] if table.stream else None,
            time_to_live_attribute=table.ttl,
        )
        for index in schema["GlobalSecondaryIndexes"]:
            index_keys = {k["KeyType"]: k["AttributeName"] for k in index["KeySchema"]}
            projection = index["Projection"]
            kind = projection["ProjectionType"]
            built.add_global_secondary_index(
                index_name=index["IndexName"],
                partition_key=attribute(index_keys["HASH"]),
                sort_key=attribute(index_keys["RANGE"]) if "RANGE" in index_keys else None,
                projection_type={
                    "ALL": ddb.ProjectionType.ALL,
                    "KEYS_ONLY": ddb.ProjectionType.KEYS_ONLY,
                    "INCLUDE": ddb.ProjectionType.INCLUDE,
                }[kind],
                non_key_attributes=projection.get("NonKeyAttributes") if kind == "INCLUDE" else None,
            )
        return built
