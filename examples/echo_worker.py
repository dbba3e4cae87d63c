"""An echo worker, built on the SDK's worker loop (`dovecote.client.worker.Worker`).

It claims a task (close to the oldest) by long-poll, accepts it, asks the caller for input once, and
completes with an echo of the reply. The loop heartbeats its leases (at a quarter of each task's
lease timeout) and keeps the lease of a task that waits for input; it survives its own restart: on
start it lists its current leases and resumes those exact (task, fence) pairs before claiming
anything new, and every command carries a command id derived from (task, fence, command, revision),
so a command retried after a crash replays instead of running twice. On SIGINT or SIGTERM it stops
claiming (cutting its long-poll short), releases the leases it has not accepted, and names the
accepted ones it keeps for its restart (a second signal stops at once).

With `--events` it drives each task through worker events (`POST /v1/worker/events`) instead of the
per-command routes, and answers at once: it accepts, freezes an artifact holding the echo of the
task's last caller message (`echo.<task>`, text/plain, based on the workspace's current head, or
`empty` in a new workspace), and completes naming that artifact, which publishes it. A task that
arrives with an artifact already frozen (by a worker that was fenced since) is completed naming that
artifact by the SDK's loop, without a second freeze.

Identity: DOVECOTE_ENDPOINT + DOVECOTE_TOKEN (a worker token) when set. Against `dovecote dev`
without DOVECOTE_TOKEN, it mints a worker token of its own (`--worker-id`, default `echo-worker`)
with the dev admin token from `.dovecote/dev-tokens.json` (or DOVECOTE_TOKENS_FILE), and revokes it
when it exits (its leases are the worker id's: the next run, with a token of its own, resumes them).

    make dev                                         # in one terminal
    .venv/bin/python examples/echo_worker.py         # in another
    .venv/bin/python examples/echo_worker.py --once  # one task (even one that then waits for input)
    .venv/bin/python examples/echo_worker.py --events  # worker events; an artifact per task
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from dovecote.client import DovecoteClient, DovecoteError
from dovecote.client.worker import Job, Worker

QUESTION = "What should I echo?"
# The base revision a freeze names when its workspace has no head yet (docs/services/artifacts.md): any
# name will do; the first freeze makes it the head's confirmed revision. Later freezes name the head's.
EMPTY_REVISION = "empty"
log = logging.getLogger("echo")


def echo(job: Job) -> None:
    """Ask once; when the caller has replied, complete with an echo of the last reply."""
    replies = [m for m in job.messages() if m["author"] == "caller"][1:]
    if not replies:
        job.request_input(QUESTION)
        log.info("%s: asked for input", job.id)
        return
    answer = Job.text_of(replies[-1])
    job.complete(f"echo: {answer}")
    log.info("%s: completed with 'echo: %s'", job.id, answer)


def artifact_id_for(task_id: str) -> str:
    """`echo.<task>`, or a digest of the task id when that would pass the 128-character id limit."""
    name = f"echo.{task_id}"
    return name if len(name) <= 128 else "echo." + hashlib.sha256(task_id.encode("utf-8")).hexdigest()


def echo_with_artifact(job: Job) -> None:
    """Freeze the echo of the last caller message as the task's artifact, then complete with it
    (through worker events when the worker runs with `events=True`)."""
    asked = [m for m in job.messages() if m["author"] == "caller"]
    answer = f"echo: {Job.text_of(asked[-1])}"
    head = job.client.workspace_head(job.task["workspace"])
    base = head["confirmed_revision"] if head else EMPTY_REVISION
    artifact = artifact_id_for(job.id)
    job.freeze(artifact, base, answer, media_type="text/plain; charset=utf-8")
    job.complete(answer, artifact_id=artifact)
    log.info("%s: completed with artifact %s", job.id, artifact)


@contextmanager
def worker_client(worker_id: str) -> Iterator[DovecoteClient]:
    """The worker's own client: DOVECOTE_TOKEN when set, else a token minted from the dev admin for
    this run, revoked when it ends (so runs do not leave live tokens behind)."""
    if os.environ.get("DOVECOTE_TOKEN"):
        with DovecoteClient.from_env("worker") as client:
            yield client
        return
    with DovecoteClient.from_env("admin") as admin:
        minted = admin.create_token("dev", "worker", worker_id)
        log.info("minted a worker token for %s (token id %s)", worker_id, minted["token_id"])
        try:
            with DovecoteClient(admin.endpoint, minted["token"], source=admin.source) as client:
                yield client
        finally:
            try:
                admin.revoke_token(minted["token_id"])
            except DovecoteError as exc:
                log.warning("could not revoke the worker token %s (%s)", minted["token_id"], exc.code)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--once",
        action="store_true",
        help="handle one task (or wait one long-poll), then exit; a task claimed while it waits for its "
        "caller is kept, not counted",
    )
    parser.add_argument("--wait", type=int, default=20, help="long-poll seconds per claim (0-20)")
    parser.add_argument("--worker-id", default="echo-worker", help="worker id to mint a token for (dev only)")
    parser.add_argument("--concurrency", type=int, default=1, help="tasks handled at once")
    parser.add_argument(
        "--events",
        action="store_true",
        help="drive tasks through POST /v1/worker/events; echo at once into a frozen artifact",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        with worker_client(args.worker_id) as client:
            handle = echo_with_artifact if args.events else echo
            worker = Worker(client, handle, wait_seconds=args.wait, concurrency=args.concurrency, events=args.events)
            log.info("echo worker on %s%s", client.endpoint, " (worker events)" if args.events else "")
            handled = worker.run(once=args.once)
    except DovecoteError as exc:
        print(exc.message if exc.status == 0 else f"error: {exc}", file=sys.stderr)
        return 4 if exc.status == 0 else 1
    except KeyboardInterrupt:
        return 0
    if args.once:
        log.info("handled %d task(s)", handled)
    return 0


if __name__ == "__main__":
    sys.exit(main())
