"""An SQS event-source emulator for the local runtime, beside streams.py: it polls a queue (moto)
and invokes the consumer handler with Lambda's SQS event shape, as Lambda's event source mapping
does. Generic: a queue URL and a Function from the route table (the memory worker; the transcript
indexer can use it as well).

Behaviour copied from Lambda + SQS on purpose:
- batches of up to `batch_size` (10 at most, the SQS maximum per receive); for a FIFO queue SQS
  itself hands out a message group only while none of its messages is in flight, so a group's
  messages reach the handler one batch at a time and in order, while other groups flow on other
  threads (`concurrency`, like concurrent Lambda invocations);
- records carry `attributes` with ApproximateReceiveCount, SentTimestamp, SenderId,
  ApproximateFirstReceiveTimestamp and, on FIFO queues, MessageGroupId, MessageDeduplicationId
  and SequenceNumber; `messageAttributes` in Lambda's camelCase form;
- `batchItemFailures` is honoured: the records it names are not deleted and come back after the
  queue's visibility timeout; a handler that raises fails the whole batch the same way;
- redrive to the dead-letter queue is SQS's own (moto implements RedrivePolicy: a message
  received maxReceiveCount times moves to the DLQ on the next receive), so the emulator does
  nothing for it, exactly like Lambda.
- a failed DeleteMessageBatch is logged and left alone: those messages are delivered again,
  which is how SQS's at-least-once delivery looks to a consumer.
- `give_up_after` (for a queue without a dead-letter queue, like the local transcripts queue):
  a record that failed on its Nth receive is deleted and kept in `failures`, and said so.
- in the runtime the poller is woken by a send to its queue (infra/local/wakeups.py) instead of
  polling every `interval_s`; it polls again when a failed batch's visibility timeout ends, and
  every `idle_s` regardless (EventSource.wake_on).
moto's SQS backend is not thread-safe between a receive and a delete of the same queue, so the
emulator's own SQS calls take one lock; handler invocations run in parallel.
"""

from __future__ import annotations

import hashlib
import threading
import time
from typing import Any

from infra.local.sources import EventSource, Handler, lambda_context, log
from infra.routes import Function

MAX_BATCH = 10
_ATTRIBUTES = (
    "ApproximateReceiveCount",
    "SentTimestamp",
    "SenderId",
    "ApproximateFirstReceiveTimestamp",
    "SequenceNumber",
    "MessageGroupId",
    "MessageDeduplicationId",
)


def _message_attributes(raw: dict[str, Any]) -> dict[str, Any]:
    """SQS's {Name: {StringValue, DataType}} in Lambda's event form."""
    out = {}
    for name, value in raw.items():
        out[name] = {
            "stringValue": value.get("StringValue"),
            "binaryValue": value.get("BinaryValue"),
            "stringListValues": value.get("StringListValues", []),
            "binaryListValues": value.get("BinaryListValues", []),
            "dataType": value.get("DataType", "String"),
        }
    return out


