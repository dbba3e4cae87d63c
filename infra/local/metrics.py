"""The functions' Powertools metrics in the local runtime: counted, never printed as EMF.

In Lambda, `@metrics.log_metrics` prints one EMF document per invocation and CloudWatch reads it
from stdout. Locally that is noise, so the runtime sets POWERTOOLS_METRICS_DISABLED; but Powertools'
flush then keeps the values instead of clearing them, and when one metric reaches 100 values
`add_metric` prints them all regardless (the dispatcher's `LeasesFenced`, once a second: a line of
100 values about every two minutes on the dev log). Here a flush adds the values to a `Summary` and
clears them. `dovecote dev --verbose` logs the summary as one short line a minute (metrics recorded
in that minute only); POWERTOOLS_METRICS_DISABLED=false in the environment prints the EMF documents
as in Lambda.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

log = logging.getLogger("dovecote-dev")


class Summary:
    """Metric totals and counts since the last `line()`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: Counter[str] = Counter()
        self._counts: Counter[str] = Counter()

    def add(self, metric_set: dict[str, Any]) -> None:
        with self._lock:
            for name, metric in metric_set.items():
                values = metric.get("Value") or []
                self._totals[name] += sum(values)
                self._counts[name] += len(values)

    def line(self) -> str:
        """`name total (n values)` per metric, then empty until new values arrive."""
        with self._lock:
            parts = [
                f"{name} {self._totals[name]:g}" + (f" ({n} values)" if n > 1 else "")
                for name, n in sorted(self._counts.items())
            ]
            self._totals.clear()
            self._counts.clear()
        return ", ".join(parts)


SUMMARY = Summary()
_installed = False


def capture_metrics() -> Summary:
    """Route every flush of the functions' metrics into SUMMARY (idempotent)."""
    global _installed
    if _installed:
        return SUMMARY
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled
    from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

    original = AmazonCloudWatchEMFProvider.flush_metrics

    def flush_metrics(self: Any, raise_on_empty_metrics: bool = False) -> None:
        if not is_metrics_disabled():
            original(self, raise_on_empty_metrics=raise_on_empty_metrics)
            return
        SUMMARY.add(dict(self.metric_set))
        self.clear_metrics()

    AmazonCloudWatchEMFProvider.flush_metrics = flush_metrics  # type: ignore[method-assign]
    _installed = True
    return SUMMARY


class SummaryLog:
    """Log SUMMARY's line every `period_s` when it has one (`dovecote dev --verbose`)."""

    def __init__(self, summary: Summary, period_s: float = 60.0) -> None:
        self._summary = summary
        self._period = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-summary", daemon=True)

    def start(self) -> SummaryLog:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            line = self._summary.line()
            if line:
                log.info("metrics, last %gs: %s", self._period, line)
