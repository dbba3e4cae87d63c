"""The cyclic garbage collector paused while a Lambda function initializes and serves its first request.

A cold start creates tens of thousands of long-lived objects (modules, classes, botocore's service
models), and CPython's collector runs every 700 allocations, each full pass walking everything made so
far: about 8% of a cold start's instructions (`python -m bench.coldstart --instructions`: tasks_api
1.57x -> 1.39x the floor). What a cold start frees, reference counting frees; about 800 objects are
left in cycles by the end of a first request (measured on every API function).

`pause()` (called by the `functions` package, which every handler's import runs first) turns the
collector off in a Lambda function (`AWS_LAMBDA_FUNCTION_NAME` is set; a test or the local runtime is
left alone). The end of the first invocation `resume()`s it: `gc.freeze()` first moves what exists to
the permanent generation, so later collections do not walk the modules and models again (the use the
standard library documents it for; the few hundred objects in cycles then are never reclaimed), then
`gc.enable()`. Every handler is wrapped by `resumes_gc`, outermost (tests/unit/test_gc_pause.py checks
each one), so no function keeps the collector off.
"""

from __future__ import annotations

import functools
import gc
import os
from collections.abc import Callable
from typing import Any, TypeVar

H = TypeVar("H", bound=Callable[..., Any])

_paused = False


def pause() -> None:
    global _paused
    if os.environ.get("AWS_LAMBDA_FUNCTION_NAME") and gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()


def resumes_gc(handler: H) -> H:
    """A Lambda handler whose first invocation, however it ends, resumes the collector."""

    @functools.wraps(handler)
    def invoke(*args: Any, **kwargs: Any) -> Any:
        try:
            return handler(*args, **kwargs)
        finally:
            resume()

    invoke.resumes_gc = True  # type: ignore[attr-defined]
    return invoke  # type: ignore[return-value]
