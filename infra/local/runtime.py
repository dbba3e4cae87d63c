"""The local runtime behind `dovecote dev`: moto in-process (a threaded moto server, so presigned
S3 URLs work over real HTTP), the resources bootstrapped, dev tokens minted, and the API Gateway
emulator serving the route table."""

from __future__ import annotations

import json
import os
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

DEV_AUTHORITY = "dev"
DEV_WORKER = "dev-worker"
DEV_TOKEN_DAYS = 365


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:  # one line per request is noise here
        pass


@dataclass
class LocalRuntime:
    host: str = "127.0.0.1"
    port: int = 8787
    tokens_file: Path = field(default_factory=lambda: Path(".dovecote/dev-tokens.json"))
    endpoint: str = ""
    tokens: dict[str, str] = field(default_factory=dict)
    _moto: Any = None
    _server: BaseWSGIServer | None = None
    _thread: threading.Thread | None = None
    _janitor: Any = None
    _indexer: Any = None

    def start(self) -> LocalRuntime:
        import logging

        from moto.server import ThreadedMotoServer

        from infra.local.moto_patches import serialize_dynamodb

        serialize_dynamodb()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's per-request lines

        self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._moto.start()
        moto_host, moto_port = self._moto.get_host_and_port()
        # The handlers read their settings from the environment, exactly as in Lambda.
        os.environ.update(
            {
                "AWS_ENDPOINT_URL": f"http://{moto_host}:{moto_port}",
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_REGION": "us-east-1",
                "POWERTOOLS_SERVICE_NAME": "dovecote",
                "POWERTOOLS_METRICS_NAMESPACE": "Dovecote",
                "POWERTOOLS_TRACE_DISABLED": "true",
                "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING"),
                # Recall's embedded index lives in this process, shared by the API and the indexer.
                "DOVECOTE_RECALL_SQLITE_PATH": os.environ.get("DOVECOTE_RECALL_SQLITE_PATH") or ":memory:",
            }
        )
        from dovecote.platform import aws
        from dovecote.platform.settings import get_settings

        aws.reset_clients()
        get_settings.cache_clear()
        from infra.local.resources import DEFAULT_NAMES, create_all

        os.environ.update(
            create_all(
                dynamodb=aws.client("dynamodb"),
                s3=aws.client("s3"),
                secretsmanager=aws.client("secretsmanager"),
                names=DEFAULT_NAMES,
                sqs=aws.client("sqs"),
            )
        )
        get_settings.cache_clear()
        self._mint_tokens()
        if get_settings().opensearch_url:
            # DOVECOTE_OPENSEARCH_URL: recall uses that OpenSearch instead of SQLite FTS5. A node that
            # does not answer fails the start here, not the first search.
            from dovecote.recall.engines import open_search_index

            engine: Any = open_search_index(get_settings())
            engine.ensure_indices()

        from infra.local.streams import StreamPoller, streams_client
        from infra.routes import JANITOR, JANITOR_BATCH_SIZE

        self._janitor = StreamPoller(
            dynamodb=aws.client("dynamodb"),
            streams=streams_client(),
            table=get_settings().notes_table,
            function=JANITOR,
            batch_size=JANITOR_BATCH_SIZE,
        ).start()

        from infra.routes import TRANSCRIPT_INDEXER, TRANSCRIPT_INDEXER_BATCH_SIZE

        queue = aws.client("sqs").get_queue_url(QueueName=DEFAULT_NAMES["transcripts_queue"])["QueueUrl"]
        self._indexer = QueuePoller(
            sqs=aws.client("sqs"),
            queue_url=queue,
            function=TRANSCRIPT_INDEXER,
            batch_size=TRANSCRIPT_INDEXER_BATCH_SIZE,
        ).start()

        from infra.local.gateway import Gateway

        self._server = make_server(self.host, self.port, Gateway(), threaded=True, request_handler=_QuietHandler)
        self.port = self._server.server_port
        self.endpoint = f"http://{self.host}:{self.port}"
        self._write_tokens_file()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def _mint_tokens(self) -> None:
        from dovecote.admin.dynamo import DynamoTokenStore
        from dovecote.admin.service import TokenService
        from dovecote.platform import aws
        from dovecote.platform.settings import get_settings

        tokens = TokenService(DynamoTokenStore(table=get_settings().tokens_table, dynamodb=aws.client("dynamodb")))
        for role, worker in (("admin", ""), ("caller", ""), ("worker", DEV_WORKER)):
            # Local tokens outlive any dev session; deployed ones get the settings' defaults.
            token, _ = tokens.mint(None, DEV_AUTHORITY, role, worker, expires_in_days=DEV_TOKEN_DAYS)
            self.tokens[role] = token

    def _write_tokens_file(self) -> None:
        self.tokens_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.tokens_file.with_suffix(f".{secrets.token_hex(4)}.tmp")
        tmp.write_text(json.dumps({"endpoint": self.endpoint, "tokens": self.tokens}, indent=2) + "\n")
        tmp.chmod(0o600)
        tmp.replace(self.tokens_file)

    def stop(self) -> None:
        if self._janitor is not None:
            self._janitor.stop()
        if self._indexer is not None:
            self._indexer.stop()
        if self._server is not None:
            self._server.shutdown()
        if self._moto is not None:
            self._moto.stop()


