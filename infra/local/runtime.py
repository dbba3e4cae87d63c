"""The local runtime behind `dovecote dev`: moto in-process (a threaded moto server, so presigned
S3 URLs work over real HTTP), the resources bootstrapped, dev tokens minted, and the API Gateway
emulator serving the route table, with the event sources: the notes table's stream (janitor) and
the memory write queue (memory worker).

With `data_dir` (`dovecote dev --data DIR`) moto's state is a snapshot plus a journal of every
acknowledged mutating AWS request (infra/local/persistence.py, journal.py, snapshot.py), the recall index is
`DIR/recall.sqlite`, and the settings and dev tokens minted at the first start are kept in DIR, so
a restart serves the same data to the same tokens."""

from __future__ import annotations

import errno
import functools
import json
import os
import secrets
import shutil
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from infra.event_sources import schedule_of
from infra.local.snapshot import SnapshotOfAnotherMoto
from infra.routes import DISPATCHER, Function

DEV_AUTHORITY = "dev"
DEV_WORKER = "dev-worker"
DEV_TOKEN_DAYS = 365  # the caller and worker tokens: they outlive any dev session
# The admin token mints and revokes every token of the authority: a week, renewed at a start that
# finds less than a day left (with --data the tokens are kept across restarts).
DEV_ADMIN_TOKEN_DAYS = 7
ADMIN_RENEWAL_HOURS = 24
# moto's credentials; its local S3 verifies signatures against them (infra/local/s3_auth.py).
AWS_ACCESS_KEY = "testing"
AWS_SECRET_KEY = "testing"  # noqa: S105 - moto's well-known stand-in, not a secret
AWS_REGION = "us-east-1"
# Files the runtime creates (data, tokens, the recall index) are its user's only.
PRIVATE_UMASK = 0o077
# Inside `--data DIR`.
RECALL_FILE = "recall.sqlite"
ENV_FILE = "env.json"
TOKENS_FILE = "dev-tokens.json"
CONSOLE_LINK_FILE = "console-link"  # beside the tokens file, readable by its owner only
# An event source woken by writes still polls this often (a write that reached moto another way).
IDLE_POLL_S = 5.0
# The lease dispatcher runs at least this often, whatever its gate says (see `start`).
DISPATCH_ANYWAY_S = 600.0


class UnsafeOptions(ValueError):
    """Options that together would expose what they must not (checked before anything starts)."""


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass  # the gateway logs one richer line per request (method, path, status, code, ms)


def _trim_consumed(table: str, poller: Any) -> None:
    from infra.local.streams import trim_consumed

    trim_consumed(table, dict(poller.checkpoint))


def _run_all(calls: list[Any]) -> None:
    for call in calls:
        call()


