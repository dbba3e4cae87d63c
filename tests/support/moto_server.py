"""A real moto server on a free local port, in a thread, and boto3 clients that talk to it (the dev
runtime's credentials: moto accepts any)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from werkzeug.serving import make_server


def moto_client(name: str, endpoint: str, **options: Any) -> Any:
    """A boto3 client for service `name` at `endpoint`; options as boto3.client takes them."""
    return boto3.client(
        name,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        **options,
    )


@contextmanager
def serving(app: Any, **options: Any) -> Iterator[str]:
    """Serves the WSGI `app` until the block ends; yields its endpoint. Options as werkzeug's
    make_server takes them (a request_handler)."""
    server = make_server("127.0.0.1", 0, app, threaded=True, **options)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
