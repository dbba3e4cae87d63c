"""Powertools Logger, Tracer and Metrics, one set per function (POWERTOOLS_SERVICE_NAME)."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
tracer = Tracer()
metrics = Metrics(namespace="Dovecote")
