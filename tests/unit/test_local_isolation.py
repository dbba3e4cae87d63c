"""The local runtime's per-thread Powertools state (infra/local/isolation.py): the log keys an
invocation appends are its thread's own, so two functions served together each log their own name."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from dovecote.platform.observability import logger
from infra.local.gateway import LambdaContext
from infra.local.isolation import isolate_powertools_requests


def _context(name: str) -> LambdaContext:
    return LambdaContext(
        function_name=name,
        memory_limit_in_mb=128,
        aws_request_id=f"req-{name}",
        invoked_function_arn=f"arn:aws:lambda:us-east-1:000000000000:function:{name}",
    )


def test_two_functions_served_together_each_log_their_own_name() -> None:
    isolate_powertools_requests()
    both_appended = threading.Barrier(2, timeout=10)
    seen: dict[str, dict[str, Any]] = {}

    @logger.inject_lambda_context
    def handler(event: dict[str, Any], context: Any) -> None:
        both_appended.wait()  # each thread has appended its keys before either logs
        record = logging.LogRecord("dovecote", logging.INFO, __file__, 1, "delivered", None, None)
        seen[event["as"]] = json.loads(logger.registered_formatter.format(record))

    threads = [
        threading.Thread(target=handler, args=({"as": name}, _context(name))) for name in ("authorizer", "push_sender")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {name: line["function_name"] for name, line in seen.items()} == {
        "authorizer": "authorizer",
        "push_sender": "push_sender",
    }
    assert seen["push_sender"]["function_request_id"] == "req-push_sender"
