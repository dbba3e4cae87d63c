"""The streams app (functions/streams_api/handler.py) in the standard library's WSGI server, for
the Lambda Web Adapter: an execution environment serves one request at a time, so one thread does,
and wsgiref writes (and flushes) each chunk of a stream as the app yields it."""

from __future__ import annotations

import os
from wsgiref.simple_server import WSGIRequestHandler, make_server

from functions.streams_api.handler import app


class _Handler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass  # API Gateway's access log records each request; no second line per request here


def main() -> None:
    port = int(os.environ.get("AWS_LWA_PORT", "8080"))
    with make_server("127.0.0.1", port, app, handler_class=_Handler) as server:
        server.serve_forever()


if __name__ == "__main__":
    main()
