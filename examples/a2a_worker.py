"""A worker for tasks that arrive over A2A (`dovecote.a2a`), built on the SDK's worker loop like any
other Dovecote worker: claim, accept, complete. It follows the A2A TCK's messageId routing, so that
the TCK runs against `dovecote dev` plus this worker.

The A2A messageId of a caller's message is in its metadata (`metadata.a2a.messageId`): Dovecote keeps
its own message ids, since A2A clients may repeat theirs. The prefix of the latest caller message's
messageId decides what the worker does:

| prefix | the worker |
|---|---|
| `tck-input-required` | asks for input (the task waits in input_required; the caller's next message continues it) |
| `tck-reject-task` | rejects the task |
| `tck-message-response` | completes with a message flagged `a2a.messageResponse`: SendMessage answers that Message |
| `tck-artifact-text`, `-file`, `-file-url`, `-data` | freezes one artifact of that kind, then completes with it |
| anything else (`tck-complete-task`) | completes with "Hello from TCK" |

An artifact of A2A parts (a file with its filename, a URL) is frozen as an A2A Artifact in protobuf
JSON, media type `application/a2a-artifact+json`; a plain text or JSON payload needs no wrapping.

Identity: DOVECOTE_ENDPOINT + DOVECOTE_TOKEN (a worker token) when set; against `dovecote dev`
without DOVECOTE_TOKEN, a worker token minted with the dev admin token (`--worker-id`).

    .venv/bin/dovecote dev --a2a-unauthenticated       # in one terminal
    .venv/bin/python examples/a2a_worker.py            # in another
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import sys
from typing import Any

from echo_worker import worker_client  # the same dev identity as the echo worker: DOVECOTE_TOKEN, else minted

from dovecote.client import DovecoteError
from dovecote.client.worker import Job, Worker

A2A_ARTIFACT = "application/a2a-artifact+json"
EMPTY_REVISION = "empty"  # the base revision of a workspace's first artifact
log = logging.getLogger("a2a-worker")


def text(value: str, **a2a: Any) -> dict[str, Any]:
    """A one-part text message, with A2A fields in its metadata when given."""
    message: dict[str, Any] = {"parts": [{"media_type": "text/plain", "text": value}]}
    if a2a:
        message["metadata"] = {"a2a": a2a}
    return message


# prefix → (media type, payload) of the one artifact the task publishes; longest prefixes first.
ARTIFACTS: list[tuple[str, str, str]] = [
    (
        "tck-artifact-file-url",
        A2A_ARTIFACT,
        json.dumps(
            {"parts": [{"url": "https://example.com/output.txt", "mediaType": "text/plain", "filename": "output.txt"}]}
        ),
    ),
    (
        "tck-artifact-file",
        A2A_ARTIFACT,
        json.dumps(
            {"parts": [{"raw": base64.b64encode(b"tck").decode(), "mediaType": "text/plain", "filename": "output.txt"}]}
        ),
    ),
    ("tck-artifact-text", "text/plain", "Generated text content"),
    ("tck-artifact-data", "application/json", json.dumps({"key": "value", "count": 42})),
]


def a2a_message_id(message: dict[str, Any]) -> str:
    a2a = (message.get("metadata") or {}).get("a2a") or {}
    return str(a2a.get("messageId") or message["id"])


def handle(job: Job) -> None:
    """One turn: act on the latest caller message's messageId prefix."""
    latest = [m for m in job.messages() if m["author"] == "caller"][-1]
    prefix = a2a_message_id(latest)
    if prefix.startswith("tck-reject-task"):
        if job.state == "submitted":
            job.reject()
        else:
            job.fail()
        log.info("%s: rejected", job.id)
        return
    if job.state == "submitted":
        job.accept()
    if prefix.startswith("tck-input-required"):
        job.request_input(text("More input, please."))
        log.info("%s: asked for input", job.id)
        return
    if prefix.startswith("tck-message-response"):
        job.complete(text("Direct message response", messageResponse=True))
        log.info("%s: answered with a message", job.id)
        return
    for start, media_type, payload in ARTIFACTS:
        if prefix.startswith(start):
            artifact = f"a2a-{job.id}"
            head = job.client.workspace_head(job.task["workspace"])
            base = head["confirmed_revision"] if head else EMPTY_REVISION
            job.freeze(artifact, base, payload, media_type=media_type)
            job.complete(text("Artifact ready"), artifact_id=artifact)
            log.info("%s: completed with a %s artifact", job.id, start.removeprefix("tck-artifact-"))
            return
    job.complete(text("Hello from TCK"))
    log.info("%s: completed", job.id)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker-id", default="a2a-worker", help="worker id to mint a token for (dev only)")
    parser.add_argument("--concurrency", type=int, default=2, help="tasks handled at once")
    parser.add_argument("--wait", type=int, default=20, help="long-poll seconds per claim (0-20)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        with worker_client(args.worker_id) as client:
            # auto_accept off: a task to reject is still submitted when `handle` sees it. A parked
            # task (input_required) is checked every second for the caller's reply.
            worker = Worker(
                client,
                handle,
                wait_seconds=args.wait,
                concurrency=args.concurrency,
                park_poll_seconds=1.0,
                auto_accept=False,
            )
            log.info("a2a worker on %s", client.endpoint)
            worker.run()
    except DovecoteError as exc:
        print(exc.message if exc.status == 0 else f"error: {exc}", file=sys.stderr)
        return 4 if exc.status == 0 else 1
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
