"""The cloud and `dovecote dev` wire their event sources from one table (infra/event_sources.py):
the synthesized template holds exactly its streams, queues and schedules, with their batches,
filters, concurrency and rates, and the local runtime starts exactly its rows."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from infra.event_sources import QUEUES, SCHEDULES, STREAMS, QueueSource, ScheduleSource, StreamSource
from infra.routes import DISPATCHER, Function
from tests.infra.test_stack import resources


def _function_ids(raw: dict[str, Any], function: Function) -> set[str]:
    """The logical ids of the function (and its live alias, when SnapStart publishes one)."""
    return {
        k
        for k, v in resources(raw, "AWS::Lambda::Function").items()
        if v["Properties"].get("Handler") == function.handler
    }


def _names_function(value: Any, ids: set[str]) -> bool:
    text = json.dumps(value)
    return any(f'"{i}"' in text for i in ids)


def _mappings_of(raw: dict[str, Any], function: Function) -> list[dict[str, Any]]:
    ids = _function_ids(raw, function)
    assert ids, function.name
    return [
        m["Properties"]
        for m in resources(raw, "AWS::Lambda::EventSourceMapping").values()
        if _names_function(m["Properties"]["FunctionName"], ids)
    ]


def _rules_of(raw: dict[str, Any], function: Function) -> list[dict[str, Any]]:
    ids = _function_ids(raw, function)
    return [
        r["Properties"]
        for r in resources(raw, "AWS::Events::Rule").values()
        if any(_names_function(t["Arn"], ids) for t in r["Properties"].get("Targets", []))
    ]


def _rate_seconds(expression: str) -> int:
    count, unit = expression.removeprefix("rate(").removesuffix(")").split()
    return int(count) * {"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600, "day": 86400, "days": 86400}[unit]


@pytest.fixture(scope="module")
def raw(options_synth: dict[str, Any]) -> dict[str, Any]:
    """The synthesis with every option on (the embedder included: its backfill schedule exists)."""
    return dict(options_synth["raw"])


def test_the_template_has_exactly_the_tables_sources(raw: dict[str, Any]) -> None:
    assert len(resources(raw, "AWS::Lambda::EventSourceMapping")) == len(STREAMS) + len(QUEUES)
    assert len(resources(raw, "AWS::Events::Rule")) == len(SCHEDULES)


@pytest.mark.parametrize("stream", STREAMS, ids=lambda s: s.function.name)
def test_each_stream_mapping_is_its_row(raw: dict[str, Any], stream: StreamSource) -> None:
    (props,) = _mappings_of(raw, stream.function)
    assert "StreamArn" in json.dumps(props["EventSourceArn"])
    assert props["BatchSize"] == stream.batch_size
    assert props["MaximumRetryAttempts"] == stream.retry_attempts
    filters = [json.loads(f["Pattern"]) for f in props.get("FilterCriteria", {}).get("Filters", [])]
    assert filters == ([stream.filter] if stream.filter else [])


@pytest.mark.parametrize("queue", QUEUES, ids=lambda q: q.function.name)
def test_each_queue_mapping_is_its_row(raw: dict[str, Any], queue: QueueSource) -> None:
    (props,) = _mappings_of(raw, queue.function)
    assert "Arn" in json.dumps(props["EventSourceArn"]) and "StreamArn" not in json.dumps(props["EventSourceArn"])
    assert props["BatchSize"] == queue.batch_size
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    expected = {"MaximumConcurrency": queue.max_concurrency} if queue.max_concurrency else None
    assert props.get("ScalingConfig") == expected


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: s.function.name)
def test_each_schedule_rule_is_its_row(raw: dict[str, Any], schedule: ScheduleSource) -> None:
    (props,) = _rules_of(raw, schedule.function)
    assert _rate_seconds(props["ScheduleExpression"]) == schedule.every_s
    if schedule.local_every_s is None:
        assert schedule.why_local, f"{schedule.function.name} does not run locally: say why"


def test_the_local_runtime_starts_exactly_the_tables_rows(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`dovecote dev` (in process, embedder on) starts one poller per stream and queue row, with the
    row's batch and filter, and one schedule thread per row it runs locally, at the row's rate."""
    from infra.local.queues import QueuePoller
    from infra.local.runtime import LocalRuntime
    from infra.local.schedules import Schedule
    from infra.local.streams import StreamPoller

    monkeypatch.setenv("DOVECOTE_EMBEDDER", "hashing")
    before = dict(os.environ)
    runtime = LocalRuntime(port=0, tokens_file=tmp_path / "tokens.json").start()
    try:
        streams = [s for s in runtime.sources if isinstance(s, StreamPoller)]
        queues = [s for s in runtime.sources if isinstance(s, QueuePoller)]
        schedules = [s for s in runtime.sources if isinstance(s, Schedule)]
        assert [(s.function, s._batch_size, s._filter) for s in streams] == [
            (r.function, r.batch_size, r.filter) for r in STREAMS
        ]
        assert [(q.function, q._batch_size, q._concurrency) for q in queues] == [
            (r.function, r.batch_size, r.local_concurrency) for r in QUEUES
        ]
        local = [r for r in SCHEDULES if r.local_every_s is not None]
        assert [(s.function, s.interval_s) for s in schedules] == [(r.function, r.local_every_s) for r in local]
        assert any(s.function is DISPATCHER for s in schedules)
        assert os.environ["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1:")  # its own moto
    finally:
        runtime.stop()
    # The process gets its environment back: a later test must not reach the stopped moto.
    assert dict(os.environ) == before