class QueuePoller(EventSource):
    def __init__(
        self,
        *,
        sqs: Any,
        queue_url: str,
        function: Function,
        batch_size: int = MAX_BATCH,
        interval_s: float = 0.1,
        concurrency: int = 1,
        region: str = "us-east-1",
        give_up_after: int | None = None,
        retry_poll_s: float | None = None,
    ) -> None:
        if not 1 <= batch_size <= MAX_BATCH:
            raise ValueError(f"batch_size must be between 1 and {MAX_BATCH}")
        name = queue_url.rsplit("/", 1)[-1]
        super().__init__(function=function, name=f"sqs-{name}", interval_s=interval_s, concurrency=concurrency)
        self._sqs = sqs
        self._url = queue_url
        self._batch_size = batch_size
        self._region = region
        self._arn = ""
        self._visibility_s = 30.0
        self._give_up_after = give_up_after
        self._retry_poll_s = retry_poll_s
        self.failures: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._counts = threading.Lock()
        self.invocations = 0
        self.delivered = 0
        self.failed = 0

    def bind(self) -> QueuePoller:
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=self._url, AttributeNames=["QueueArn", "VisibilityTimeout"]
        )["Attributes"]
        self._arn = attributes["QueueArn"]
        self._visibility_s = float(attributes.get("VisibilityTimeout", 30))
        return self

    def _hidden(self) -> bool:
        """Whether messages are in flight or waiting out a retry's visibility timeout."""
        with self._lock:
            found = self._sqs.get_queue_attributes(
                QueueUrl=self._url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
            )["Attributes"]
        return int(found.get("ApproximateNumberOfMessagesNotVisible", "0")) > 0

    def record(self, message: dict[str, Any]) -> dict[str, Any]:
        """One message in the shape Lambda gives an SQS consumer."""
        attributes = message.get("Attributes") or {}
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": {k: str(attributes[k]) for k in _ATTRIBUTES if k in attributes},
            "messageAttributes": _message_attributes(message.get("MessageAttributes") or {}),
            "md5OfBody": message.get("MD5OfBody") or hashlib.md5(message["Body"].encode()).hexdigest(),  # noqa: S324
            "eventSource": "aws:sqs",
            "eventSourceARN": self._arn,
            "awsRegion": self._region,
        }

    def poll_once(self, handler: Handler) -> int:
        with self._lock:
            response = self._sqs.receive_message(
                QueueUrl=self._url,
                MaxNumberOfMessages=self._batch_size,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
                WaitTimeSeconds=0,
            )
        messages = response.get("Messages") or []
        if not messages:
            if self._retry_poll_s is not None and self._hidden():
                self.poll_at(time.monotonic() + self._retry_poll_s)  # a retry still waits its turn
            return 0
        records = [self.record(m) for m in messages]
        try:
            result = handler({"Records": records}, lambda_context(self.function)) or {}
            failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
        except Exception:  # noqa: BLE001 - like Lambda: an error fails the whole batch
            log.warning("%s raised: the whole batch of %d returns to the queue", self.function.name, len(records))
            failed = {r["messageId"] for r in records}
        done = [r for r in records if r["messageId"] not in failed]
        if failed:
            # Nothing announces a message coming back from its visibility timeout: poll then (or,
            # for a consumer that sets each failed message's timeout itself, every retry_poll_s).
            wait = self._visibility_s + 0.1 if self._retry_poll_s is None else self._retry_poll_s
            self.poll_at(time.monotonic() + wait)
        if self._give_up_after is not None:
            given_up = [
                r
                for r in records
                if r["messageId"] in failed
                and int(r["attributes"].get("ApproximateReceiveCount", "1")) >= self._give_up_after
            ]
            if given_up:
                log.error(
                    "%s gave up on %d record(s) after %d receives",
                    self.function.name,
                    len(given_up),
                    self._give_up_after,
                )
                with self._counts:
                    self.failures.extend(given_up)
                done += given_up
        if done:
            entries = [{"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(done)]
            try:
                with self._lock:
                    answer = self._sqs.delete_message_batch(QueueUrl=self._url, Entries=entries)
                lost = len(answer.get("Failed") or [])
            except Exception:  # noqa: BLE001 - undeleted messages are simply delivered again
                lost = len(done)
            if lost:
                log.warning("%s: deleting %d message(s) failed; they will be delivered again", self._name, lost)
        with self._counts:
            self.invocations += 1
            self.delivered += len(records)
            self.failed += len(records) - len(done)
        return len(records)

    def drain(self, handler: Handler, *, idle_polls: int = 3, max_polls: int = 10_000) -> int:
        """Poll on this thread until the queue has given nothing `idle_polls` times in a row
        (a message in flight or waiting out its visibility timeout is not lost, just not yet
        visible); returns the records delivered. For tests and the bench."""
        total, idle = 0, 0
        for _ in range(max_polls):
            delivered = self.poll_once(handler)
            total += delivered
            idle = 0 if delivered else idle + 1
            if idle >= idle_polls:
                break
            if not delivered:
                time.sleep(self._interval)
        return total
