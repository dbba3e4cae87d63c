"""Create the AWS resources the service needs, against whatever endpoint boto3 points at (moto
locally). The key schema comes from infra/constants.py, the same names CDK uses."""

from __future__ import annotations

import secrets
from typing import Any

from infra import constants as c
from infra.routes import TRANSCRIPT_UPLOADS_PREFIX


def notes_table_spec(name: str) -> dict[str, Any]:
    """Note items and their view items share one table (see dovecote/notes/dynamo.py); the stream
    feeds the janitor that deletes unreferenced body versions."""
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": c.NOTES_PK, "AttributeType": "S"},
            {"AttributeName": c.NOTES_SK, "AttributeType": "S"},
        ],
        "KeySchema": [
            {"AttributeName": c.NOTES_PK, "KeyType": "HASH"},
            {"AttributeName": c.NOTES_SK, "KeyType": "RANGE"},
        ],
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    }


def tasks_table_spec(name: str) -> dict[str, Any]:
    """One table for tasks, messages, events, grants, receipts (dovecote/tasks/dynamo.py)."""
    keys = {"pk": "S", "sk": "S"}
    indexes = []
    for index, (pk, sk) in c.TASKS_INDEXES.items():
        keys.update({pk: "S", sk: "S"})
        indexes.append(
            {
                "IndexName": index,
                "KeySchema": [{"AttributeName": pk, "KeyType": "HASH"}, {"AttributeName": sk, "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        )
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": k, "AttributeType": t} for k, t in keys.items()],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        "GlobalSecondaryIndexes": indexes,
    }


def tokens_table_spec(name: str) -> dict[str, Any]:
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": c.TOKENS_PK, "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": c.TOKENS_PK, "KeyType": "HASH"}],
    }


# Recall (the lead may move these names to infra/constants.py beside the others).
ENV_RECALL_TABLE = "DOVECOTE_RECALL_TABLE"


def recall_table_spec(name: str) -> dict[str, Any]:
    """The ingest ledger: one item per pending upload (dovecote/recall/records.py)."""
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    }


def create_transcript_queue(*, s3: Any, sqs: Any, bucket: str, queue: str) -> str:
    """The queue S3 notifies when a transcript upload lands (`uploads/`); the indexer consumes it.
    Returns the queue URL."""
    url = str(sqs.create_queue(QueueName=queue, Attributes={"VisibilityTimeout": "30"})["QueueUrl"])
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={
            "QueueConfigurations": [
                {
                    "QueueArn": arn,
                    "Events": ["s3:ObjectCreated:*"],
                    "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": TRANSCRIPT_UPLOADS_PREFIX}]}},
                }
            ]
        },
    )
    return url


def create_all(
    *, dynamodb: Any, s3: Any, secretsmanager: Any | None, names: dict[str, str], sqs: Any | None = None
) -> dict[str, str]:
    """Create tables, the versioned bucket and the cursor secret (and, given an SQS client, the
    transcript upload queue). Returns settings env values."""
    dynamodb.create_table(**notes_table_spec(names["notes_table"]))
    dynamodb.create_table(**tokens_table_spec(names["tokens_table"]))
    dynamodb.create_table(**tasks_table_spec(names["tasks_table"]))
    dynamodb.create_table(**recall_table_spec(names["recall_table"]))
    dynamodb.update_time_to_live(
        TableName=names["recall_table"], TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"}
    )
    s3.create_bucket(Bucket=names["bucket"])
    s3.put_bucket_versioning(Bucket=names["bucket"], VersioningConfiguration={"Status": "Enabled"})
    env = {
        c.ENV_NOTES_TABLE: names["notes_table"],
        c.ENV_TOKENS_TABLE: names["tokens_table"],
        c.ENV_BUCKET: names["bucket"],
        c.ENV_TASKS_TABLE: names["tasks_table"],
        ENV_RECALL_TABLE: names["recall_table"],
    }
    if sqs is not None:
        create_transcript_queue(s3=s3, sqs=sqs, bucket=names["bucket"], queue=names["transcripts_queue"])
    if secretsmanager is not None:
        arn = secretsmanager.create_secret(Name="dovecote/cursor-key", SecretString=secrets.token_urlsafe(48))["ARN"]
        env[c.ENV_CURSOR_SECRET_ARN] = arn
    return env


DEFAULT_NAMES = {
    "notes_table": "dovecote-notes",
    "tokens_table": "dovecote-tokens",
    "tasks_table": "dovecote-tasks",
    "bucket": "dovecote-bodies",
    "recall_table": "dovecote-recall",
    "transcripts_queue": "dovecote-transcripts",
}
