"""JSON values every binding can carry. Dovecote stores what a caller or a worker sends and serves it
again over /v1 (Python's JSON) and over A2A (protobuf JSON, where a number is an IEEE double). Python
parses `NaN`, `Infinity`, `1e999` (as infinity) and integers of thousands of digits; protobuf JSON
can hold none of them, and neither can any strict JSON reader (RFC 8259 has no NaN or Infinity).

`unrepresentable` is the one rule: the message gate (tasks/commands.py: metadata and `data` parts)
and the A2A binding (a2a/bindings.py: every request's parameters) both refuse by it, so what is
written can always be read back on either binding. Pure, iterative (no recursion to exhaust).
"""

from __future__ import annotations

import math
from typing import Any


def unrepresentable(value: Any) -> tuple[str, str] | None:
    """The first number (in document order) in `value` that protobuf JSON cannot hold, as (where, what): `where` a
    JSON path below `value` ("" for `value` itself, else like `.a[2].b`), `what` the number's kind
    (NaN, Infinity, -Infinity, or an integer beyond a double's range). None when there is none."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, bool) or node is None or isinstance(node, str):
            continue
        if isinstance(node, float):
            if not math.isfinite(node):
                return where, "NaN" if math.isnan(node) else ("Infinity" if node > 0 else "-Infinity")
        elif isinstance(node, int):
            try:
                float(node)
            except OverflowError:
                return where, f"an integer of {len(str(abs(node)))} digits (beyond a double's range)"
        elif isinstance(node, dict):
            stack.extend(reversed([(child, f"{where}.{key}") for key, child in node.items()]))
        elif isinstance(node, list):
            stack.extend(reversed([(child, f"{where}[{i}]") for i, child in enumerate(node)]))
    return None


def problem(value: Any, field: str) -> str | None:
    """The refusal's message for `value` at `field`, or None when every number is representable."""
    found = unrepresentable(value)
    if found is None:
        return None
    where, what = found
    named = (field + where[:200]).lstrip(".") or "the value"
    return f"{named} is {what}: numbers must be finite and within a double's range (protobuf JSON, which A2A speaks)"
