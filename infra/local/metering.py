"""Count AWS round trips through botocore events. `request-created` fires once per HTTP attempt
(retries included), so the count is the number of requests the command really sent."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class RoundTrips:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    def _on_request(self, request: Any = None, operation_name: str = "", **kwargs: Any) -> None:
        event = kwargs.get("event_name", "")
        service = event.split(".")[1] if event.count(".") >= 2 else "?"
        self.calls[f"{service}.{operation_name}"] += 1

    def reset(self) -> None:
        self.calls.clear()


@contextmanager
def count_round_trips(*clients: Any) -> Iterator[RoundTrips]:
    meter = RoundTrips()
    for client in clients:
        client.meta.events.register("request-created", meter._on_request, unique_id=f"meter-{id(meter)}")
    try:
        yield meter
    finally:
        for client in clients:
            client.meta.events.unregister("request-created", unique_id=f"meter-{id(meter)}")
