"""Per-thread request state for Powertools' resolvers in the local runtime.

Lambda runs one invocation per container at a time; `dovecote dev` serves requests from threads of
one process. Powertools keeps the request being resolved in process-wide state (the class
attributes `BaseRouter.current_event` and `lambda_context`, and one `context` dict per resolver), so
two requests in flight together could read each other's event: a worker's call answered as a
caller, a body validated against another request's body. This makes that state per thread. Lambda
itself never loads this module.

The functions share one Powertools Logger too (platform/observability.py), whose keys are
process-wide: `inject_lambda_context` appends `function_name` and the request id, so a log line of
the push sender could carry the authorizer's name. Here a key appended during an invocation is the
thread's own (Powertools' thread-safe keys, held in a context variable).
"""

from __future__ import annotations

import threading
from typing import Any

_state = threading.local()
_installed = False


def isolate_powertools_requests() -> None:
    global _installed
    if _installed:
        return
    from aws_lambda_powertools.event_handler import api_gateway

    resolver: Any = api_gateway.ApiGatewayResolver
    original = resolver.resolve

    def resolve(self: Any, event: Any, context: Any) -> Any:
        _state.event = self._to_proxy_event(dict(event))
        _state.lambda_context = context
        _state.context = {}
        return original(self, event, context)

    def per_thread(name: str, default: Any) -> property:
        def get(self: Any) -> Any:
            return _state.__dict__.setdefault(name, default())

        def set_(self: Any, value: Any) -> None:
            setattr(_state, name, value)

        return property(get, set_)

    # Properties on the subclass win over the BaseRouter class attributes `resolve` assigns.
    resolver.resolve = resolve
    resolver.current_event = per_thread("event", lambda: None)
    resolver.lambda_context = per_thread("lambda_context", lambda: None)
    resolver.context = per_thread("context", dict)
    from dovecote.platform.observability import logger

    logger.append_keys = logger.thread_safe_append_keys  # type: ignore[method-assign]
    _installed = True
