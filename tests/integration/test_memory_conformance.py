"""The memory conformance suite: the scenarios of tests/unit/test_memory_service.py that take
`harness`, run over both backends: the in-memory fakes, and DynamoDB + SQS FIFO on moto with
Lambda's delivery emulated (infra/local/queues.py) through the real worker handler."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dovecote.memory.dynamo import DynamoMemoryStore
from dovecote.memory.model import QueueMessage
from dovecote.memory.queue import SqsMemoryQueue
from dovecote.memory.service import MemoryService
from dovecote.memory.worker import WriteWorker
from dovecote.platform.cursors import CursorSigner
from functions.memory_worker.handler import process_batch
from infra.local.queues import QueuePoller
from infra.routes import MEMORY_WORKER, MEMORY_WORKER_BATCH_SIZE
from tests.support.memory import MemoryEdge

# The conformance suite: these scenarios run here once per backend (fixture `harness` below).
from tests.unit.test_memory_service import (  # noqa: F401
    CALLER,
    KEY,
    CountingDetector,
    Harness,
    fake_harness,
    test_a_bulk_load_indexes_a_scope_as_applying_it_one_by_one,
    test_a_pending_cancel_repeats_true_until_the_worker_consumes_it,
    test_an_exact_resubmit_answers_the_same_and_a_different_write_is_a_conflict,
    test_another_authority_sees_nothing,
    test_bad_input_is_refused_and_nothing_is_queued,
    test_cancel_before_start_is_never_stored_and_a_later_cancel_of_a_completed_write_is_false,
    test_cancel_of_an_unknown_or_malformed_id,
    test_candidates_are_pending_and_judged_once,
    test_every_flip_in_every_status,
    test_five_sequential_writes_apply_in_order_all_complete,
    test_memories_page_in_applied_order_with_signed_cursors,
    test_racing_judgments_exactly_one_wins,
    test_the_detector_runs_once_per_write_even_when_messages_are_redelivered,
)


def dynamo_harness(env: dict[str, Any], detector: CountingDetector | None = None) -> Harness:
    settings = env["settings"]
    store = DynamoMemoryStore(table=settings.memory_table, dynamodb=env["dynamodb"])
    queue = SqsMemoryQueue(queue_url=settings.memory_queue_url, dlq_url=settings.memory_dlq_url, sqs=env["sqs"])
    detector = detector or CountingDetector()
    service = MemoryEdge(MemoryService(store, queue, CursorSigner(KEY)))
    worker = WriteWorker(store, queue, detector)
    poller = QueuePoller(
        sqs=env["sqs"], queue_url=settings.memory_queue_url, function=MEMORY_WORKER, batch_size=MEMORY_WORKER_BATCH_SIZE
    ).bind()

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return process_batch(event, context, worker)

    def redeliver(ids: list[str]) -> None:
        # Copies of the messages SQS delivers again, as after a lost delete or a timeout: a new
        # deduplication id each, so SQS does not drop them.
        for n, write_id in enumerate(ids):
            write = store.get_write(CALLER.authority, write_id)
            assert write is not None
            message = QueueMessage(write.authority, write.id, write.scope)
            env["sqs"].send_message(
                QueueUrl=settings.memory_queue_url,
                MessageBody=message.to_body(),
                MessageGroupId=message.group_id,
                MessageDeduplicationId=f"copy-{n}-{message.deduplication_id[:40]}-{id(ids)}",
            )
        poller.drain(handler)

    return Harness(service, worker, store, queue, detector, lambda: poller.drain(handler), redeliver)


@pytest.fixture(params=["fake", "dynamo"])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    if request.param == "fake":
        yield fake_harness()
    else:
        yield dynamo_harness(request.getfixturevalue("moto_env"))
