"""The composition root of the task functions (the tasks API and the lease dispatcher): the service
over the deployment's table, bucket and keys, as the settings name them. Imported on the first
request of a container, never at module import (a cold start pays for boto3 only when it needs it)."""

from __future__ import annotations

from dovecote.tasks.service import TaskService


def task_service(*, sealed: bool = True) -> TaskService:
    """`sealed`: message parts and artifact payloads are sealed with the deployment's KMS key (the
    dispatcher only fences leases: it writes neither, and never needs the key)."""
    from dovecote.platform import aws
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.protection import protector
    from dovecote.platform.settings import get_settings
    from dovecote.tasks.dynamo import DynamoTaskStore

    settings = get_settings()
    store = DynamoTaskStore(
        table=settings.tasks_table,
        bucket=settings.bucket,
        dynamodb=aws.client("dynamodb"),
        s3=aws.lazy_client("s3"),
        protector=protector(settings) if sealed else None,
        claim_shards=settings.claim_shards,
    )
    return TaskService(
        store,
        signer_factory=lambda: CursorSigner(aws.cursor_key()),
        default_lease_timeout=settings.lease_timeout_seconds,
        default_accept_timeout=settings.accept_timeout_seconds,
        presign_seconds=settings.presign_seconds,
        artifact_max_bytes=settings.artifact_max_bytes,
        stream_seconds=settings.stream_seconds,
    )
