"""What the bench modules share: the local resources on moto set up one way, latency figures computed
one way, and the `python -m bench.X [--quick]` entry that writes bench/results/X.json."""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
CURSOR_KEY = b"bench-key-0123456789abcdefghijkl"

MOTO_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def use_moto_credentials() -> None:
    """Fake credentials and no endpoint, so every client this process builds talks to moto in process."""
    os.environ.update(MOTO_CREDENTIALS)
    os.environ.pop("AWS_ENDPOINT_URL", None)


@dataclass(frozen=True)
class MotoResources:
    ddb: Any
    s3: Any
    sqs: Any | None
    env: dict[str, str]  # the settings the resources imply (queue URLs, …)


@contextmanager
def moto_resources(*, sqs: bool = False) -> Iterator[MotoResources]:
    """Every table and the bucket (with `sqs`, the queues too) on moto, with fresh shared clients."""
    from moto import mock_aws

    from dovecote.platform import aws
    from infra.local.resources import DEFAULT_NAMES, create_all

    use_moto_credentials()
    with mock_aws():
        aws.reset_clients()
        ddb, s3 = aws.client("dynamodb"), aws.client("s3")
        queues = aws.client("sqs") if sqs else None
        env = create_all(dynamodb=ddb, s3=s3, secretsmanager=None, names=DEFAULT_NAMES, sqs=queues)
        yield MotoResources(ddb, s3, queues, env)
        aws.reset_clients()


def task_body(task_id: str, tag: str, context: str, text: str = "x") -> dict[str, Any]:
    """A `POST /v1/tasks` body as the benches create their tasks: workspace `w`, one text part; the
    command and message ids made from `tag`."""
    return {
        "command_id": f"c-{tag}",
        "workspace": "w",
        "id": task_id,
        "context": context,
        "message": {"id": f"m-{tag}", "parts": [{"media_type": "text/plain", "text": text}]},
    }


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def latency_ms(values: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(values) * 1000, "p95_ms": percentile(values, 95) * 1000}


def throughput(latencies: list[float], wall: float) -> dict[str, float]:
    """n, median and p95 latency, and requests per second over `wall` seconds."""
    return {"n": len(latencies), **latency_ms(latencies), "per_s": len(latencies) / wall}


def write_results(name: str, report: Any) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


def run_alone(prog: str, report: Callable[[bool], Any], show: Callable[[Any], None], name: str) -> None:
    """`python -m bench.X [--quick]`: measure, print, and write bench/results/<name>."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--quick", action="store_true", help="fewer samples (CI smoke run)")
    figures = report(parser.parse_args().quick)
    show(figures)
    write_results(name, figures)
