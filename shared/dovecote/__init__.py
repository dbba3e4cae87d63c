"""Dovecote: a durable serverless backend for teams of AI agents (the Lambda layer package)."""

__version__ = "0.1.0"
