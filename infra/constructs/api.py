"""Functions, the authorizer and the HTTP API, built from the route table."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration, Stack
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from dovecote.platform.settings import Settings
from infra import routes
from infra.constructs.data import Data
from infra.constructs.grants import Grants, private_queue, stream_source
from infra.constructs.memory import MemoryQueue
from infra.constructs.push import Push
from infra.constructs.search import Search
from infra.constructs.streams import LWA_ENVIRONMENT, STREAM_HANDLER, StreamFront, lwa_layer_arn
from infra.event_sources import schedule_of, stream_of


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        data: Data,
        memory: MemoryQueue,
        search: Search,
        push: Push,
        layer_dir: Path,
        functions_dir: Path,
        log_retention: logs.RetentionDays,
        authorizer_cache_seconds: int,
        reserved_concurrency: bool = True,
        xray_subsegments: bool = False,
        snapstart: bool = False,
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
        self._reserved = reserved_concurrency
        self._subsegments = xray_subsegments
        self._snapstart = snapstart
        # Every setting a function may need; each function receives only the ones it names.
        self._settings = {
            "tokens_table": data.tokens.table_name,
            "notes_table": data.notes.table_name,
            "tasks_table": data.tasks.table_name,
            "bucket": data.bucket.bucket_name,
            "cursor_secret_arn": data.cursor_secret.secret_arn,
            "lease_timeout_seconds": str(Settings.default("lease_timeout_seconds")),
            # Protected payloads: data keys under the stack's key (grants: _grant, tasks_api).
            "data_key_id": data.key.key_arn,
            **memory.settings,
            **push.settings,
            "recall_table": data.recall.table_name,
            "presign_seconds": str(Settings.default("presign_seconds")),
            "stream_seconds": str(Settings.default("stream_seconds")),
            "webhook_retry_base_seconds": str(Settings.default("webhook_retry_base_seconds")),
            **search.settings,
        }
        # Context overrides an operator may need: plaintext reads only while migrating old data; the
        # claimable index's shards per authority (1: strictly the oldest task first, for small fleets).
        for name in ("allow_plaintext_reads", "artifact_max_bytes", "claim_shards", "a2a_waits_per_authority"):
            value = self.node.try_get_context(name)
            if value is not None:
                self._settings[name] = str(value).lower() if isinstance(value, bool) else str(value)
        self.functions: dict[str, lambda_.Function] = {}
        # What API Gateway invokes: the function, or with SnapStart its `live` alias.
        self.targets: dict[str, lambda_.IFunction] = {}
        self.log_groups: dict[str, logs.LogGroup] = {}
        for spec in (
            routes.AUTHORIZER,
            routes.JANITOR,
            routes.RECONCILER,
            routes.DISPATCHER,
            routes.MEMORY_WORKER,
            routes.TRANSCRIPT_INDEXER,
            routes.STREAMS,
            routes.PUSH_FANOUT,
            routes.PUSH_SENDER,
            *routes.FUNCTIONS.values(),
        ):
            self.functions[spec.name] = self._function(spec)
            self.targets[spec.name] = self._target(spec)
        self._grant()
        # Lambda's on-failure destination for a stream receives only the failed batch's metadata
        # (shard, sequence numbers), not the records. It is an alarm and a record for an operator;
        # the reconciler deletes the body versions those records named. SQS-managed encryption:
        # the messages hold no data, and a KMS key here would only widen the janitor's grants.
        self.janitor_dlq = private_queue(self, "JanitorFailures")
        stream_source(
            self.functions[routes.JANITOR.name], "NotesStream", data.notes, stream_of(routes.JANITOR), self.janitor_dlq
        )
        Grants(self, self.functions, data).stream_read(routes.JANITOR.name, data.notes)
        self.reconcile_failures = self._schedule(routes.RECONCILER, "Reconcile")
        self.dispatch_failures = self._schedule(routes.DISPATCHER, "Dispatch")

        self.access_logs = logs.LogGroup(self, "AccessLogs", retention=log_retention, encryption_key=data.key)
        self.http_api = apigw.HttpApi(self, "HttpApi", api_name="dovecote", create_default_stage=True)
        # The A2A Agent Card names the deployment's URL: the API's endpoint, or (context `public_url`)
        # the custom domain in front of it. Configured, never taken from a request's headers.
        # The A2A interface lives on the streaming front (its JSON-RPC URL serves every method).
        self.streams = StreamFront(
            self, "Streams", function=self.functions[routes.STREAMS.name], access_logs=self.access_logs
        )
        public_url = self.node.try_get_context("public_url") or self.streams.url
        for name in ("a2a_api", routes.STREAMS.name):
            self.functions[name].add_environment("DOVECOTE_PUBLIC_URL", str(public_url))
        stage: apigw.CfnStage = self.http_api.default_stage.node.default_child  # type: ignore[union-attr,assignment]
        stage.access_log_settings = apigw.CfnStage.AccessLogSettingsProperty(
            destination_arn=self.access_logs.log_group_arn,
            format=(
                '{"requestId":"$context.requestId","ip":"$context.identity.sourceIp",'
                '"routeKey":"$context.routeKey","status":"$context.status",'
                '"latency":"$context.responseLatency","error":"$context.error.message",'
                '"authorizerError":"$context.authorizer.error",'
                '"authority":"$context.authorizer.authority","role":"$context.authorizer.role",'
                '"worker":"$context.authorizer.worker","tokenId":"$context.authorizer.token_id"}'
            ),
        )
        stage.default_route_settings = apigw.CfnStage.RouteSettingsProperty(
            throttling_burst_limit=200, throttling_rate_limit=100
        )
        authorizer = authorizers.HttpLambdaAuthorizer(
            "BearerAuthorizer",
            self.targets[routes.AUTHORIZER.name],
            response_types=[authorizers.HttpLambdaResponseType.SIMPLE],
            identity_source=["$request.header.Authorization"],
            results_cache_ttl=Duration.seconds(authorizer_cache_seconds),
        )
        integration_by_function = {
            name: integrations.HttpLambdaIntegration(f"{name}-integration", self.targets[name])
            for name in self.functions
            if name != routes.AUTHORIZER.name
        }
        self.routes: dict[str, apigw.HttpRoute] = {}
        for route in routes.ALL_ROUTES:
            self.routes[f"{route.method} {route.path}"] = apigw.HttpRoute(
                self,
                f"Route {route.method} {route.path}",
                http_api=self.http_api,
                route_key=apigw.HttpRouteKey.with_(route.path, apigw.HttpMethod(route.method)),
                integration=integration_by_function[route.function],
                authorizer=authorizer if route.authorized else apigw.HttpNoneAuthorizer(),
            )

    def _schedule(self, spec: routes.Function, name: str) -> sqs.Queue:
        """Run `spec` on its schedule (infra/event_sources.py). The schedule invokes asynchronously:
        two retries, then the event lands in the returned failure queue (alarmed; the next run
        repeats the work, which is idempotent)."""
        failures = private_queue(self, f"{name}Failures")
        fn = self.functions[spec.name]
        fn.configure_async_invoke(
            retry_attempts=2, max_event_age=Duration.hours(1), on_failure=destinations.SqsDestination(failures)
        )
        for child in fn.node.find_all():
            if isinstance(child, lambda_.CfnEventInvokeConfig):
                # Name the function by ARN, as the schedule's permission does, so cfn-lint's
                # serverless rule (which compares the two literally) sees they are the same.
                child.function_name = fn.function_arn
        events.Rule(
            self,
            f"{name}Schedule",
            schedule=events.Schedule.rate(Duration.seconds(schedule_of(spec).every_s)),
            targets=[targets.LambdaFunction(fn, dead_letter_queue=failures, retry_attempts=2)],
        )
        return failures

    def _snapstarts(self, spec: routes.Function) -> bool:
        """SnapStart, when on, for what answers a request (the API functions and the authorizer):
        the background functions' start is no caller's wait."""
        return self._snapstart and (spec is routes.AUTHORIZER or spec.name in routes.FUNCTIONS)

    def _target(self, spec: routes.Function) -> lambda_.IFunction:
        fn = self.functions[spec.name]
        if not self._snapstarts(spec):
            return fn
        # SnapStart works only on published versions: each deployment that changes the function
        # publishes one (its snapshot is taken then) and moves the alias API Gateway invokes.
        return lambda_.Alias(self, f"{spec.name}-live", alias_name="live", version=fn.current_version)

    def _function(self, spec: routes.Function) -> lambda_.Function:
        log_group = logs.LogGroup(self, f"{spec.name}-logs", retention=self._retention, encryption_key=self._data.key)
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
        streams = spec is routes.STREAMS  # a WSGI app behind the Lambda Web Adapter (infra/constructs/streams.py)
        layers = [self.layer]
        if streams:
            layers.append(lambda_.LayerVersion.from_layer_version_arn(self, "WebAdapter", lwa_layer_arn(self)))
        return lambda_.Function(
            self,
            spec.name,
            runtime=lambda_.Runtime.PYTHON_3_12,
            architecture=lambda_.Architecture.ARM_64,
            handler=STREAM_HANDLER if streams else spec.handler,
            code=self._code,
            layers=layers,
            memory_size=spec.memory_mb,
            timeout=Duration.seconds(spec.timeout_s),
            role=role,
            log_group=log_group,
            tracing=lambda_.Tracing.ACTIVE,
            reserved_concurrent_executions=spec.reserved if self._reserved else None,
            snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if self._snapstarts(spec) else None,
            environment={
                **{
                    f"DOVECOTE_{name.upper()}": self._settings[name] for name in spec.settings if name in self._settings
                },
                **spec.environment(subsegments=self._subsegments),
                **(LWA_ENVIRONMENT if streams else {}),
            },
        )

    def _grant(self) -> None:
        d = self._data
        g = Grants(self, self.functions, d)
        g.allow("authorizer", ["dynamodb:GetItem"], [d.tokens.table_arn])
        g.table_key("authorizer", d.tokens, write=False)
        # Mint (PutItem), revoke (UpdateItem), list (Query on the listing index).
        g.allow(
            "admin_api",
            ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"],
            [d.tokens.table_arn, f"{d.tokens.table_arn}/index/by_authority"],
        )
        g.table_key("admin_api", d.tokens, write=True)
        g.cursor_secret("admin_api")
        # PutItem/DeleteItem are the actions inside the note's TransactWriteItems.
        g.allow(
            "notes_api",
            ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:Query"],
            [d.notes.table_arn],
        )
        g.table_key("notes_api", d.notes, write=True)
        # Committed bodies, and the expiring uploads prefix the presigned PUTs land in (the URL is
        # signed with this role, so it needs PutObject there; the commit copies out of it).
        g.allow(
            "notes_api",
            ["s3:GetObject", "s3:GetObjectVersion", "s3:PutObject"],
            [d.bucket.arn_for_objects("notes/*"), d.bucket.arn_for_objects("uploads/notes/*")],
        )
        # Without ListBucket, S3 answers a missing object with AccessDenied (a 503 here) instead of
        # NoSuchKey (a 404: "no upload found"). Only on the uploads prefix.
        g.allow("notes_api", ["s3:ListBucket"], [d.bucket.bucket_arn], StringLike={"s3:prefix": ["uploads/notes/*"]})
        g.bucket_key("notes_api", write=True)
        g.cursor_secret("notes_api")
        g.allow(
            routes.JANITOR.name, ["s3:DeleteObject", "s3:DeleteObjectVersion"], [d.bucket.arn_for_objects("notes/*")]
        )
        # The reconciler lists note body versions, reads which one each note pins, deletes the rest.
        g.allow(
            routes.RECONCILER.name,
            ["s3:ListBucketVersions"],
            [d.bucket.bucket_arn],
            StringLike={"s3:prefix": ["notes/*"]},
        )
        g.allow(routes.RECONCILER.name, ["s3:DeleteObjectVersion"], [d.bucket.arn_for_objects("notes/*")])
        g.allow(routes.RECONCILER.name, ["dynamodb:BatchGetItem"], [d.notes.table_arn])
        g.table_key(routes.RECONCILER.name, d.notes, write=False)
        # GetItem/PutItem are the actions inside TransactGetItems/TransactWriteItems; no Scan, no Delete.
        # UpdateItem: the heartbeat (one conditional update of the task item).
        g.allow(
            "tasks_api",
            ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"],
            [d.tasks.table_arn, f"{d.tasks.table_arn}/index/*"],
        )
        g.table_key("tasks_api", d.tasks, write=True)
        # The dispatcher: the expiry index (Query), then the ordinary fence command's read and
        # TransactWriteItems (GetItem/PutItem), and the cursor key its command ids are keyed by.
        # After a change of claim_shards: a Scan of the sparse claimable index and one UpdateItem per
        # entry it moves (TaskService.reshard_claimable); the layout item is a GetItem/PutItem.
        g.allow(
            routes.DISPATCHER.name,
            ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"],
            [d.tasks.table_arn, f"{d.tasks.table_arn}/index/expiring"],
        )
        g.allow(routes.DISPATCHER.name, ["dynamodb:UpdateItem"], [d.tasks.table_arn])
        g.allow(routes.DISPATCHER.name, ["dynamodb:Scan"], [f"{d.tasks.table_arn}/index/claimable"])
        g.table_key(routes.DISPATCHER.name, d.tasks, write=True)
        g.cursor_secret(routes.DISPATCHER.name)
        # Large message parts and artifact payloads (content-addressed), and the expiring uploads
        # prefix the artifact upload URLs land in (signed with this role; freeze copies out of it).
        g.allow(
            "tasks_api",
            ["s3:GetObject", "s3:PutObject"],
            [
                d.bucket.arn_for_objects("parts/*"),
                d.bucket.arn_for_objects("artifacts/*"),
                d.bucket.arn_for_objects("uploads/artifacts/*"),
            ],
        )
        # A missing upload is NoSuchKey (404 "no upload found") only with ListBucket on its prefix.
        g.allow(
            "tasks_api", ["s3:ListBucket"], [d.bucket.bucket_arn], StringLike={"s3:prefix": ["uploads/artifacts/*"]}
        )
        g.bucket_key("tasks_api", write=True)
        g.payload_key("tasks_api")
        g.cursor_secret("tasks_api")
        # A2A (dovecote.a2a): the caller's side of the tasks only. Create, reply and cancel are the
        # task transactions (GetItem/PutItem); a list is the by_authority index, a task's messages
        # and events Queries of the table; no UpdateItem (the heartbeat is a worker's). Large message
        # parts are written and read by digest; artifact payloads are only read (workers freeze them).
        # The streams function serves the whole A2A interface (the streaming front) besides the task
        # streams, which read the task item and Query its events: the A2A function's grants, and the
        # authorizer's read of the tokens table (it checks the token itself).
        for name in ("a2a_api", routes.STREAMS.name):
            g.allow(
                name,
                ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"],
                [d.tasks.table_arn, f"{d.tasks.table_arn}/index/by_authority"],
            )
            # The one update it makes: its authority's blocking-waits item (dovecote/a2a/waits.py), by
            # its key prefix, so no task item can be changed outside a task transaction.
            g.allow(
                name,
                ["dynamodb:UpdateItem"],
                [d.tasks.table_arn],
                **{"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["AW#*"]}},
            )
            g.table_key(name, d.tasks, write=True)
            g.allow(name, ["s3:GetObject", "s3:PutObject"], [d.bucket.arn_for_objects("parts/*")])
            g.allow(name, ["s3:GetObject"], [d.bucket.arn_for_objects("artifacts/*")])
            g.bucket_key(name, write=True)
            g.payload_key(name)
            g.cursor_secret(name)
        g.allow(routes.STREAMS.name, ["dynamodb:GetItem"], [d.tokens.table_arn])
        g.table_key(routes.STREAMS.name, d.tokens, write=False)

    @property
    def region(self) -> str:
        return Stack.of(self).region