def _local_every(function: Function) -> float:
    every = schedule_of(function).local_every_s
    return 0.0 if every is None else every


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
    # Seconds between dispatcher runs (EventBridge runs it every minute in the cloud;
    # infra/event_sources.py). 0: no dispatcher.
    dispatch_interval: float = field(default_factory=lambda: _local_every(DISPATCHER))
    # The event sources started (infra/event_sources.py's rows), in start order.
    sources: list[Any] = field(default_factory=list)
    # `--faults`: honour X-Dovecote-Fault (infra/local/gateway.py) to test retries that replay.
    faults: bool = False
    # `--a2a-unauthenticated`: A2A requests without a token run as the dev caller (local only).
    a2a_unauthenticated: bool = False
    # `--allow-loopback-webhooks`: webhooks may be plain http to loopback receivers (local only).
    allow_loopback_webhooks: bool = False
    # `--data DIR`: keep state across restarts there; `fresh` wipes DIR first.
    data_dir: Path | None = None
    fresh: bool = False
    _store: Any = None
    _moto_thread: threading.Thread | None = None
    _dir_fd: int = -1
    _umask: int | None = None
    _environ: dict[str, str] | None = None
    _wakeups: Any = None
    _control_secret: str = ""
    # `--verbose`: a one-line summary of the functions' metrics a minute on the dev log.
    verbose: bool = False
    _metrics_log: Any = None

    def start(self) -> LocalRuntime:
        import logging

        if self.a2a_unauthenticated:
            from infra.local.gateway import is_loopback

            if not is_loopback(self.host):
                # Before anything is written or bound: the mode serves whoever reaches the port.
                raise UnsafeOptions(
                    f"--a2a-unauthenticated serves A2A without a token to whoever reaches the port: "
                    f"bind a loopback --host (127.0.0.1, localhost, ::1), not {self.host}"
                )

        # Before anything is written: the snapshot, journal, recall index and tokens are created
        # 0600 in 0700 directories (SQLite gives its -wal and -shm the database's mode).
        self._umask = os.umask(PRIVATE_UMASK)
        self._environ = dict(os.environ)  # given back at stop: the start points the process at its moto
        created = self.data_dir is not None and not self.data_dir.exists()
        if self.data_dir is not None:
            self._lock_data_dir()  # first: a second runtime on the same DIR is told so, whatever its port
        try:
            _check_port(self.host, self.port)
        except PortInUse:
            if self.data_dir is not None:
                os.close(self._dir_fd)
                if created and not any(self.data_dir.iterdir()):
                    self.data_dir.rmdir()  # leave no empty DIR behind a start that never ran
            os.umask(self._umask)
            raise

        from infra.local.moto_patches import serialize_dynamodb, serialize_sqs

        serialize_dynamodb()
        serialize_sqs()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's per-request lines

        from moto.moto_server.werkzeug_app import MotoRequestHandler

        from infra.local.journal import JournalingApp
        from infra.local.moto_patches import dispatcher_app
        from infra.local.s3_auth import S3Auth
        from infra.local.wakeups import Wakeups

        # moto's own server app behind the journal (a pass-through until a journal is opened), behind
        # the event sources' wake-ups, behind S3's own checks of signatures, expiry and checksums (a
        # refused request is never journaled and wakes nothing).
        moto_app = JournalingApp(dispatcher_app())
        self._wakeups = Wakeups(moto_app)
        served = S3Auth(self._wakeups, access_key=AWS_ACCESS_KEY, secret_key=AWS_SECRET_KEY, region=AWS_REGION)
        self._moto = make_server("127.0.0.1", 0, served, threaded=True, request_handler=MotoRequestHandler)
        self._moto_thread = threading.Thread(target=self._moto.serve_forever, daemon=True)
        self._moto_thread.start()
        moto_host, moto_port = self._moto.server_address[:2]
        moto_endpoint = f"http://{moto_host}:{moto_port}"
        if self.data_dir is not None:
            if self.fresh:
                _empty(self.data_dir)
            recall_path = str(self.data_dir / RECALL_FILE)
        else:
            recall_path = os.environ.get("DOVECOTE_RECALL_SQLITE_PATH") or ":memory:"
        # The handlers read their settings from the environment, exactly as in Lambda.
        os.environ.update(
            {
                "AWS_ENDPOINT_URL": moto_endpoint,
                "AWS_ACCESS_KEY_ID": AWS_ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": AWS_SECRET_KEY,
                "AWS_DEFAULT_REGION": AWS_REGION,
                "AWS_REGION": AWS_REGION,
                "POWERTOOLS_SERVICE_NAME": "dovecote",
                "POWERTOOLS_METRICS_NAMESPACE": "Dovecote",
                "POWERTOOLS_TRACE_DISABLED": "true",
                # CloudWatch reads metrics from Lambda's stdout; here they would only be noise on the
                # terminal: counted instead (--verbose logs a summary a minute; infra/local/metrics.py).
                # POWERTOOLS_METRICS_DISABLED=false in the environment prints them as in Lambda.
                "POWERTOOLS_METRICS_DISABLED": os.environ.get("POWERTOOLS_METRICS_DISABLED", "true"),
                "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING"),
                # Recall's embedded index lives in this process, shared by the API and the indexer.
                "DOVECOTE_RECALL_SQLITE_PATH": recall_path,
                # The webhook signing keys: a file only its owner reads, in DIR (dovecote/push/keys.py).
                "DOVECOTE_WEBHOOK_KEY_FILE": str(self._key_file()),
                # A dev loop wants a failed webhook tried again soon (the cloud's first wait: 5 s).
                "DOVECOTE_WEBHOOK_RETRY_BASE_SECONDS": os.environ.get("DOVECOTE_WEBHOOK_RETRY_BASE_SECONDS", "1"),
            }
        )
        if self.allow_loopback_webhooks:
            os.environ["DOVECOTE_ALLOW_LOOPBACK_WEBHOOKS"] = "true"
        else:
            os.environ.pop("DOVECOTE_ALLOW_LOOPBACK_WEBHOOKS", None)
        from dovecote.platform import aws
        from dovecote.platform.settings import get_settings
        from infra.local.metrics import SummaryLog, capture_metrics

        summary = capture_metrics()  # the functions' metrics are counted, not printed (infra/local/metrics.py)
        if self.verbose:
            self._metrics_log = SummaryLog(summary).start()
        aws.reset_clients()
        get_settings.cache_clear()
        if self.data_dir is None:
            self._bootstrap()
        else:
            from infra.local.persistence import DataDir

            self._store = DataDir(self.data_dir, moto_app, lock_fd=self._dir_fd)
            restoring = self._store.initialized
            if restoring:
                self._restore(moto_endpoint)
            else:
                self._first_start(moto_endpoint)
            self._store.open_journal()
            if restoring:
                self._align_streams()
                self._reshard_claimable()
        get_settings.cache_clear()
        self._publish_webhook_keys()
        if get_settings().opensearch_url:
            # DOVECOTE_OPENSEARCH_URL: recall uses that OpenSearch instead of SQLite FTS5. A node that
            # does not answer fails the start here, not the first search.
            from dovecote.recall.engines import open_search_index

            engine: Any = open_search_index(get_settings())
            engine.ensure_indices()

        # The API serves first; the event sources and the schedule start behind it. Nothing is lost
        # meanwhile: the stream pollers start from TRIM_HORIZON, queues keep their messages, and
        # each poller polls once as it starts. (Their handlers' imports are half a second of a start.)
        from infra.local.control import LocalControl, mint_any_authority
        from infra.local.gateway import Gateway
        from infra.local.isolation import isolate_powertools_requests

        isolate_powertools_requests()  # requests run in threads here, one per container in Lambda
        gateway = Gateway(
            faults=self.faults, a2a_caller_token=self.tokens["caller"] if self.a2a_unauthenticated else ""
        )
        # `dovecote dev token`: a local-only route in front of the gateway (infra/local/control.py); its
        # secret is new at each start and reaches the CLI through the tokens file only.
        self._control_secret = secrets.token_urlsafe(32)
        control = LocalControl(
            gateway,
            secret=self._control_secret,
            mint=mint_any_authority(DEV_TOKEN_DAYS, admin_days=DEV_ADMIN_TOKEN_DAYS),
        )
        from infra.local.console import ConsoleAssets

        served_api = ConsoleAssets(control)  # the web console at /console/ (infra/local/console.py)
        self._server = make_server(self.host, self.port, served_api, threaded=True, request_handler=_QuietHandler)
        self.port = self._server.server_port
        self.endpoint = f"http://{self.host}:{self.port}"
        # The A2A Agent Card names this endpoint (as CDK sets the API's), never a request's Host.
        os.environ["DOVECOTE_PUBLIC_URL"] = self.endpoint
        get_settings.cache_clear()
        self._write_tokens_file()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

        self._start_event_sources()

        if self._store is not None:
            # Snapshots in the background once the journal grows or ages, so a restart after a crash
            # replays a bounded journal whatever the uptime (persistence.CompactionPolicy). Started
            # last: the snapshot that folds in what this start replayed does not slow the start.
            self._store.start_background()
        return self

    def _key_file(self) -> Path:
        """DIR/webhook-keys.json; without --data, beside the tokens file (a dev key that outlives the
        in-memory data, harmlessly: it signs nothing that outlives the runtime)."""
        from dovecote.push.keys import KEY_FILE

        return (self.data_dir if self.data_dir is not None else self.tokens_file.parent) / KEY_FILE

    def _publish_webhook_keys(self) -> None:
        """The signing keys' JWKS at /.well-known/jwks.json from the start (the sender publishes it
        again before it signs with a key it has not published)."""
        import time

        from dovecote.push.keys import FileKeys
        from dovecote.push.wiring import config_store

        config_store(sealed=False).publish_keys(FileKeys(self._key_file()).ring().jwks(time.time()))

    def _lock_data_dir(self) -> None:
        """One `dovecote dev` per DIR: two would interleave one journal. The lock is on the
        directory itself (flock, released when the process ends, kill -9 included)."""
        import fcntl

        from infra.local.snapshot import make_private

        assert self.data_dir is not None
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._dir_fd = os.open(self.data_dir, os.O_RDONLY)
        try:
            fcntl.flock(self._dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._dir_fd)
            raise DataDirBusy(f"another dovecote dev is using {self.data_dir}") from None
        make_private(self.data_dir)  # a DIR written before the umask above (0755, 0644)

    def _bootstrap(self) -> None:
        from dovecote.platform.settings import get_settings
        from infra.local.resources import create_everything

        os.environ.update(create_everything())
        get_settings.cache_clear()
        self._mint_tokens()

    def _first_start(self, moto_endpoint: str) -> None:
        """Resources and tokens, their record in DIR, then the first snapshot. The snapshot is what
        marks DIR as initialized: a start that died before it leaves leftovers, wiped here."""
        assert self.data_dir is not None and self._store is not None
        from infra.local.snapshot import write_atomically

        _empty(self.data_dir)
        before = dict(os.environ)
        self._bootstrap()
        env = {k: v for k, v in os.environ.items() if k.startswith("DOVECOTE_") and before.get(k) != v}
        state = {"endpoint": moto_endpoint, "env": env}
        # write_atomically writes 0600.
        write_atomically(self.data_dir / ENV_FILE, lambda f: f.write(json.dumps(state, indent=2).encode()))
        write_atomically(self.data_dir / TOKENS_FILE, lambda f: f.write(json.dumps(self.tokens, indent=2).encode()))
        self._store.compact()

    def _align_streams(self) -> None:
        """A DIR written when a table's stream had another view type gets the one its model declares
        (infra/local/resources.align_streams), before any poller reads it."""
        import logging

        from infra.local.resources import align_streams

        for name in align_streams():
            logging.getLogger("dovecote-dev").info("%s: its stream now carries what its model declares", name)

    def _reshard_claimable(self) -> None:
        """A DIR written under another claim shard count (DOVECOTE_CLAIM_SHARDS; 16 was the default
        until it became 1) is brought under this start's before the API serves, by the dispatcher's
        own pass (TaskService.reshard_claimable), run to its end: nothing else writes yet, so the
        pass after the one that moved entries finds none."""
        import logging

        from dovecote.platform.settings import get_settings
        from dovecote.tasks.wiring import task_service

        tasks = task_service(sealed=False)
        moved = 0
        for _ in range(3):
            result = tasks.reshard_claimable()
            moved += result["moved"]
            if result["done"]:
                break
        if moved:
            logging.getLogger("dovecote-dev").info(
                "claimable index: %d task(s) moved to the layout of %d claim shard(s)",
                moved,
                get_settings().claim_shards,
            )

    def _restore(self, moto_endpoint: str) -> None:
        """Snapshot + journal into moto; the settings and tokens of the first start. Queue URLs
        name the moto endpoint of the first start: they are re-pointed at this one."""
        assert self.data_dir is not None and self._store is not None
        import logging
        import time

        started = time.perf_counter()
        self._store.recover()
        took = time.perf_counter() - started
        state = json.loads((self.data_dir / ENV_FILE).read_text())
        old = state["endpoint"]
        os.environ.update(
            {k: moto_endpoint + v[len(old) :] if v.startswith(old) else v for k, v in state["env"].items()}
        )
        self.tokens = json.loads((self.data_dir / TOKENS_FILE).read_text())
        self._renew_admin_token()
        restore = self._store.restore
        loads = ", ".join(f"{name} {seconds:.2f}s" for name, seconds in restore["load_s"].items())
        logging.getLogger("dovecote-dev").info(
            "restored %s in %.2fs: snapshot %.1f MB loaded (%s), %d journaled requests replayed from %d journal(s)"
            " in %.2fs (%d refused)",
            self.data_dir,
            took,
            self._store.snapshot_bytes / 1e6,
            loads,
            self._store.replayed,
            restore["journals"],
            restore["replay_s"],
            self._store.refused,
        )

    def _start_event_sources(self) -> None:
        """Every stream, queue and schedule of infra/event_sources.py, as pollers and schedule
        threads: the rows CDK builds its event source mappings and rules from. The sources poll moto
        when a write reaches their source (infra/local/wakeups.py), not on a timer: an idle runtime
        is idle."""
        from dovecote.platform import aws
        from dovecote.platform.settings import get_settings
        from infra.event_sources import QUEUES, SCHEDULES, STREAMS
        from infra.local.resources import DEFAULT_NAMES
        from infra.local.schedules import ExpiryGate, Schedule
        from infra.local.streams import StreamPoller, streams_client

        settings = get_settings()
        trims: list[Any] = []
        for stream in STREAMS:
            table = getattr(settings, stream.table)
            poller = StreamPoller(
                dynamodb=aws.client("dynamodb"),
                streams=streams_client(),
                table=table,
                function=stream.function,
                batch_size=stream.batch_size,
                event_filter=stream.filter,
            )
            self.sources.append(poller.wake_on(self._wakeups.watch_table(table), idle_s=IDLE_POLL_S).start())
            trims.append(functools.partial(_trim_consumed, table, poller))
        if self._store is not None:
            # A snapshot keeps only the stream records their pollers have not handled yet.
            self._store.before_cut = functools.partial(_run_all, trims)
        for queue in QUEUES:
            url = aws.client("sqs").get_queue_url(QueueName=DEFAULT_NAMES[queue.queue])["QueueUrl"]
            options: dict[str, Any] = {"concurrency": queue.local_concurrency}
            if queue.local_give_up_after is not None:
                options["give_up_after"] = queue.local_give_up_after
            if queue.local_retry_poll_s is not None:
                options["retry_poll_s"] = queue.local_retry_poll_s
            self.sources.append(
                self._poll_queue(url, queue.function, queue.batch_size, s3_writes=queue.wake_on_s3_writes, **options)
            )
        for schedule in SCHEDULES:
            if schedule.local_every_s is None:
                continue
            if any(getattr(settings, name) == "off" for name in schedule.needs_on):
                continue  # e.g. the semantic tier's backfill without an embedder
            if schedule.function is DISPATCHER:
                if self.dispatch_interval <= 0:
                    continue
                # Every tick still comes (fencing is as prompt as the interval says); the dispatcher
                # runs when a lease is past its deadline, and every 10 minutes regardless. The gate
                # reads the index the dispatcher reads, so that run only guards against a gate gone
                # wrong, and it is not cheap here: moto answers each of its 8 shard Queries by reading
                # the whole table (a second of CPU with a few hundred tasks, which every minute was
                # most of an idle runtime's).
                tasks_table = settings.tasks_table
                gate = ExpiryGate(table=tasks_table, changed=self._wakeups.watch_table(tasks_table))
                every = self.dispatch_interval
                started = Schedule(function=DISPATCHER, interval_s=every, gate=gate, at_least_every_s=DISPATCH_ANYWAY_S)
            else:
                started = Schedule(function=schedule.function, interval_s=schedule.local_every_s)
            self.sources.append(started.start())

    def _poll_queue(
        self, queue_url: str, function: Function, batch_size: int, *, s3_writes: bool = False, **options: Any
    ) -> Any:
        """A started QueuePoller of `queue_url` (`options` as it takes them), woken when a message
        is sent to the queue or, with `s3_writes`, when S3 is written (its notifications)."""
        from dovecote.platform import aws
        from infra.local.queues import QueuePoller

        poller = QueuePoller(
            sqs=aws.client("sqs"), queue_url=queue_url, function=function, batch_size=batch_size, **options
        )
        return poller.wake_on(self._wakeups.watch_queue(queue_url, s3_writes=s3_writes), idle_s=IDLE_POLL_S).start()

    def _mint_tokens(self) -> None:
        from dovecote.admin.dynamo import DynamoTokenStore
        from dovecote.admin.service import TokenService
        from dovecote.platform import aws
        from dovecote.platform.settings import get_settings

        tokens = TokenService(DynamoTokenStore(table=get_settings().tokens_table, dynamodb=aws.client("dynamodb")))
        for role, worker in (("admin", ""), ("caller", ""), ("worker", DEV_WORKER)):
            # Local tokens outlive any dev session (the admin's a week); deployed ones get the settings' defaults.
            days = DEV_ADMIN_TOKEN_DAYS if role == "admin" else DEV_TOKEN_DAYS
            token, _ = tokens.mint(None, DEV_AUTHORITY, role, worker, expires_in_days=days)
            self.tokens[role] = token

    def console_line(self, *, to_terminal: bool) -> str:
        """The banner's console line: where the one-time sign-in link is, or why there is no console.
        The link holds a token, so it is printed only to a terminal; a banner going to a file or a
        pipe (a log) names the private file that holds it instead."""
        from infra.local.console import ConsoleAssets, console_url

        url = console_url(self.endpoint)
        if not ConsoleAssets(lambda *_: []).built:
            return f"console: not built (it needs npm: install Node.js and npm, then `make install`); {url} says so"
        link = self.console_link()
        write_private(self.console_link_file, link + "\n")
        if to_terminal:
            return f"console: {link}  (a one-time sign-in link; or open {url} and paste a token)"
        return f"console: {url}  (a one-time sign-in link is in {self.console_link_file}; or paste a token)"

    @property
    def console_link_file(self) -> Path:
        """Beside the tokens file, named after it: a second runtime's (dev-tokens-PORT.json, see
        `dovecote dev`) is console-link-PORT, so it leaves the first one's link alone."""
        stem = self.tokens_file.stem
        suffix = stem.removeprefix(Path(TOKENS_FILE).stem) if stem.startswith(Path(TOKENS_FILE).stem) else f"-{stem}"
        return self.tokens_file.with_name(CONSOLE_LINK_FILE + suffix)

    def console_link(self) -> str:
        """A one-time sign-in link for the web console: a new admin token of one day in the URL's
        fragment (never sent to a server). The console takes it out of the address bar at once, mints
        the person's own tokens with it and revokes it, so the link signs in once
        (console/src/views/signin.jsx)."""
        from dovecote.admin.dynamo import DynamoTokenStore
        from dovecote.admin.service import TokenService
        from dovecote.platform import aws
        from dovecote.platform.settings import get_settings
        from infra.local.console import console_url

        store = DynamoTokenStore(table=get_settings().tokens_table, dynamodb=aws.client("dynamodb"))
        token, _ = TokenService(store).mint(None, DEV_AUTHORITY, "admin", "", expires_in_days=1)
        return f"{console_url(self.endpoint)}#link={token}"

    def _renew_admin_token(self) -> None:
        """A kept admin token (`--data DIR`) with less than a day left, or gone, is replaced by a new
        one of a week, recorded in DIR: the tokens file and the profiles get it at this start."""
        from dovecote.admin.dynamo import DynamoTokenStore
        from dovecote.admin.model import parse_token
        from dovecote.admin.service import TokenService
        from dovecote.platform import aws
        from dovecote.platform.clock import utc_now
        from dovecote.platform.settings import get_settings
        from infra.local.snapshot import write_atomically

        assert self.data_dir is not None
        store = DynamoTokenStore(table=get_settings().tokens_table, dynamodb=aws.client("dynamodb"))
        token_id = parse_token(self.tokens.get("admin", ""))
        record = store.get(token_id) if token_id else None
        expires = record.expires_at if record is not None and not record.revoked_at else None
        if not admin_renewal_due(expires, utc_now()):
            return
        token, _ = TokenService(store).mint(None, DEV_AUTHORITY, "admin", "", expires_in_days=DEV_ADMIN_TOKEN_DAYS)
        self.tokens["admin"] = token
        write_atomically(self.data_dir / TOKENS_FILE, lambda f: f.write(json.dumps(self.tokens, indent=2).encode()))

    def _write_tokens_file(self) -> None:
        document = {"endpoint": self.endpoint, "tokens": self.tokens, "control": self._control_secret}
        write_private(self.tokens_file, json.dumps(document, indent=2) + "\n")

    def stop(self) -> None:
        # What runs functions first, then the servers they call, then the data directory; a part
        # this start never reached is None.
        for worker in (self._metrics_log, *reversed(self.sources)):
            if worker is not None:
                worker.stop()
        for server in (self._server, self._moto):
            if server is not None:
                server.shutdown()
        if self._store is not None:
            self._store.close()
        if self._umask is not None:
            os.umask(self._umask)  # an in-process runtime (bench) gives its process its umask back
            self._umask = None
        if self._environ is not None:
            # ... and its environment: a later test or bench in the same process must not reach
            # this runtime's stopped moto through AWS_ENDPOINT_URL (CI once lost seven tests so).
            from dovecote.platform import aws
            from dovecote.platform.settings import get_settings

            os.environ.clear()
            os.environ.update(self._environ)
            self._environ = None
            aws.reset_clients()  # the kept clients name the stopped endpoint
            get_settings.cache_clear()