def ensure_cursor_key_env() -> None:
    """Outside `dovecote dev` a generated dev key stands in for the Secrets Manager secret."""
    os.environ.setdefault("DOVECOTE_CURSOR_KEY", secrets.token_urlsafe(48))


class QueuePoller:
    """A minimal SQS event-source emulator for the transcript indexer: long-polls the queue, invokes
    the handler with Lambda's SQS event shape, deletes what succeeded and leaves each record named in
    `batchItemFailures` to come back after its visibility timeout (gives up after `max_receives`)."""

    def __init__(self, *, sqs: Any, queue_url: str, function: Any, batch_size: int = 1, max_receives: int = 3) -> None:
        self._sqs = sqs
        self._url = queue_url
        self._function = function
        self._batch = batch_size
        self._max_receives = max_receives
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    def start(self) -> QueuePoller:
        self._thread = threading.Thread(target=self._run, name=f"sqs-{self._function.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        import importlib
        import logging

        from infra.local.gateway import _context

        module, attr = self._function.handler.rsplit(".", 1)
        handler = getattr(importlib.import_module(module), attr)
        while not self._stop.is_set():
            try:
                messages = self._sqs.receive_message(
                    QueueUrl=self._url,
                    MaxNumberOfMessages=self._batch,
                    WaitTimeSeconds=1,
                    AttributeNames=["All"],
                ).get("Messages", [])
            except Exception:  # noqa: BLE001 - the emulator outlives a transient moto error
                logging.getLogger(__name__).exception("receive failed")
                self._stop.wait(0.5)
                continue
            if not messages:
                continue
            event = {"Records": [self._record(m) for m in messages]}
            try:
                result = handler(event, _context(self._function))
                failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
            except Exception:  # noqa: BLE001 - like Lambda: an error fails the whole batch
                logging.getLogger(__name__).exception("handler failed")
                failed = {m["MessageId"] for m in messages}
            for message in messages:
                receives = int((message.get("Attributes") or {}).get("ApproximateReceiveCount", "1"))
                if message["MessageId"] not in failed or receives >= self._max_receives:
                    self._sqs.delete_message(QueueUrl=self._url, ReceiptHandle=message["ReceiptHandle"])

    def _record(self, message: dict[str, Any]) -> dict[str, Any]:
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": message.get("Attributes") or {},
            "messageAttributes": {},
            "md5OfBody": message.get("MD5OfBody", ""),
            "eventSource": "aws:sqs",
            "eventSourceARN": self._arn,
            "awsRegion": os.environ.get("AWS_REGION", "us-east-1"),
        }
