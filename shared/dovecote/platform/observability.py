"""Powertools Logger and Metrics, one set per function (POWERTOOLS_SERVICE_NAME).

The Tracer is not created here: importing it loads the X-Ray SDK and botocore (about 2× an
`import boto3`), so `platform.http.lambda_entry` builds it on the first invocation instead.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics

logger = Logger()
metrics = Metrics(namespace="Dovecote")

# A request that records no business metric is normal; the cold-start metric still flushes.
import warnings  # noqa: E402

warnings.filterwarnings("ignore", message="No application metrics to publish")
