"""The dev log shows no metrics line unless asked: with POWERTOOLS_METRICS_DISABLED (what `dovecote
dev` sets) Powertools kept every value and printed 100 of them at once (the dispatcher's LeasesFenced,
about every two minutes); the local runtime counts them instead (infra/local/metrics.py), and
`--verbose` logs one short summary line."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from infra.local.metrics import SUMMARY, Summary, SummaryLog, capture_metrics


def invoke(times: int) -> None:
    metrics = Metrics(namespace="DovecoteTest", service="test")

    @metrics.log_metrics
    def handler(_event: dict[str, Any], _context: Any) -> None:
        metrics.add_metric(name="LeasesFenced", unit=MetricUnit.Count, value=1)

    for _ in range(times):
        handler({}, None)


def test_a_disabled_metric_is_never_printed_and_is_counted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    capture_metrics()
    # Powertools keeps one metric set per process: a test that added a metric outside a flushing
    # handler (a CorruptStore) would otherwise be flushed, and counted, here.
    Metrics(namespace="DovecoteTest", service="test").clear_metrics()
    SUMMARY.line()  # start from nothing
    invoke(250)  # Powertools alone prints a 100-value line at the 100th and the 200th
    assert capsys.readouterr().out == ""
    assert SUMMARY.line() == "LeasesFenced 250 (250 values)"
    assert SUMMARY.line() == ""  # a line covers the values since the last one


def test_metrics_print_as_in_lambda_when_enabled(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    capture_metrics()
    invoke(2)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert [json.loads(line)["LeasesFenced"] for line in lines] == [[1.0], [1.0]]


def test_the_summary_line_is_short_and_logged_only_when_there_is_something(
    caplog: pytest.LogCaptureFixture,
) -> None:
    summary = Summary()
    summary.add({"LeasesFenced": {"Value": [0.0] * 60}, "CorruptStore": {"Value": [1.0]}})
    assert summary.line() == "CorruptStore 1, LeasesFenced 0 (60 values)"
    summary.add({"LeasesFenced": {"Value": [2.0, 1.0]}})
    with caplog.at_level(logging.INFO, logger="dovecote-dev"):
        reporter = SummaryLog(summary, period_s=0.05).start()
        import time

        time.sleep(0.5)
        reporter.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "dovecote-dev"]
    assert lines == ["metrics, last 0.05s: LeasesFenced 3 (2 values)"]
