"""The streaming front (docs/guides/streams.md#in-the-cloud): an API Gateway REST API whose
Lambda proxy integration streams (`responseTransferMode: STREAM`: up to 15 minutes a response),
in front of the streams function, which runs its WSGI app behind the Lambda Web Adapter in
response-stream mode (Lambda's Python runtime cannot stream by itself).

Why this front: an HTTP API buffers a function's answer; a function URL behind CloudFront's origin
access control asks every POST's client for an `x-amz-content-sha256` of its body, which no A2A
client sends. A REST API stage brings its own throttling and access log, like the HTTP API's.

No API Gateway authorizer: the function checks the bearer token itself, with the authorizer's own
code, before any byte (functions/streams_api/handler.py). The whole A2A interface lives here (its
JSON-RPC binding has one URL for every method, streaming or not), so the Agent Card names this
front; Dovecote's own routes stay on the HTTP API, its task streams are here too.
"""

from __future__ import annotations

from aws_cdk import Aws, Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

# The Lambda Web Adapter's own published layer (arm64), referenced by ARN as its documentation
# says; CDK context `lwa_layer_arn` names another (a newer version, or a copy in the account).
LWA_ACCOUNT = "753240598075"
LWA_LAYER = "LambdaAdapterLayerArm64:25"
STREAM_TIMEOUT = Duration.minutes(15)  # the REST API's bound on a streamed response


def lwa_layer_arn(scope: Construct) -> str:
    given = scope.node.try_get_context("lwa_layer_arn")
    return str(given) if given else f"arn:aws:lambda:{Aws.REGION}:{LWA_ACCOUNT}:layer:{LWA_LAYER}"


# The stage: the front's URL path. Named here, not read from the stage, so the function's
# DOVECOTE_PUBLIC_URL does not depend on the deployment that depends on the function.
STAGE = "streams"
# What the function runs with besides its settings: the adapter, its mode, the app's port.
LWA_ENVIRONMENT = {
    "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap",
    "AWS_LWA_INVOKE_MODE": "response_stream",
    "AWS_LWA_PORT": "8080",
    # Ready once the app answers at all (a 404 for `/` is an answer).
    "AWS_LWA_READINESS_CHECK_PATH": "/",
    # The REST API's request path may carry the stage (`/streams/v1/tasks/…`): the app's routes do not.
    "AWS_LWA_REMOVE_BASE_PATH": f"/{STAGE}",
}
STREAM_HANDLER = "functions/streams_api/run.sh"


class StreamFront(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        function: lambda_.IFunction,
        access_logs: logs.ILogGroup,
    ) -> None:
        super().__init__(scope, id)
        self.api = apigw.RestApi(
            self,
            "StreamApi",
            rest_api_name="dovecote-streams",
            description="Dovecote task streams and the A2A interface (server-sent events)",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            cloud_watch_role=False,
            deploy_options=apigw.StageOptions(
                stage_name=STAGE,
                throttling_burst_limit=200,
                throttling_rate_limit=100,
                tracing_enabled=True,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.custom(
                    '{"requestId":"$context.requestId","ip":"$context.identity.sourceIp",'
                    '"method":"$context.httpMethod","path":"$context.path","status":"$context.status",'
                    '"latency":"$context.responseLatency","error":"$context.error.message"}'
                ),
            ),
        )
        integration = apigw.LambdaIntegration(
            function,
            proxy=True,
            response_transfer_mode=apigw.ResponseTransferMode.STREAM,
            timeout=STREAM_TIMEOUT,
        )
        self.api.root.add_method("ANY", integration)
        self.methods = [self.api.root.node.find_child("ANY")]
        proxy = self.api.root.add_proxy(default_integration=integration, any_method=True)
        self.methods.append(proxy.node.find_child("ANY"))

    @property
    def url(self) -> str:
        """The front's base URL, no trailing slash (the stage's path included)."""
        return f"https://{self.api.rest_api_id}.execute-api.{Aws.REGION}.{Aws.URL_SUFFIX}/{STAGE}"
