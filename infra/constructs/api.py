"""Functions, the authorizer and the HTTP API, built from the route table."""

from __future__ import annotations

import json
from pathlib import Path

from aws_cdk import Duration, Stack
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants as c
from infra.constructs.data import Data
from infra.routes import AUTHORIZER, FUNCTIONS, JANITOR, JANITOR_BATCH_SIZE, JANITOR_FILTER, ROUTES, Function


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        data: Data,
        layer_dir: Path,
        functions_dir: Path,
        log_retention: logs.RetentionDays,
        authorizer_cache_seconds: int,
    ) -> None:
        super().__init__(scope, id)
        self.layer = lambda_.LayerVersion(
            self,
            "SharedLayer",
            code=lambda_.Code.from_asset(str(layer_dir)),
            compatible_runtimes=[lambda_.Runtime.PYTHON_3_12],
            compatible_architectures=[lambda_.Architecture.ARM_64],
            description="dovecote package and pinned runtime dependencies",
        )
        self._code = lambda_.Code.from_asset(str(functions_dir))
        self._data = data
        self._retention = log_retention
        env = {
            c.ENV_TOKENS_TABLE: data.tokens.table_name,
            c.ENV_NOTES_TABLE: data.notes.table_name,
            c.ENV_TASKS_TABLE: data.tasks.table_name,
            c.ENV_BUCKET: data.bucket.bucket_name,
            c.ENV_CURSOR_SECRET_ARN: data.cursor_secret.secret_arn,
        }
        self.functions: dict[str, lambda_.Function] = {}
        self.log_groups: dict[str, logs.LogGroup] = {}
        for spec in (AUTHORIZER, JANITOR, *FUNCTIONS.values()):
            self.functions[spec.name] = self._function(spec, env)
        self._grant()
        # Records the janitor gives up on (after retries and bisection) are kept here, not dropped:
        # each names a body version still to delete.
        self.janitor_dlq = sqs.Queue(
            self,
            "JanitorFailures",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=data.key,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        self.functions[JANITOR.name].add_event_source_mapping(
            "NotesStream",
            event_source_arn=data.notes.table_stream_arn,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=JANITOR_BATCH_SIZE,
            bisect_batch_on_error=True,
            retry_attempts=10,
            report_batch_item_failures=True,
            on_failure=event_sources.SqsDlq(self.janitor_dlq),
            filters=[{"pattern": json.dumps(JANITOR_FILTER)}],
        )
        data.notes.grant_stream_read(self.functions[JANITOR.name])

        self.access_logs = logs.LogGroup(self, "AccessLogs", retention=log_retention)
        self.http_api = apigw.HttpApi(self, "HttpApi", api_name="dovecote", create_default_stage=True)
        stage: apigw.CfnStage = self.http_api.default_stage.node.default_child  # type: ignore[union-attr,assignment]
        stage.access_log_settings = apigw.CfnStage.AccessLogSettingsProperty(
            destination_arn=self.access_logs.log_group_arn,
            format=(
                '{"requestId":"$context.requestId","ip":"$context.identity.sourceIp",'
                '"routeKey":"$context.routeKey","status":"$context.status",'
                '"latency":"$context.responseLatency","error":"$context.error.message",'
                '"authorizerError":"$context.authorizer.error"}'
            ),
        )
        stage.default_route_settings = apigw.CfnStage.RouteSettingsProperty(
            throttling_burst_limit=200, throttling_rate_limit=100
        )
        authorizer = authorizers.HttpLambdaAuthorizer(
            "BearerAuthorizer",
            self.functions[AUTHORIZER.name],
            response_types=[authorizers.HttpLambdaResponseType.SIMPLE],
            identity_source=["$request.header.Authorization"],
            results_cache_ttl=Duration.seconds(authorizer_cache_seconds),
        )
        integration_by_function = {
            name: integrations.HttpLambdaIntegration(f"{name}-integration", fn)
            for name, fn in self.functions.items()
            if name != AUTHORIZER.name
        }
        self.routes: dict[str, apigw.HttpRoute] = {}
        for route in ROUTES:
            self.routes[f"{route.method} {route.path}"] = apigw.HttpRoute(
                self,
                f"Route {route.method} {route.path}",
                http_api=self.http_api,
                route_key=apigw.HttpRouteKey.with_(route.path, apigw.HttpMethod(route.method)),
                integration=integration_by_function[route.function],
                authorizer=authorizer if route.authorized else apigw.HttpNoneAuthorizer(),
            )

    def _function(self, spec: Function, env: dict[str, str]) -> lambda_.Function:
        log_group = logs.LogGroup(self, f"{spec.name}-logs", retention=self._retention)
        self.log_groups[spec.name] = log_group
        role = iam.Role(
            self,
            f"{spec.name}-role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Dovecote {spec.name}: least privilege",
        )
        # Instead of the AWSLambdaBasicExecutionRole managed policy: this function's log group only.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[log_group.log_group_arn, f"{log_group.log_group_arn}:*"],
            )
        )
        return lambda_.Function(
            self,
            spec.name,
            runtime=lambda_.Runtime.PYTHON_3_12,
            architecture=lambda_.Architecture.ARM_64,
            handler=spec.handler,
            code=self._code,
            layers=[self.layer],
            memory_size=spec.memory_mb,
            timeout=Duration.seconds(spec.timeout_s),
            role=role,
            log_group=log_group,
            tracing=lambda_.Tracing.ACTIVE,
            environment={**env, "POWERTOOLS_SERVICE_NAME": spec.name, "POWERTOOLS_METRICS_NAMESPACE": "Dovecote"},
        )

    def _grant(self) -> None:
        d = self._data
        fn = self.functions

        def allow(name: str, actions: list[str], resources: list[str]) -> None:
            fn[name].add_to_role_policy(iam.PolicyStatement(actions=actions, resources=resources))

        allow("authorizer", ["dynamodb:GetItem"], [d.tokens.table_arn])
        allow("admin_api", ["dynamodb:PutItem"], [d.tokens.table_arn])
        # PutItem/DeleteItem are the actions inside the note's TransactWriteItems.
        allow(
            "notes_api",
            ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:Query"],
            [d.notes.table_arn],
        )
        allow(
            "notes_api", ["s3:GetObject", "s3:GetObjectVersion", "s3:PutObject"], [d.bucket.arn_for_objects("notes/*")]
        )
        allow(JANITOR.name, ["s3:DeleteObject", "s3:DeleteObjectVersion"], [d.bucket.arn_for_objects("notes/*")])
        allow("notes_api", ["secretsmanager:GetSecretValue"], [d.cursor_secret.secret_arn])
        # GetItem/PutItem are the actions inside TransactGetItems/TransactWriteItems; no Scan, no Delete.
        allow(
            "tasks_api",
            ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"],
            [d.tasks.table_arn, f"{d.tasks.table_arn}/index/*"],
        )
        allow("tasks_api", ["s3:GetObject", "s3:PutObject"], [d.bucket.arn_for_objects("parts/*")])
        allow("tasks_api", ["secretsmanager:GetSecretValue"], [d.cursor_secret.secret_arn])
        for name in ("authorizer", "admin_api", JANITOR.name):
            allow(name, ["kms:Decrypt"], [d.key.key_arn])
        for name in ("notes_api", "tasks_api"):
            allow(name, ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"], [d.key.key_arn])

    @property
    def region(self) -> str:
        return Stack.of(self).region
