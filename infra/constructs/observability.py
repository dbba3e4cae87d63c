"""Alarms and a dashboard: function errors and throttles, API 5xx, and latency."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.constructs import memory as memory_queue
from infra.constructs import push as push_construct
from infra.constructs import search as search_queue
from infra.constructs.api import Api
from infra.constructs.memory import MemoryQueue
from infra.constructs.push import Push
from infra.constructs.search import Search


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        api: Api,
        memory: MemoryQueue,
        search: Search | None = None,
        push: Push | None = None,
    ) -> None:
        super().__init__(scope, id)
        widgets: list[cw.IWidget] = []
        for name, fn in api.functions.items():
            self._alarm(f"{name}-errors", fn.metric_errors(period=Duration.minutes(5)), 1)
            self._alarm(f"{name}-throttles", fn.metric_throttles(period=Duration.minutes(5)), 1)
            widgets.append(self._function_widget(name, fn))

        def api_metric(name: str, statistic: str) -> cw.Metric:
            dimensions = {"ApiId": api.http_api.api_id}
            return cw.Metric(
                namespace="AWS/ApiGateway",
                metric_name=name,
                dimensions_map=dimensions,
                statistic=statistic,
                period=Duration.minutes(5),
            )

        server_errors = api_metric("5xx", "Sum")
        self._alarm("api-5xx", server_errors, 5)
        # A failure queue holding one message is one too many. Memory: a write that failed three
        # receives is in the DLQ (its write is marked failed; an operator redrives it), and a write
        # queue whose oldest message ages means the worker stalls.
        failures = {
            "janitor-failures": api.janitor_dlq,
            "dispatch-failures": api.dispatch_failures,
            "reconcile-failures": api.reconcile_failures,
            "memory-dead-letters": memory.dlq,
        }
        for name, queue in failures.items():
            self._alarm(name, queue.metric_approximate_number_of_messages_visible(period=Duration.minutes(5)), 1)
        self._alarm(
            "memory-queue-age",
            memory.queue.metric_approximate_age_of_oldest_message(period=Duration.minutes(5)),
            memory_queue.QUEUE_AGE_ALARM_SECONDS,
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
        if search is not None:
            self._search_alarms(search)
        if push is not None:
            # A dead-lettered notification (given up after hours of retries, or refused outright: the
            # config's last_failure says why; POST /v1/admin/webhooks/redrive sends it again), a
            # fan-out batch that failed every retry, and a queue whose oldest notification outlived
            # the retry window (the sender is stuck).
            period = Duration.minutes(5)
            self._alarm(
                "webhook-dead-letters", push.dlq.metric_approximate_number_of_messages_visible(period=period), 1
            )
            self._alarm(
                "webhook-fanout-failures",
                push.fanout_failures.metric_approximate_number_of_messages_visible(period=period),
                1,
            )
            self._alarm(
                "webhook-queue-age",
                push.queue.metric_approximate_age_of_oldest_message(period=period),
                push_construct.QUEUE_AGE_ALARM_SECONDS,
            )
        latency = api_metric("Latency", "p95")
        widgets.append(cw.GraphWidget(title="API 5xx and p95 latency", left=[server_errors], right=[latency]))
        cw.Dashboard(self, "Dashboard", dashboard_name="dovecote", widgets=[widgets])

    def _search_alarms(self, search: Search) -> None:
        """Transcripts that failed every retry, uploads waiting too long, and the domain's health:
        red status, writes blocked (disk or memory), and less than a quarter of its disk free."""
        period = Duration.minutes(5)
        self._alarm("transcript-failures", search.dlq.metric_approximate_number_of_messages_visible(period=period), 1)
        self._alarm(
            "transcript-queue-age",
            search.queue.metric_approximate_age_of_oldest_message(period=period),
            search_queue.QUEUE_AGE_ALARM_SECONDS,
        )
        self._alarm("search-red", search.domain.metric_cluster_status_red(period=period), 1)
        self._alarm("search-writes-blocked", search.domain.metric_cluster_index_writes_blocked(period=period), 1)
        self._alarm(
            "search-free-storage",
            search.domain.metric_free_storage_space(period=period, statistic="Minimum"),
            search.volume_gb * 1024 / 4,  # megabytes
            comparison=cw.ComparisonOperator.LESS_THAN_OR_EQUAL_TO_THRESHOLD,
        )

    def _alarm(
        self,
        name: str,
        metric: cw.IMetric,
        threshold: float,
        comparison: cw.ComparisonOperator = cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    ) -> cw.Alarm:
        return cw.Alarm(
            self,
            name,
            metric=metric,
            threshold=threshold,
            evaluation_periods=1,
            comparison_operator=comparison,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )

    @staticmethod
    def _function_widget(name: str, fn: lambda_.Function) -> cw.GraphWidget:
        return cw.GraphWidget(
            title=name,
            left=[fn.metric_invocations(), fn.metric_errors()],
            right=[fn.metric_duration(statistic="p95")],
        )
