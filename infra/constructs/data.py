"""Stateful resources: the KMS key, DynamoDB tables, the bodies bucket and the cursor secret."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as ddb
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as sm
from constructs import Construct

from infra import constants as c


class Data(Construct):
    def __init__(self, scope: Construct, id: str, *, production: bool) -> None:
        super().__init__(scope, id)
        removal = RemovalPolicy.RETAIN if production else RemovalPolicy.DESTROY
        self.key = kms.Key(
            self, "Key", enable_key_rotation=True, description="Dovecote data key", removal_policy=removal
        )

        def table(
            name: str, partition: str, sort: str | None = None, stream: ddb.StreamViewType | None = None
        ) -> ddb.Table:
            return ddb.Table(
                self,
                name,
                partition_key=ddb.Attribute(name=partition, type=ddb.AttributeType.STRING),
                sort_key=ddb.Attribute(name=sort, type=ddb.AttributeType.STRING) if sort else None,
                billing_mode=ddb.BillingMode.PAY_PER_REQUEST,
                point_in_time_recovery_specification=ddb.PointInTimeRecoverySpecification(
                    point_in_time_recovery_enabled=True
                ),
                encryption=ddb.TableEncryption.CUSTOMER_MANAGED,
                encryption_key=self.key,
                deletion_protection=production,
                removal_policy=removal,
                stream=stream,
            )

        self.tokens = table("Tokens", c.TOKENS_PK)
        # Note items and view items share the table; its stream drives the body janitor.
        self.notes = table("Notes", c.NOTES_PK, c.NOTES_SK, stream=ddb.StreamViewType.NEW_AND_OLD_IMAGES)

        # Tasks, messages, events, grants and receipts share one table (dovecote/tasks/dynamo.py).
        self.tasks = table("Tasks", "pk", "sk")
        for index, (partition, sort) in c.TASKS_INDEXES.items():
            self.tasks.add_global_secondary_index(
                index_name=index,
                partition_key=ddb.Attribute(name=partition, type=ddb.AttributeType.STRING),
                sort_key=ddb.Attribute(name=sort, type=ddb.AttributeType.STRING),
                projection_type=ddb.ProjectionType.ALL,
            )

        # Server access logs: the destination bucket cannot use SSE-KMS, so it uses SSE-S3.
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
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
            # Index items pin the body version they committed; overwritten and deleted bodies
            # become noncurrent and expire.
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    noncurrent_version_expiration=Duration.days(c.NONCURRENT_VERSION_DAYS),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                    expired_object_delete_marker=False,
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
