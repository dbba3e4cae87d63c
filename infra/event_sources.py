"""Every event source of the deployment, once: which function each stream, queue and schedule
invokes, with what batch, filter and concurrency, and how often. CDK builds its event source
mappings and EventBridge rules from this table (infra/constructs), and `dovecote dev` starts its
pollers and schedule threads from the same rows (infra/local/runtime.py), so the cloud and the
local runtime cannot drift apart; tests/infra/test_event_sources.py holds the synthesized template
and the local runtime to it.

Plain data (no CDK import): the local runtime reads it without loading aws-cdk-lib.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dovecote.tasks.dynamo_stream import EVENT_APPENDS
from infra.routes import (
    DISPATCH_EVERY_SECONDS,
    DISPATCHER,
    JANITOR,
    JANITOR_BATCH_SIZE,
    JANITOR_FILTER,
    MEMORY_WORKER,
    MEMORY_WORKER_BATCH_SIZE,
    PUSH_FANOUT,
    PUSH_FANOUT_BATCH_SIZE,
    PUSH_SENDER,
    PUSH_SENDER_BATCH_SIZE,
    RECONCILE_EVERY_HOURS,
    RECONCILER,
    TRANSCRIPT_INDEXER,
    TRANSCRIPT_INDEXER_BATCH_SIZE,
    Function,
)


@dataclass(frozen=True)
class StreamSource:
    """A DynamoDB stream (of the table named by the `table` setting) invoking `function`."""

    function: Function
    table: str  # the settings name of the table whose stream it reads
    batch_size: int
    filter: dict[str, Any] | None = None  # Lambda event filtering: only matching records invoke
    retry_attempts: int = 10


@dataclass(frozen=True)
class QueueSource:
    """An SQS queue invoking `function`, reporting the messages of a batch that failed."""

    function: Function
    queue: str  # the queue's name in infra/local/resources.DEFAULT_NAMES
    batch_size: int
    max_concurrency: int | None = None  # the cloud's cap on concurrent invocations (None: Lambda's)
    # Locally: concurrent pollers (a cloud mapping scales on its own), whether S3 writes wake the
    # poller (the queue is S3's notification target), and a receive count after which a message is
    # given up (the cloud's queue has a dead-letter queue with its own redrive policy instead).
    local_concurrency: int = 1
    wake_on_s3_writes: bool = False
    local_give_up_after: int | None = None
    # Locally, after a batch with failures, poll again this soon (a consumer that sets its own
    # visibility timeout per message, like the webhook sender's backoff); None: the queue's timeout.
    local_retry_poll_s: float | None = None


@dataclass(frozen=True)
class ScheduleSource:
    """An EventBridge rate rule invoking `function` every `every_s` seconds in the cloud. Locally
    `local_every_s`: faster where waiting a cloud period would make `dovecote dev` feel broken (a
    silent lease fenced a minute late), None where the local runtime does not run it, with why."""

    function: Function
    every_s: int
    local_every_s: float | None
    why_local: str = ""
    # Settings that must not be "off" for the schedule to exist (the semantic tier's backfill).
    needs_on: tuple[str, ...] = ()


EMBED_BACKFILL_EVERY_S = 3600

STREAMS = (
    StreamSource(JANITOR, table="notes_table", batch_size=JANITOR_BATCH_SIZE, filter=JANITOR_FILTER),
    # Webhooks: every event the task log commits (dovecote/tasks/dynamo_stream.py), nothing else.
    StreamSource(PUSH_FANOUT, table="tasks_table", batch_size=PUSH_FANOUT_BATCH_SIZE, filter=EVENT_APPENDS),
)
QUEUES = (
    QueueSource(
        TRANSCRIPT_INDEXER,
        queue="transcripts_queue",
        batch_size=TRANSCRIPT_INDEXER_BATCH_SIZE,
        max_concurrency=4,  # parallel indexers: enough for bursts, gentle on a small domain
        wake_on_s3_writes=True,
        local_give_up_after=3,
    ),
    # Two local pollers, like a mapping with some concurrency: scopes flow in parallel, each scope
    # stays serialized by its FIFO message group.
    QueueSource(MEMORY_WORKER, queue="memory_queue", batch_size=MEMORY_WORKER_BATCH_SIZE, local_concurrency=2),
    # Webhooks: tasks in parallel, each task's notifications in order (its FIFO group). Locally a
    # retried notification is polled for again RETRY_POLL_S after (the cloud's mapping polls anyway).
    QueueSource(
        PUSH_SENDER,
        queue="push_queue",
        batch_size=PUSH_SENDER_BATCH_SIZE,
        max_concurrency=10,
        local_concurrency=2,
        local_retry_poll_s=1.0,
    ),
)
SCHEDULES = (
    ScheduleSource(
        DISPATCHER,
        every_s=DISPATCH_EVERY_SECONDS,
        local_every_s=1.0,
        why_local="EventBridge's finest rate is a minute; locally a silent lease is fenced within a second",
    ),
    ScheduleSource(
        RECONCILER,
        every_s=RECONCILE_EVERY_HOURS * 3600,
        local_every_s=None,
        why_local="a development runtime rarely lives a day; the janitor's stream does the same cleanup as it goes",
    ),
    ScheduleSource(
        TRANSCRIPT_INDEXER,
        every_s=EMBED_BACKFILL_EVERY_S,
        local_every_s=2.0,
        why_local="the semantic tier's backfill; locally a pushed transcript is searchable semantically at once",
        needs_on=("embedder",),
    ),
)


def schedule_of(function: Function) -> ScheduleSource:
    (found,) = [s for s in SCHEDULES if s.function is function]
    return found


def queue_of(function: Function) -> QueueSource:
    (found,) = [q for q in QUEUES if q.function is function]
    return found


def stream_of(function: Function) -> StreamSource:
    (found,) = [s for s in STREAMS if s.function is function]
    return found
