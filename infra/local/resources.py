"""Create the AWS resources the service needs, against whatever endpoint boto3 points at (moto
locally). Table schemas come from the PynamoDB models (`TableDef`s), the same source CDK uses."""

from __future__ import annotations

import secrets
from typing import Any

from infra import constants as c
from infra.routes import TRANSCRIPT_UPLOADS_PREFIX

# Locally a failed memory message is seen again after this long (Lambda's queue uses 6× the
# function timeout; a dev loop wants the retry soon).
MEMORY_VISIBILITY_S = 10
# Locally a webhook notification whose sender died is seen again after this long (the cloud's: six
# times the sender's timeout); a retry's wait is the sender's own (ChangeMessageVisibility).
PUSH_VISIBILITY_S = 30


def model_tables() -> list[Any]:
    """Every table whose items are PynamoDB models: the schema comes from the models."""
    from dovecote.admin.records import TOKENS_TABLE
    from dovecote.memory.records import MEMORY_TABLE
    from dovecote.notes.records import NOTES_TABLE
    from dovecote.push.records import PUSH_TABLE
    from dovecote.recall.records import RECALL_TABLE
    from dovecote.tasks.records import TASKS_TABLE

    return [TOKENS_TABLE, NOTES_TABLE, TASKS_TABLE, RECALL_TABLE, MEMORY_TABLE, PUSH_TABLE]


def create_transcript_queue(*, s3: Any, sqs: Any, bucket: str, queue: str) -> str:
    """The queue S3 notifies when a transcript upload lands (`uploads/transcripts/`); the indexer
    consumes it. Returns the queue URL."""
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


def create_memory_queues(sqs: Any, *, queue: str, dlq: str, visibility_s: int) -> dict[str, str]:
    """The memory write queue (FIFO) and its FIFO dead-letter queue. The RedrivePolicy is the
    backstop: the worker moves a poison message itself after GIVE_UP_AT receives (memory/worker.py)."""
    import json

    from dovecote.memory.worker import REDRIVE_MAX_RECEIVES

    fifo = {"FifoQueue": "true", "ContentBasedDeduplication": "false"}
    dlq_url = sqs.create_queue(QueueName=dlq, Attributes={**fifo, "MessageRetentionPeriod": "1209600"})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": REDRIVE_MAX_RECEIVES}
    attributes = {**fifo, "VisibilityTimeout": str(visibility_s), "RedrivePolicy": json.dumps(redrive)}
    queue_url = sqs.create_queue(QueueName=queue, Attributes=attributes)["QueueUrl"]
    return {c.ENV_MEMORY_QUEUE_URL: queue_url, c.ENV_MEMORY_DLQ_URL: dlq_url}


def create_push_queues(sqs: Any, *, queue: str, dlq: str, visibility_s: int) -> dict[str, str]:
    """The webhook queue (FIFO, a group per task) and its FIFO dead-letter queue (kept 14 days). The
    RedrivePolicy is the backstop: the sender dead-letters a notification itself on its last attempt
    (dovecote/push/queue.py)."""
    import json

    from dovecote.push.queue import redrive_max_receives

    fifo = {"FifoQueue": "true", "ContentBasedDeduplication": "false"}
    dlq_url = sqs.create_queue(QueueName=dlq, Attributes={**fifo, "MessageRetentionPeriod": "1209600"})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": redrive_max_receives()}
    attributes = {
        **fifo,
        "VisibilityTimeout": str(visibility_s),
        "MessageRetentionPeriod": "1209600",
        "RedrivePolicy": json.dumps(redrive),
    }
    queue_url = sqs.create_queue(QueueName=queue, Attributes=attributes)["QueueUrl"]
    return {c.ENV_PUSH_QUEUE_URL: queue_url, c.ENV_PUSH_DLQ_URL: dlq_url}


