"""An echo worker, built on the SDK's worker loop (`dovecote.client.worker.Worker`).

It claims the oldest claimable task by long-poll, accepts it, asks the caller for input once, and
completes with an echo of the reply. The loop heartbeats its leases (at a quarter of each task's
lease timeout) and keeps the lease of a task that waits for input; it survives its own restart: on
start it lists its current leases and resumes those exact (task, fence) pairs before claiming
anything new, and every command carries a command id derived from (task, fence, command, revision),
so a command retried after a crash replays instead of running twice.

Identity: DOVECOTE_ENDPOINT + DOVECOTE_TOKEN (a worker token) when set. Against `dovecote dev`
without DOVECOTE_TOKEN, it mints a worker token of its own (`--worker-id`, default `echo-worker`)
with the dev admin token from `.dovecote/dev-tokens.json` (or DOVECOTE_TOKENS_FILE).

    make dev                                         # in one terminal
    .venv/bin/python examples/echo_worker.py         # in another
    .venv/bin/python examples/echo_worker.py --once  # one task (even one that then waits for input)
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from dovecote.client import DovecoteClient, DovecoteError
from dovecote.client.worker import Job, Worker

QUESTION = "What should I echo?"
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


def worker_client(worker_id: str) -> DovecoteClient:
    """The worker's own client: DOVECOTE_TOKEN when set, else a token minted from the dev admin."""
    if os.environ.get("DOVECOTE_TOKEN"):
        return DovecoteClient.from_env("worker")
    with DovecoteClient.from_env("admin") as admin:
        minted = admin.create_token("dev", "worker", worker_id)
        log.info("minted a worker token for %s (token id %s)", worker_id, minted["token_id"])
        return DovecoteClient(admin.endpoint, minted["token"], source=admin.source)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--once", action="store_true", help="handle one task (or wait one long-poll), then exit")
    parser.add_argument("--wait", type=int, default=20, help="long-poll seconds per claim (0-20)")
    parser.add_argument("--worker-id", default="echo-worker", help="worker id to mint a token for (dev only)")
    parser.add_argument("--concurrency", type=int, default=1, help="tasks handled at once")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        with worker_client(args.worker_id) as client:
            worker = Worker(client, echo, wait_seconds=args.wait, concurrency=args.concurrency)
            log.info("echo worker on %s", client.endpoint)
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