def admin_renewal_due(expires_at: str | None, now: datetime) -> bool:
    """Whether a kept admin token (its `expires_at`, None when it is gone or revoked) is to be
    replaced at this start: less than ADMIN_RENEWAL_HOURS left."""
    if expires_at is None:
        return True
    from dovecote.platform.clock import rfc3339

    return expires_at <= rfc3339(now + timedelta(hours=ADMIN_RENEWAL_HOURS))


__all__ = ["DataDirBusy", "LocalRuntime", "PortInUse", "SnapshotOfAnotherMoto", "UnsafeOptions"]


class DataDirBusy(RuntimeError):
    """`--data DIR` is held by another running `dovecote dev`."""


class PortInUse(RuntimeError):
    """The API port is taken by another program (another `dovecote dev` with another DIR, say)."""


def _check_port(host: str, port: int) -> None:
    """Refuse early, before anything is written, a port the API server could not bind: werkzeug's own
    answer to that is two lines on stderr and `sys.exit(1)`. Bound as werkzeug binds it (address
    reuse on), so a port left in TIME_WAIT by a runtime just stopped is not refused."""
    import socket

    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PortInUse(f"port {port} on {host} is in use by another program") from None
            raise


def _empty(directory: Path) -> None:
    for entry in directory.iterdir():
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def ensure_cursor_key_env() -> None:
    """Outside `dovecote dev` a generated dev key stands in for the Secrets Manager secret."""
    os.environ.setdefault("DOVECOTE_CURSOR_KEY", secrets.token_urlsafe(48))


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (tokens, sign-in links), replacing it whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never readable by others, even briefly
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    tmp.replace(path)
