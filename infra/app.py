"""CDK entry point (`cdk synth` / `cdk deploy`, or `make synth`, which needs no AWS account).

Context (cdk.json or `-c key=value`):
- production (false): retain data on stack deletion and turn on table deletion protection;
- log_retention_days (30);
- authorizer_cache_seconds (300): how long API Gateway caches a token's principal (and so how
  long a revoked token may still pass);
- reserved_concurrency (true): reserve concurrency per function (infra/routes.py); false on an
  account whose concurrency limit is too small to reserve any (new accounts start at 10);
- xray_subsegments (false): Powertools Tracer subsegments inside each function (the handler and every
  AWS call). Lambda's active tracing records each invocation either way; the subsegments cost the
  X-Ray SDK's import on every cold start (bench/coldstart.py measures both);
- snapstart (false): Lambda SnapStart for the API functions and the authorizer: each deployment
  publishes a version (snapshotted after its initialization and a priming hook) and API Gateway
  invokes its `live` alias; restored environments re-seed `random` and rebuild their AWS clients
  (dovecote/platform/snapstart.py). Priced per GB-second cached and per GB restored (docs/benchmarks/notes.md);
- embedder (off) and embedding_dimension (512): `embedder=bedrock` turns on recall's semantic tier with
  Titan Text Embeddings V2 at 256, 512 or 1024 dimensions: the recall functions may invoke that one
  model in the stack's region, and an hourly run embeds the messages still pending
  (infra/constructs/search.py reads and checks both).
"""

from __future__ import annotations

import os

from aws_cdk import App, Environment, Validations
from cdk_nag import AwsSolutionsChecks

from infra.build import build_functions, build_layer
from infra.stack import DovecoteStack


def _bool(value: object) -> bool:
    return str(value).lower() in ("1", "true", "yes")


def build_app(outdir: str | None = None, context: dict[str, object] | None = None) -> tuple[App, DovecoteStack]:
    app = App(outdir=outdir, context=context) if outdir else App(context=context)
    ctx = app.node.try_get_context
    stack = DovecoteStack(
        app,
        "Dovecote",
        layer_dir=build_layer(quiet=True),
        functions_dir=build_functions(),
        production=_bool(ctx("production") or False),
        log_retention_days=int(ctx("log_retention_days") or 30),
        authorizer_cache_seconds=int(ctx("authorizer_cache_seconds") or 300),
        reserved_concurrency=_bool(ctx("reserved_concurrency") if ctx("reserved_concurrency") is not None else True),
        xray_subsegments=_bool(ctx("xray_subsegments") or False),
        snapstart=_bool(ctx("snapstart") or False),
        env=Environment(account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION")),
    )
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return app, stack


def main() -> None:
    app, _ = build_app(outdir=os.environ.get("CDK_OUTDIR") or "cdk.out")
    app.synth()


if __name__ == "__main__":
    main()
