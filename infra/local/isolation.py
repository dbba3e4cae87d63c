"""Per-thread request state for Powertools' resolvers in the local runtime.

Lambda runs one invocation per container at a time; `dovecote dev` serves requests from threads of
one process. Powertools keeps the request being resolved in process-wide state (the class
attributes `BaseRouter.current_event` and `lambda_context`, and one `context` dict per resolver), so
two requests in flight together could read each other's event: a worker's call answered as a
caller, a body validated against another request's body. This makes that state per thread. Lambda
itself never loads this module.
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
    _installed = True
