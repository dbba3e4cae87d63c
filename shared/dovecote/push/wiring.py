"""The composition roots of the push functions (push_api, push_fanout, push_sender) and of the A2A
function's push methods: the adapters over the deployment's table, queues and keys, as the settings
name them. Imported on first use, never at a module's import."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dovecote.a2a.service import A2AService
    from dovecote.push.dynamo import DynamoConfigStore
    from dovecote.push.queue import SqsNotificationQueue
    from dovecote.push.sender import Fanout, Sender
    from dovecote.push.service import PushService
    from dovecote.tasks.service import TaskService


def config_store(*, sealed: bool = True) -> DynamoConfigStore:
    """`sealed`: the token and credentials are sealed and opened with the data key (the fan-out
    reads only the configs' ids and cursors, and never needs the key)."""
    from dovecote.platform import aws
    from dovecote.platform.protection import protector
    from dovecote.platform.settings import get_settings
    from dovecote.push.dynamo import DynamoConfigStore

    settings = get_settings()
    return DynamoConfigStore(
        table=settings.push_table,
        dynamodb=aws.client("dynamodb"),
        protector=protector(settings) if sealed else _Unopened(),
    )


class _Unopened:
    """The fan-out's protector: it stores nothing, and reads configs for their cursors only."""

    allow_plaintext_reads = False

    def seal(self, plaintext: bytes, identity: str) -> bytes:
        raise RuntimeError("the fan-out never writes a webhook's secrets")

    def open(self, stored: bytes, identity: str) -> bytes:
        return b""


def queue() -> SqsNotificationQueue:
    from dovecote.platform import aws
    from dovecote.platform.settings import get_settings
    from dovecote.push.queue import SqsNotificationQueue

    settings = get_settings()
    return SqsNotificationQueue(queue_url=settings.push_queue_url, dlq_url=settings.push_dlq_url, sqs=aws.client("sqs"))


def push_service(tasks: TaskService | None = None) -> PushService:
    """Over the task service when the function has one built (A2A), else over one read of the task
    item through the task store (the push API: no command module in its cold start)."""
    from dovecote.platform.settings import get_settings
    from dovecote.push.service import PushService
    from dovecote.push.task_facts import StoreFacts, TaskServiceFacts

    settings = get_settings()
    facts: Any
    if tasks is not None:
        facts = TaskServiceFacts(tasks)
    else:
        from dovecote.platform import aws
        from dovecote.tasks.dynamo import DynamoTaskStore

        store = DynamoTaskStore(
            table=settings.tasks_table,
            bucket=settings.bucket,
            dynamodb=aws.client("dynamodb"),
            s3=aws.lazy_client("s3"),
        )
        facts = StoreFacts(store)
    return PushService(
        config_store(),
        facts,
        allow_loopback=settings.allow_loopback_webhooks,
        queue=queue() if settings.push_queue_url and settings.push_dlq_url else None,
    )


def key_source() -> Any:
    from dovecote.platform.settings import get_settings
    from dovecote.push.keys import FileKeys, SecretKeys

    settings = get_settings()
    if settings.webhook_key_file:
        return FileKeys(settings.webhook_key_file)
    if not settings.webhook_keys_secret_arn:
        raise RuntimeError("webhooks need their signing keys: DOVECOTE_WEBHOOK_KEYS_SECRET_ARN or _KEY_FILE")
    from dovecote.platform import aws

    return SecretKeys(aws.client("secretsmanager"), settings.webhook_keys_secret_arn)


def sender(a2a: A2AService) -> Sender:
    from dovecote.a2a.notifications import A2ABodies
    from dovecote.platform.settings import get_settings
    from dovecote.push.dial import PinnedPoster
    from dovecote.push.sender import Sender

    settings = get_settings()
    return Sender(
        config_store(),
        queue(),
        A2ABodies(a2a),
        key_source(),
        PinnedPoster(),
        allow_loopback=settings.allow_loopback_webhooks,
        retry_base=settings.webhook_retry_base_seconds,
    )


def fanout() -> Fanout:
    from dovecote.push.sender import Fanout

    return Fanout(config_store(sealed=False), queue())
