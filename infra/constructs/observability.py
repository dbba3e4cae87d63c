"""Alarms and a dashboard: function errors and throttles, API 5xx, and latency."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.constructs.api import Api
from infra.constructs.memory import QUEUE_AGE_ALARM_SECONDS, MemoryQueue


class Observability(Construct):
    def __init__(self, scope: Construct, id: str, *, api: Api, memory: MemoryQueue) -> None:
        super().__init__(scope, id)
        widgets: list[cw.IWidget] = []
        for name, fn in api.functions.items():
            self._alarm(f"{name}-errors", fn.metric_errors(period=Duration.minutes(5)), 1)
            self._alarm(f"{name}-throttles", fn.metric_throttles(period=Duration.minutes(5)), 1)
            widgets.append(self._function_widget(name, fn))
        server_errors = cw.Metric(
            namespace="AWS/ApiGateway",
            metric_name="5xx",
            dimensions_map={"ApiId": api.http_api.api_id},
            statistic="Sum",
            period=Duration.minutes(5),
        )
        self._alarm("api-5xx", server_errors, 5)
        self._alarm(
            "janitor-failures",
            api.janitor_dlq.metric_approximate_number_of_messages_visible(period=Duration.minutes(5)),
            1,
        )
        self._alarm(
            "dispatch-failures",
            api.dispatch_failures.metric_approximate_number_of_messages_visible(period=Duration.minutes(5)),
            1,
        )
        self._alarm(
            "reconcile-failures",
            api.reconcile_failures.metric_approximate_number_of_messages_visible(period=Duration.minutes(5)),
            1,
        )
        # Memory: a write that failed three receives is in the DLQ (its write is marked failed; an
        # operator redrives it), and a write queue whose oldest message ages means the worker stalls.
        self._alarm(
            "memory-dead-letters",
            memory.dlq.metric_approximate_number_of_messages_visible(period=Duration.minutes(5)),
            1,
        )
        self._alarm(
            "memory-queue-age",
            memory.queue.metric_approximate_age_of_oldest_message(period=Duration.minutes(5)),
            QUEUE_AGE_ALARM_SECONDS,
        )
        # A stored aggregate that broke an invariant was refused (TaskService fails closed): one is
        # one too many, and the function's log holds the facts.
        corrupt = cw.Metric(
            namespace="Dovecote",
            metric_name="CorruptStore",
            statistic="Sum",
            period=Duration.minutes(5),
            dimensions_map={"service": "tasks_api"},
        )
        self._alarm("corrupt-store", corrupt, 1)
        latency = cw.Metric(
            namespace="AWS/ApiGateway",
            metric_name="Latency",
            dimensions_map={"ApiId": api.http_api.api_id},
            statistic="p95",
            period=Duration.minutes(5),
        )
        widgets.append(cw.GraphWidget(title="API 5xx and p95 latency", left=[server_errors], right=[latency]))
        cw.Dashboard(self, "Dashboard", dashboard_name="dovecote", widgets=[widgets])

    def _alarm(self, name: str, metric: cw.IMetric, threshold: float) -> cw.Alarm:
        return cw.Alarm(
            self,
            name,
            metric=metric,
            threshold=threshold,
            evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )

    @staticmethod
    def _function_widget(name: str, fn: lambda_.Function) -> cw.GraphWidget:
        return cw.GraphWidget(
            title=name,
            left=[fn.metric_invocations(), fn.metric_errors()],
            right=[fn.metric_duration(statistic="p95")],
        )
