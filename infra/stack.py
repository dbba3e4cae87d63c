"""The Dovecote stack: data, search, api, observability, and the cdk-nag acknowledgments with reasons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import Acknowledgment, CfnOutput, Stack, Validations
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.constructs.api import Api
from infra.constructs.console import Console
from infra.constructs.data import Data
from infra.constructs.memory import MemoryQueue
from infra.constructs.observability import Observability
from infra.constructs.push import Push
from infra.constructs.search import Search


class DovecoteStack(Stack):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        layer_dir: Path,
        functions_dir: Path,
        production: bool = False,
        log_retention_days: int = 30,
        authorizer_cache_seconds: int = 300,
        reserved_concurrency: bool = True,
        xray_subsegments: bool = False,
        snapstart: bool = False,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, id, **kwargs)  # type: ignore[arg-type]
        # Server access logs are delivered through a bucket policy, not the deprecated
        # LogDeliveryWrite ACL. Set on the stack so no app can synthesize it the old way.
        self.node.set_context("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy", True)
        self.data = Data(self, "Data", production=production)
        self.memory = MemoryQueue(self, "Memory", data=self.data)
        self.push = Push(self, "Push", data=self.data)
        self.search = Search(
            self, "Search", data=self.data, production=production, log_retention=_retention(log_retention_days)
        )
        self.api = Api(
            self,
            "Api",
            data=self.data,
            memory=self.memory,
            search=self.search,
            push=self.push,
            layer_dir=layer_dir,
            functions_dir=functions_dir,
            log_retention=_retention(log_retention_days),
            authorizer_cache_seconds=authorizer_cache_seconds,
            reserved_concurrency=reserved_concurrency,
            xray_subsegments=xray_subsegments,
            snapstart=snapstart,
        )
        self.memory.connect(self.api.functions)
        self.push.connect(self.api.functions)
        self.search.connect(self.api.functions)
        Observability(self, "Observability", api=self.api, memory=self.memory, search=self.search, push=self.push)
        # The web console: S3 behind CloudFront, calling this API (infra/constructs/console.py).
        self.console = Console(
            self, "Console", http_api=self.api.http_api, access_logs=self.data.access_logs, production=production
        )
        CfnOutput(self, "Endpoint", value=self.api.http_api.api_endpoint)
        # Task streams and the A2A interface (DOVECOTE_STREAM_ENDPOINT for the SDK and the CLI).
        CfnOutput(self, "StreamEndpoint", value=self.api.streams.url)
        CfnOutput(self, "SearchEndpoint", value=self.search.url)
        CfnOutput(self, "TokensTable", value=self.data.tokens.table_name)
        # Webhook key rotation: `python -m dovecote.push.keys rotate --secret-arn <this>`.
        CfnOutput(self, "WebhookKeysSecret", value=self.push.keys.secret_arn)
        self._acknowledge()

    def _acknowledge(self) -> None:
        """Every cdk-nag finding we accept, each with the reason it is acceptable (ACKNOWLEDGED)."""
        for construct, rule, reason in ACKNOWLEDGED(self):
            Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))


def ACKNOWLEDGED(stack: DovecoteStack) -> list[tuple[Construct, str, str]]:  # noqa: N802
    """(construct, rule id, reason). tests/infra checks each one still matches a real finding."""
    out: list[tuple[Construct, str, str]] = [
        (
            stack,
            "AwsSolutions-L1",
            "Python 3.12 is pinned on purpose: the layer is built for cp312/arm64 and the "
            "suite runs against it; moving runtimes is a deliberate, tested change.",
        ),
        (
            stack.data.cursor_secret,
            "AwsSolutions-SMG4",
            "The cursor HMAC key is not a credential; rotating it only "
            "invalidates open list cursors, so it is rotated by redeploying, not on a schedule.",
        ),
        (
            stack.data.access_logs,
            "AwsSolutions-S1",
            "This is the server access log destination; logging it into itself would loop.",
        ),
    ]

    def ref(construct: Construct) -> str:
        return stack.get_logical_id(construct.node.default_child)  # type: ignore[arg-type]

    for name, fn in stack.api.functions.items():
        role = fn.role
        out.append(
            (
                role,
                "AwsSolutions-IAM5[Resource::*]",
                "X-Ray PutTraceSegments and PutTelemetryRecords (Tracing.ACTIVE) and, for the janitor, "
                "dynamodb:ListStreams support no resource-level permissions.",
            )
        )
        out.append(
            (
                role,
                f"AwsSolutions-IAM5[Resource::<{ref(stack.api.log_groups[name])}.Arn>:*]",
                "Log streams inside this function's own log group, whose names Lambda chooses.",
            )
        )
    for name in ("notes_api", "notes_janitor", "notes_reconciler"):
        out.append(
            (
                stack.api.functions[name].role,
                f"AwsSolutions-IAM5[Resource::<{ref(stack.data.bucket)}.Arn>/notes/*]",
                "Note bodies live under notes/<authority>/<ref>; the key is derived per request.",
            )
        )
    out.append(
        (
            stack.api.functions["notes_api"].role,
            f"AwsSolutions-IAM5[Resource::<{ref(stack.data.bucket)}.Arn>/uploads/notes/*]",
            "Presigned uploads land under uploads/notes/<authority>/<ref>, an expiring prefix; the key is "
            "derived per request.",
        )
    )
    for queue in (stack.api.reconcile_failures, stack.api.dispatch_failures):
        out.append(
            (
                queue,
                "AwsSolutions-SQS3",
                "This queue is itself a scheduled function's failure destination and its schedule's DLQ; it "
                "has an alarm and is drained by hand.",
            )
        )
    out.append(
        (
            stack.api.janitor_dlq,
            "AwsSolutions-SQS3",
            "This queue is itself the janitor's failure destination (a DLQ); it has an alarm and is drained by hand.",
        )
    )
    a2a_role = stack.api.functions["a2a_api"].role
    for prefix, why in (
        ("parts", "Large message parts live under parts/<authority>/<sha256>; the key is the content digest."),
        ("artifacts", "Artifact payloads live under artifacts/<authority>/<sha256>; read only, by content digest."),
    ):
        out.append((a2a_role, f"AwsSolutions-IAM5[Resource::<{ref(stack.data.bucket)}.Arn>/{prefix}/*]", why))
    streams_role = stack.api.functions["streams_api"].role
    for prefix, why in (
        ("parts", "The A2A interface on the streaming front: large message parts by content digest."),
        ("artifacts", "The A2A interface on the streaming front: artifact payloads, read only, by content digest."),
    ):
        out.append((streams_role, f"AwsSolutions-IAM5[Resource::<{ref(stack.data.bucket)}.Arn>/{prefix}/*]", why))
    out += _stream_front_acknowledgments(stack)
    tasks_role = stack.api.functions["tasks_api"].role
    out.append(
        (
            tasks_role,
            f"AwsSolutions-IAM5[Resource::<{ref(stack.data.tasks)}.Arn>/index/*]",
            "The GSIs of the tasks table (claimable, leases, by_context, by_authority, expiring), Query only.",
        )
    )
    out.append(
        (
            tasks_role,
            f"AwsSolutions-IAM5[Resource::<{ref(stack.data.bucket)}.Arn>/parts/*]",
            "Large message parts live under parts/<authority>/<sha256>; the key is the content digest.",
        )
    )
    out.append(
        (
            tasks_role,
            f"AwsSolutions-IAM5[Resource::<{ref(stack.data.bucket)}.Arn>/artifacts/*]",
            "Large artifact payloads live under artifacts/<authority>/<sha256>; the key is the content digest.",
        )
    )
    out.append(
        (
            tasks_role,
            f"AwsSolutions-IAM5[Resource::<{ref(stack.data.bucket)}.Arn>/uploads/artifacts/*]",
            "Presigned artifact uploads land under uploads/artifacts/<authority>/<sha256>, an expiring prefix; "
            "the key is the content digest.",
        )
    )
    out += _recall_acknowledgments(stack, ref)
    out += _console_acknowledgments(stack, ref)
    for route in ("GET /v1/health", "GET /v1/openapi.json"):
        out.append(
            (
                stack.api.routes[route],
                "AwsSolutions-APIG4",
                "Public by the API contract: health and the "
                "OpenAPI document need no token; every other route uses the bearer-token authorizer.",
            )
        )
    out.append(
        (
            stack.api.routes["GET /.well-known/agent-card.json"],
            "AwsSolutions-APIG4",
            "Public by the A2A specification: a client reads the Agent Card before it has a token (the card "
            "declares the bearer scheme); every other A2A route uses the bearer-token authorizer.",
        )
    )
    out += _push_acknowledgments(stack, ref)
    return out


def _push_acknowledgments(stack: DovecoteStack, ref: Any) -> list[tuple[Construct, str, str]]:
    """Webhooks (infra/constructs/push.py)."""
    sender = stack.api.functions["push_sender"].role
    bucket = ref(stack.data.bucket)
    return [
        (
            stack.api.routes["GET /.well-known/jwks.json"],
            "AwsSolutions-APIG4",
            "Public by design: a webhook receiver verifies signatures with these public keys before it has, or "
            "needs, any token; it serves public keys only.",
        ),
        (
            stack.push.fanout_failures,
            "AwsSolutions-SQS3",
            "This queue is itself the webhook fan-out's stream failure destination (a DLQ); it has an alarm.",
        ),
        (
            stack.push.keys,
            "AwsSolutions-SMG4",
            "Webhook signing keys rotate with an overlap during which old and new keys both sign "
            "(python -m dovecote.push.keys rotate); a Secrets Manager rotation function would replace the "
            "value with no overlap, and receivers that cached the old key would refuse every notification.",
        ),
        (
            sender,
            f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/parts/*]",
            "A notification carries the task's message: large message parts are read by content digest.",
        ),
        (
            sender,
            f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/artifacts/*]",
            "A notification of a completion carries the artifact: payloads are read, only, by content digest.",
        ),
    ]


def _stream_front_acknowledgments(stack: DovecoteStack) -> list[tuple[Construct, str, str]]:
    """The streaming front's findings (infra/constructs/streams.py): a REST API that proxies every
    request to the streams function, which checks the bearer token itself."""
    front = stack.api.streams
    no_authorizer = (
        "The streams function checks the bearer token itself, with the authorizer's own code, before any "
        "byte (API Gateway's REST authorizers answer IAM policies, not the HTTP API's simple responses); "
        "a request without a token is 401, a refused one 403, another authority's task 404."
    )
    out: list[tuple[Construct, str, str]] = [
        (
            front.api,
            "AwsSolutions-APIG2",
            "A Lambda proxy: the function validates every request (the same gates as the HTTP API's routes); "
            "API Gateway's models cannot state an SSE request's rules.",
        ),
        (
            front.api.deployment_stage,
            "AwsSolutions-APIG6",
            "The stage's access log records every request (the HTTP API's fields); execution logging would "
            "need the account-wide API Gateway CloudWatch role, which this stack does not own.",
        ),
        (
            front.api.deployment_stage,
            "AwsSolutions-APIG3",
            "No WAF, as on the HTTP API: the stage's throttling (100 rps, burst 200) and the function's reserved "
            "concurrency bound what one client can take.",
        ),
    ]
    for method in front.methods:
        out.append((method, "AwsSolutions-APIG4", no_authorizer))
        out.append((method, "AwsSolutions-COG4", "Dovecote's tokens are its own bearer tokens, not Cognito's."))
    return out


def _recall_acknowledgments(stack: DovecoteStack, ref: Any) -> list[tuple[Construct, str, str]]:
    """The search domain's findings, and the recall roles' object prefixes and index paths."""
    domain = stack.search.domain
    out: list[tuple[Construct, str, str]] = [
        (
            domain,
            "AwsSolutions-OS1",
            "The recall functions run outside a VPC (no NAT or endpoints to pay for); every request is "
            "SigV4-signed and the domain's access policy admits only the two recall roles.",
        ),
        (
            domain,
            "AwsSolutions-OS3",
            "Access is granted by IAM identity, not by address: the callers are Lambda functions without "
            "fixed IPs, the access policy names the two recall roles, and unsigned requests are refused.",
        ),
        (
            domain,
            "AwsSolutions-OS4",
            "One or two data nodes hold three small indices; three dedicated master nodes would triple the "
            "floor cost of a cluster this size (worth it from about ten data nodes).",
        ),
    ]
    if not stack.search.zone_aware:
        out.append(
            (
                domain,
                "AwsSolutions-OS7",
                "Outside production the domain is one t3.small.search node (the index is rebuildable from S3); "
                "production runs two nodes in two zones with a replica of every shard.",
            )
        )
    bucket = ref(stack.data.bucket)
    prefixes = {
        "recall_api": ("transcripts/*", "topics/*", "uploads/transcripts/*"),
        "transcript_indexer": ("transcripts/*", "uploads/transcripts/*"),
    }
    why = {
        "transcripts/*": "Archived transcripts live under transcripts/<authority>/<format>/<session>; the key is "
        "derived per request.",
        "topics/*": "Topic labels live under topics/<authority>/<session>/<start uuid>.json; the key is derived "
        "per request.",
        "uploads/transcripts/*": "Presigned transcript uploads land under uploads/transcripts/<authority>/<upload "
        "id>, an expiring prefix; the key is derived per request.",
    }
    for name, keys in prefixes.items():
        role = stack.api.functions[name].role
        for key in keys:
            out.append((role, f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/{key}]", why[key]))
        out.append(
            (
                role,
                f"AwsSolutions-IAM5[Resource::<{ref(domain)}.Arn>/{stack.search.index_prefix}-*]",
                "The recall indices (-messages, -sessions, -topics) and their documents, whose ids the engine "
                "derives per request; nothing else on the domain.",
            )
        )
    return out


def _console_acknowledgments(stack: DovecoteStack, ref: Any) -> list[tuple[Construct, str, str]]:
    """The console's CloudFront distribution, and CDK's BucketDeployment function that copies its files."""
    distribution = stack.console.distribution
    out: list[tuple[Construct, str, str]] = [
        (
            distribution,
            "AwsSolutions-CFR1",
            "The console is static files for people anywhere the team works; it holds no data (every call "
            "goes to the API with the person's token), so there is nothing a country restriction would protect.",
        ),
        (
            distribution,
            "AwsSolutions-CFR2",
            "A web ACL costs at least $5 a month plus per request for static files that hold no data; the API "
            "behind them authorizes every call by bearer token and is throttled at its stage.",
        ),
        (
            distribution,
            "AwsSolutions-CFR3",
            "CloudFront standard logs need an ACL-enabled bucket, which this stack's access-log bucket refuses "
            "on purpose (bucket policy only); the files are public by design and every API call is logged.",
        ),
        (
            distribution,
            "AwsSolutions-CFR4",
            "The distribution uses CloudFront's default *.cloudfront.net certificate, whose viewer policy "
            "CloudFront fixes; with a custom domain and certificate, minimum_protocol_version TLSv1.2_2021 applies.",
        ),
    ]
    # CDK's BucketDeployment: a singleton function (its id is fixed by CDK) that copies the asset in.
    handler = next(c for c in stack.node.children if c.node.id.startswith("Custom::CDKBucketDeployment"))
    role = handler.node.find_child("ServiceRole")
    out.append(
        (
            role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "CDK's BucketDeployment function, run only at deploy time to copy the console's files; its "
            "logging policy is CDK's, not a function of ours.",
        )
    )
    why = (
        "CDK's BucketDeployment grants (read the CDK asset bucket, write and prune the console bucket's "
        "objects, invalidate the distribution): deploy time only, limited to those two buckets."
    )
    for finding in (
        "Action::s3:GetObject*",
        "Action::s3:GetBucket*",
        "Action::s3:List*",
        "Action::s3:DeleteObject*",
        "Action::s3:Abort*",
        "Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*",
        f"Resource::<{ref(stack.console.bucket)}.Arn>/*",
        "Resource::*",
    ):
        out.append((role, f"AwsSolutions-IAM5[{finding}]", why))
    return out


def _retention(days: int) -> logs.RetentionDays:
    allowed = {
        1: logs.RetentionDays.ONE_DAY,
        7: logs.RetentionDays.ONE_WEEK,
        14: logs.RetentionDays.TWO_WEEKS,
        30: logs.RetentionDays.ONE_MONTH,
        90: logs.RetentionDays.THREE_MONTHS,
        180: logs.RetentionDays.SIX_MONTHS,
        365: logs.RetentionDays.ONE_YEAR,
        731: logs.RetentionDays.TWO_YEARS,
        1827: logs.RetentionDays.FIVE_YEARS,
    }
    if days not in allowed:
        raise ValueError(f"log_retention_days must be one of {sorted(allowed)}, got {days}")
    return allowed[days]
