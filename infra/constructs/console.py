"""The web console in the cloud: its built files (console/dist, from `make install`) in a private S3
bucket that only CloudFront reads, through origin access control; CloudFront sends every file with
the console's security headers (infra/console.py: the CSP names the API as the one origin it may
call); a config.json written at deploy time names the API's endpoint; the HTTP API answers CORS for
any origin, with the bearer token in the Authorization header and no credentials mode.

Why CORS for any origin and not the distribution's alone: the CSP names this API's exact origin,
so the distribution depends on the API; naming the distribution in the API's CORS would close a
dependency cycle CloudFormation cannot deploy. And CORS guards ambient credentials (cookies), which
this API never reads: a request is authorized only by the bearer token it carries, so a page of
another origin gets nothing it could not get with curl and the same token. The tighter side is the
one that protects the person: the console's CSP lets it talk to this API and to no other origin.
Context `console_cors_origin` narrows CORS to one origin (a custom domain that is not a token)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnOutput, CfnResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as deployment
from constructs import Construct

from infra.console import content_security_policy

DIST = Path(__file__).resolve().parents[2] / "console" / "dist"
NOT_BUILT = (
    "console/dist is missing: the web console is built by `make install`, which needs Node.js and npm "
    "(Debian: apt-get install nodejs npm)"
)


class Console(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        http_api: apigw.HttpApi,
        access_logs: s3.IBucket,
        production: bool,
        dist: Path = DIST,
    ) -> None:
        super().__init__(scope, id)
        if not (dist / "index.html").is_file():
            raise RuntimeError(NOT_BUILT)
        self.bucket = s3.Bucket(
            self,
            "Assets",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix="console/",
            removal_policy=RemovalPolicy.RETAIN if production else RemovalPolicy.DESTROY,
            auto_delete_objects=False,
        )
        origin = http_api.api_endpoint  # https://ID.execute-api.REGION.amazonaws.com: an origin, no path
        self.headers = cloudfront.ResponseHeadersPolicy(
            self,
            "SecurityHeaders",
            comment="Dovecote console: CSP (scripts from the console only, the API the one other origin), no framing",
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
                    content_security_policy=content_security_policy(origin), override=True
                ),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
                frame_options=cloudfront.ResponseHeadersFrameOptions(
                    frame_option=cloudfront.HeadersFrameOption.DENY, override=True
                ),
                referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(
                    referrer_policy=cloudfront.HeadersReferrerPolicy.NO_REFERRER, override=True
                ),
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=Duration.days(365), include_subdomains=True, override=True
                ),
            ),
            custom_headers_behavior=cloudfront.ResponseCustomHeadersBehavior(
                custom_headers=[
                    cloudfront.ResponseCustomHeader(
                        header="Cross-Origin-Opener-Policy", value="same-origin", override=True
                    ),
                    cloudfront.ResponseCustomHeader(
                        header="Permissions-Policy",
                        value="camera=(), microphone=(), geolocation=(), payment=(), usb=()",
                        override=True,
                    ),
                ]
            ),
        )
        self.distribution = cloudfront.Distribution(
            self,
            "Distribution",
            comment="Dovecote console",
            default_root_object="index.html",
            price_class=cloudfront.PriceClass.PRICE_CLASS_100,
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            minimum_protocol_version=cloudfront.SecurityPolicyProtocol.TLS_V1_2_2021,
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=self.headers,
                compress=True,
            ),
        )
        self.url = f"https://{self.distribution.distribution_domain_name}"
        # The page, its hashed script and stylesheet, and the config naming this stack's API. Every
        # file is revalidated (no-cache): the hashed ones never change, so it costs a 304.
        self.deployment = deployment.BucketDeployment(
            self,
            "Files",
            sources=[
                deployment.Source.asset(str(dist), exclude=["config.json"]),
                deployment.Source.json_data("config.json", {"api": origin}),
            ],
            destination_bucket=self.bucket,
            distribution=self.distribution,
            distribution_paths=["/index.html", "/config.json"],
            cache_control=[deployment.CacheControl.no_cache()],
            memory_limit=256,
        )
        # CDK's deploy-time copier is not traced (it runs once per deployment, outside any request).
        copier = next(c for c in Stack.of(self).node.children if c.node.id.startswith("Custom::CDKBucketDeployment"))
        function: CfnResource = copier.node.default_child  # type: ignore[assignment]
        function.add_metadata("cfn-lint", {"config": {"ignore_checks": ["WS1000"]}})
        # The console calls the API from the distribution's origin, with the headers it sends (the
        # bearer token, JSON bodies, an SSE resume) and no credentials (see the module's docstring).
        cors_origin = str(self.node.try_get_context("console_cors_origin") or "*")
        cfn_api: apigw.CfnApi = http_api.node.default_child  # type: ignore[assignment]
        cfn_api.cors_configuration = apigw.CfnApi.CorsProperty(
            allow_origins=[cors_origin],
            allow_methods=["GET", "POST", "PUT", "DELETE"],
            allow_headers=["authorization", "content-type", "last-event-id"],
            allow_credentials=False,
            max_age=3600,
        )
        CfnOutput(scope, "ConsoleUrl", value=self.url)
