"""Powertools Logger and Metrics, one set per function (POWERTOOLS_SERVICE_NAME).

The Tracer is not created here: importing it loads the X-Ray SDK and botocore (about 2× an
`import boto3`), so `platform.http.lambda_entry` builds it on the first invocation instead.
"""

from __future__ import annotations

import json
import re
from typing import Any

from aws_lambda_powertools import Logger, Metrics

# JSON escapes C0 controls, but with ensure_ascii=False (Powertools' default) it leaves C1 controls
# (U+0080-U+009F: U+009B is a terminal's CSI) and the line separators U+2028/U+2029 raw. Escape those
# too, and only those, so a log line stays one inert line and non-ASCII text stays readable.
_RAW_IN_JSON = re.compile("[\u0080-\u009f\u2028\u2029]")


def _log_json(record: Any) -> str:
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


logger = Logger(json_serializer=_log_json)
metrics = Metrics(namespace="Dovecote")

# A request that records no business metric is normal; the cold-start metric still flushes.
import warnings  # noqa: E402

warnings.filterwarnings("ignore", message="No application metrics to publish")
