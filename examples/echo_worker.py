"""An echo worker: a real worker loop against Dovecote.

It claims the oldest claimable task, accepts it, asks the caller for input once, and completes with
an echo of the reply. It survives its own restart: on start it lists its current leases and resumes
those exact (task, fence) pairs before claiming anything new, and every command carries a
deterministic command id, so a command retried after a crash replays instead of running twice.

    make dev                                  # in one terminal
    .venv/bin/python examples/echo_worker.py  # in another (DOVECOTE_ENDPOINT/TOKEN, or the dev tokens)
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from dovecote.client import DovecoteClient, DovecoteError

QUESTION = "What should I echo?"


def drive(client: DovecoteClient, assignment: dict[str, Any]) -> bool:
    """Advance one leased task as far as it can go now. True when it reached a terminal state."""
    task, fence = assignment["task"], assignment["fence"]
    tid = task["id"]

    def command_id(step: str) -> str:
        # The same (task, lease generation, step) always gets the same id, so a retry after a crash
        # replays; the id is an HMAC keyed by this worker's token, so no one else can take it first.
        return client.derived_id("echo", tid, fence, step)

    task = client.get_task(tid)
    try:
        if task["state"] == "submitted":
            task = client.worker_command("accept", tid, task["revision"], fence, command_id("accept"))
        if task["state"] == "working":
            history = client.messages(tid)["items"]
            replies = [m for m in history if m["author"] == "caller"][1:]
            if not replies:
                task = client.worker_command(
                    "request-input", tid, task["revision"], fence, command_id("ask"), message=QUESTION
                )
                print(f"{tid}: asked for input")
                return False
            answer = " ".join(p.get("text", "") for p in replies[-1]["parts"])
            task = client.worker_command(
                "complete",
                tid,
                task["revision"],
                fence,
                command_id("complete"),
                message=f"echo: {answer}",
                submission_id=command_id("submission"),
            )
            print(f"{tid}: completed with 'echo: {answer}'")
        return task["state"] in ("completed", "canceled", "rejected", "failed")
    except DovecoteError as exc:
        if exc.code in ("stale_lease", "terminal_task"):
            print(f"{tid}: lease lost or task ended ({exc.code}); dropping it")
            return True
        raise


def run(client: DovecoteClient, *, once: bool, poll: float) -> None:
    held = {a["task"]["id"]: a for a in client.leases()}  # restart recovery: resume, don't re-acquire
    if held:
        print(f"resuming {len(held)} lease(s): {', '.join(sorted(held))}")
    while True:
        assignment = client.claim()
        if assignment is not None:
            held[assignment["task"]["id"]] = assignment
            print(f"{assignment['task']['id']}: claimed with fence {assignment['fence']}")
        for tid in list(held):
            if drive(client, held[tid]):
                del held[tid]
        if once and not held and assignment is None:
            return
        time.sleep(poll)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--once", action="store_true", help="exit when nothing is left to do")
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between rounds")
    args = parser.parse_args()
    with DovecoteClient.from_env("worker") as client:
        run(client, once=args.once, poll=args.poll)


if __name__ == "__main__":
    main()
