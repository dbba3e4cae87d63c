"""The one way a function consumes an SQS FIFO queue (the memory worker, the webhook sender):
Powertools' `SqsFifoPartialProcessor(skip_group_on_error=True)` with `process_partial_response`. A
record whose handler raises is reported in `batchItemFailures` together with the records behind it in
its own message group (their order must hold), while the other groups of the batch go on; without
`skip_group_on_error` one failure would fail the rest of the whole batch.

A processor keeps per-batch state, so one is made per invocation (the local emulator invokes a
handler from several threads at once; in Lambda it costs nothing).

`raise_when_all_fail`: Powertools raises when every record of a batch failed, so the invocation counts
as a Lambda error. Right where a failure is a fault (the memory worker); not where it is the normal
course (a webhook waiting for its retry), which would count every retry as an error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

__all__ = ["SQSRecord", "process_fifo"]


def process_fifo(
    event: dict[str, Any], context: Any, handle: Callable[[SQSRecord], object], *, raise_when_all_fail: bool = True
) -> dict[str, Any]:
    processor = SqsFifoPartialProcessor(skip_group_on_error=True)
    processor.raise_on_entire_batch_failure = raise_when_all_fail  # not a parameter of this processor
    return dict(process_partial_response(event=event, record_handler=handle, processor=processor, context=context))