def create_all(
    *,
    dynamodb: Any,
    s3: Any,
    secretsmanager: Any | None,
    names: dict[str, str],
    sqs: Any | None = None,
    kms: Any | None = None,
    memory_visibility_s: int = MEMORY_VISIBILITY_S,
) -> dict[str, str]:
    """Create tables, the versioned bucket and the cursor secret (and, given an SQS client, the
    queues: transcripts, and the memory write queue with its dead-letter queue; given a KMS client,
    the key that seals protected payloads). Returns settings env values."""
    env: dict[str, str] = {}
    for table in model_tables():
        name = names[table.setting]
        dynamodb.create_table(**table.create_table_kwargs(name))
        if table.ttl:
            dynamodb.update_time_to_live(
                TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": table.ttl}
            )
        env[f"DOVECOTE_{table.setting.upper()}"] = name
    s3.create_bucket(Bucket=names["bucket"])
    s3.put_bucket_versioning(Bucket=names["bucket"], VersioningConfiguration={"Status": "Enabled"})
    env[c.ENV_BUCKET] = names["bucket"]
    if sqs is not None:
        create_transcript_queue(s3=s3, sqs=sqs, bucket=names["bucket"], queue=names["transcripts_queue"])
        env.update(
            create_memory_queues(
                sqs, queue=names["memory_queue"], dlq=names["memory_dlq"], visibility_s=memory_visibility_s
            )
        )
        env.update(
            create_push_queues(sqs, queue=names["push_queue"], dlq=names["push_dlq"], visibility_s=PUSH_VISIBILITY_S)
        )
    if kms is not None:
        key = kms.create_key(Description="Dovecote protected payloads (local)")["KeyMetadata"]["KeyId"]
        env["DOVECOTE_DATA_KEY_ID"] = key
    if secretsmanager is not None:
        arn = secretsmanager.create_secret(Name="dovecote/cursor-key", SecretString=secrets.token_urlsafe(48))["ARN"]
        env[c.ENV_CURSOR_SECRET_ARN] = arn
    return env


DEFAULT_NAMES = {
    "notes_table": "dovecote-notes",
    "tokens_table": "dovecote-tokens",
    "tasks_table": "dovecote-tasks",
    "memory_table": "dovecote-memory",
    "memory_queue": "dovecote-memory.fifo",
    "memory_dlq": "dovecote-memory-dlq.fifo",
    "bucket": "dovecote-bodies",
    "recall_table": "dovecote-recall",
    "transcripts_queue": "dovecote-transcripts",
    "push_table": "dovecote-push",
    "push_queue": "dovecote-push.fifo",
    "push_dlq": "dovecote-push-dlq.fifo",
}


def create_everything(*, memory_visibility_s: int = MEMORY_VISIBILITY_S) -> dict[str, str]:
    """`create_all` of every resource, through the process's shared clients (dovecote.platform.aws):
    what `dovecote dev` stands up, and the moto fixtures with it."""
    from dovecote.platform import aws

    return create_all(
        dynamodb=aws.client("dynamodb"),
        s3=aws.client("s3"),
        secretsmanager=aws.client("secretsmanager"),
        names=DEFAULT_NAMES,
        kms=aws.client("kms"),
        sqs=aws.client("sqs"),
        memory_visibility_s=memory_visibility_s,
    )


def align_streams(names: dict[str, str] | None = None) -> list[str]:
    """Give each table of a restored `dovecote dev --data` directory the stream its model declares
    (`TableDef.stream`), when the directory was written with another (the tasks table's stream carried
    its keys only before the task item's new image): what DynamoDB does when a stream is disabled and
    enabled again with another view type, which moto refuses, so done on moto's table itself. A new
    stream starts empty, as a re-enabled stream does. Returns the tables changed."""
    from moto.backends import get_backend

    from dovecote.platform.settings import get_settings
    from infra.local.moto_patches import DYNAMODB_LOCK

    settings = get_settings()
    wanted = {getattr(settings, t.setting): t.stream for t in model_tables() if t.stream}
    changed = []
    with DYNAMODB_LOCK:
        for account in get_backend("dynamodb").values():  # type: ignore[call-overload]
            for backend in account.values():
                for name, view in wanted.items():
                    table = backend.tables.get(name)
                    spec = (table.stream_specification or {}) if table is not None else {}
                    if table is None or (spec.get("StreamEnabled") and spec.get("StreamViewType") == view):
                        continue
                    table.set_stream_specification({"StreamEnabled": True, "StreamViewType": view})
                    changed.append(name)
    return changed
