"""The web console's part of the stack: S3 behind CloudFront with origin access control, the
security headers from infra/console.py, the config naming the API, CORS without credentials."""

from __future__ import annotations

import json
import os
from typing import Any

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from infra.console import content_security_policy  # noqa: E402


def of(raw: dict[str, Any], kind: str, prefix: str = "") -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in raw["Resources"].items() if v["Type"] == kind and k.startswith(prefix)}


def one(raw: dict[str, Any], kind: str, prefix: str = "") -> tuple[str, dict[str, Any]]:
    found = of(raw, kind, prefix)
    assert len(found) == 1, (kind, sorted(found))
    return next(iter(found.items()))


def test_the_console_bucket_is_private_and_read_only_by_its_distribution(default_synth: dict[str, Any]) -> None:
    raw = default_synth["raw"]
    bucket_id, bucket = one(raw, "AWS::S3::Bucket", "ConsoleAssets")
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert "WebsiteConfiguration" not in bucket and bucket["LoggingConfiguration"]["LogFilePrefix"] == "console/"
    _, policy = one(raw, "AWS::S3::BucketPolicy", "ConsoleAssets")
    statements = policy["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
    )
    allowed = [s for s in statements if s["Effect"] == "Allow"]
    assert len(allowed) == 1
    assert allowed[0]["Principal"] == {"Service": "cloudfront.amazonaws.com"} and allowed[0]["Action"] == "s3:GetObject"
    distribution_id, _ = one(raw, "AWS::CloudFront::Distribution")
    assert {"Ref": distribution_id} in allowed[0]["Condition"]["StringEquals"]["AWS:SourceArn"]["Fn::Join"][1]


def test_cloudfront_reads_it_through_origin_access_control_over_https(default_synth: dict[str, Any]) -> None:
    raw = default_synth["raw"]
    oac_id, oac = one(raw, "AWS::CloudFront::OriginAccessControl")
    assert oac["OriginAccessControlConfig"]["SigningBehavior"] == "always"
    assert oac["OriginAccessControlConfig"]["OriginAccessControlOriginType"] == "s3"
    _, distribution = one(raw, "AWS::CloudFront::Distribution")
    config = distribution["DistributionConfig"]
    (origin,) = config["Origins"]
    assert origin["OriginAccessControlId"] == {"Fn::GetAtt": [oac_id, "Id"]}
    assert origin["S3OriginConfig"] == {"OriginAccessIdentity": ""}  # no legacy OAI
    behavior = config["DefaultCacheBehavior"]
    assert behavior["ViewerProtocolPolicy"] == "redirect-to-https" and behavior["AllowedMethods"] == ["GET", "HEAD"]
    assert config["DefaultRootObject"] == "index.html"
    headers_id, _ = one(raw, "AWS::CloudFront::ResponseHeadersPolicy")
    assert behavior["ResponseHeadersPolicyId"] == {"Ref": headers_id}


def test_every_file_carries_the_consoles_security_headers(default_synth: dict[str, Any]) -> None:
    raw = default_synth["raw"]
    _, policy = one(raw, "AWS::CloudFront::ResponseHeadersPolicy")
    security = policy["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
    csp = security["ContentSecurityPolicy"]
    assert csp["Override"] is True
    # The CSP is infra/console.py's, with this stack's API endpoint as its one other origin.
    parts = csp["ContentSecurityPolicy"]["Fn::Join"][1]
    api_id, _ = one(raw, "AWS::ApiGatewayV2::Api")
    assert {"Fn::GetAtt": [api_id, "ApiEndpoint"]} in parts
    text = "".join(p if isinstance(p, str) else "API" for p in parts)
    assert text == content_security_policy("API")
    assert "unsafe-inline" not in text and "unsafe-eval" not in text
    assert "frame-ancestors 'none'" in text and "script-src 'self';" in text
    assert security["FrameOptions"] == {"FrameOption": "DENY", "Override": True}
    assert security["ContentTypeOptions"] == {"Override": True}
    assert security["ReferrerPolicy"]["ReferrerPolicy"] == "no-referrer"
    assert security["StrictTransportSecurity"]["AccessControlMaxAgeSec"] == 365 * 86400


def test_the_deployed_config_names_the_api_and_cors_sends_no_credentials(default_synth: dict[str, Any]) -> None:
    raw = default_synth["raw"]
    api_id, api = one(raw, "AWS::ApiGatewayV2::Api")
    _, files = one(raw, "Custom::CDKBucketDeployment", "ConsoleFiles")
    markers = json.dumps(files["SourceMarkers"])
    assert json.dumps({"Fn::GetAtt": [api_id, "ApiEndpoint"]}) in markers  # config.json: {"api": <endpoint>}
    assert files["DistributionPaths"] == ["/index.html", "/config.json"]
    assert files["SystemMetadata"] == {"cache-control": "no-cache"}
    cors = api["CorsConfiguration"]
    assert cors["AllowCredentials"] is False
    assert set(cors["AllowHeaders"]) == {"authorization", "content-type", "last-event-id"}
    assert "ConsoleUrl" in raw["Outputs"]


def test_the_deploy_time_copier_is_the_only_function_outside_the_route_table(default_synth: dict[str, Any]) -> None:
    raw = default_synth["raw"]
    copiers = of(raw, "AWS::Lambda::Function", "CustomCDKBucketDeployment")
    assert len(copiers) == 1
    (copier_id,) = copiers
    metadata = raw["Resources"][copier_id]["Metadata"]
    assert metadata["cfn-lint"] == {"config": {"ignore_checks": ["WS1000"]}}
