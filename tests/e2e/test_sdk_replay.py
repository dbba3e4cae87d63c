"""Retries that replay, over real HTTP against `dovecote dev --faults`: every command that carries a
message (create, reply, request_input, complete) has its connection cut after the server committed
(X-Dovecote-Fault: drop-response on the first attempt only), and the SDK's own retry, with the same
command id and the message and submission ids derived from it, returns the original answer; the
task holds exactly one message and one event for it. The same through the CLI, which uses the SDK,
and by hand with --command-id."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any

import httpx
import pytest

from dovecote.client import DovecoteClient
from tests.conftest import ROOT

FAULT = {"X-Dovecote-Fault": "drop-response"}


class CutOnce:
    """An httpx request hook: the next POST carries the fault header (its answer is lost after the
    commit); every request is counted."""

    def __init__(self) -> None:
        self.armed = False
        self.sent: list[tuple[str, str, bool]] = []

    def arm(self) -> None:
        self.armed = True

    def __call__(self, request: httpx.Request) -> None:
        cut = self.armed and request.method == "POST"
        if cut:
            request.headers.update(FAULT)
            self.armed = False
        self.sent.append((request.method, request.url.path, cut))


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def faulty(dev_runtime: dict[str, Any], role: str) -> tuple[DovecoteClient, CutOnce]:
    hook = CutOnce()
    client = DovecoteClient(dev_runtime["endpoint"], dev_runtime["tokens"][role], event_hooks={"request": [hook]})
    return client, hook


def test_every_message_command_replays_through_the_sdk_after_a_cut_connection(dev_runtime: dict[str, Any]) -> None:
    caller, cut_caller = faulty(dev_runtime, "caller")
    worker, cut_worker = faulty(dev_runtime, "worker")
    tid = uid("replay")

    def once(hook: CutOnce, call: Any) -> Any:
        hook.arm()
        before = len(hook.sent)
        answer = call()
        attempts = [s for s in hook.sent[before:] if s[0] == "POST"]
        assert len(attempts) == 2 and attempts[0][2] and not attempts[1][2], attempts  # cut, then one retry
        return answer

    created = once(cut_caller, lambda: caller.create_task(tid, "first", context="replay"))
    assert (created["revision"], created["message_count"]) == (1, 1)
    fence = worker.acquire(tid)["fence"]
    worker.accept(tid, 1, fence)
    asked = once(cut_worker, lambda: worker.request_input(tid, 2, fence, "which one?"))
    assert (asked["state"], asked["revision"], asked["message_count"]) == ("input_required", 3, 2)
    replied = once(cut_caller, lambda: caller.reply(tid, 3, "the second"))
    assert (replied["state"], replied["revision"], replied["message_count"]) == ("working", 4, 3)
    done = once(cut_worker, lambda: worker.complete(tid, 4, fence, "here it is"))
    assert (done["state"], done["revision"], done["message_count"]) == ("completed", 5, 4)
    assert done["submission"]["id"].startswith("s-")

    events = [e["type"] for e in caller.events(tid)["items"]]
    assert events == ["task_submitted", "task_accepted", "input_required", "caller_replied", "task_completed"]
    texts = [m["parts"][0]["text"] for m in caller.messages(tid)["items"]]
    assert texts == ["first", "which one?", "the second", "here it is"]


def test_the_replayed_answer_is_the_original_one(dev_runtime: dict[str, Any]) -> None:
    caller, cut = faulty(dev_runtime, "caller")
    tid, command_id = uid("orig"), uid("c")
    cut.arm()
    first = caller.create_task(tid, "x", command_id=command_id)  # cut after commit, retried: a replay
    again = caller.create_task(tid, "x", command_id=command_id)  # by hand: the same answer again
    assert first == again == caller.get_task(tid)
    assert [s[2] for s in cut.sent] == [True, False, False, False]


@pytest.fixture
def cli_env(dev_runtime: dict[str, Any]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")}
    env.update(DOVECOTE_TOKENS_FILE=str(dev_runtime["tokens_file"]), COLUMNS="200")
    return env


# The CLI with the same hook: its DovecoteClient cuts its first POST. No test hook in the product.
CUTTING_CLI = """
import atexit, json, os, sys
import dovecote.client as sdk
from tests.e2e.test_sdk_replay import CutOnce

hooks = []
atexit.register(lambda: open(os.environ["CUT_LOG"], "w").write(json.dumps([h.sent for h in hooks])))

class Cutting(sdk.DovecoteClient):
    def __init__(self, *args, **kwargs):
        hook = CutOnce()
        hook.arm()
        hooks.append(hook)
        kwargs["event_hooks"] = {"request": [hook]}
        super().__init__(*args, **kwargs)

sdk.DovecoteClient = Cutting
import dovecote.cli.common as common
common.DovecoteClient = Cutting
from dovecote.cli import main
sys.argv[0] = "dovecote"
main(sys.argv[1:])  # arguments given: it returns (or raises SystemExit), so the atexit above runs
"""


def cli(env: dict[str, str], *args: str, cut: bool = False) -> subprocess.CompletedProcess[str]:
    prefix = [sys.executable, "-c", CUTTING_CLI] if cut else [sys.executable, "-m", "dovecote.cli"]
    return subprocess.run([*prefix, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def unwrap(answer: dict[str, Any]) -> Any:
    """The object of a CLI --json answer, which is the HTTP answer: {task} or {assignment}."""
    return answer.get("task") or answer.get("assignment") or answer


def requests_in_log(dev_runtime: dict[str, Any], line: str) -> int:
    return sum(1 for row in dev_runtime["log"].read_text().splitlines() if line in row)


def test_every_message_command_replays_through_the_cli_after_a_cut_connection(
    dev_runtime: dict[str, Any], cli_env: dict[str, str], tmp_path: Any
) -> None:
    tid = uid("clicut")
    log = tmp_path / "cut.json"

    def run(*args: str) -> dict[str, Any]:
        result = cli({**cli_env, "CUT_LOG": str(log)}, *args, "--json", cut=True)
        assert result.returncode == 0, result.stderr
        attempts = [cut for hook in json.loads(log.read_text()) for method, _, cut in hook if method == "POST"]
        assert attempts == [True, False], attempts  # the first attempt was cut after commit, then retried
        return dict(unwrap(json.loads(result.stdout)))

    assert run("tasks", "create", tid, "first")["revision"] == 1
    claim = json.loads(cli(cli_env, "worker", "acquire", tid, "--json").stdout)["assignment"]
    fence = str(claim["fence"])
    assert cli(cli_env, "worker", "accept", tid, "--rev", "1", "--fence", fence).returncode == 0
    asked = run("worker", "request-input", tid, "why?", "--rev", "2", "--fence", fence)
    assert (asked["state"], asked["message_count"]) == ("input_required", 2)
    assert requests_in_log(dev_runtime, f"POST /v1/tasks/{tid}/request-input 200") == 2
    replied = run("tasks", "reply", tid, "because", "--rev", "3")
    assert (replied["state"], replied["message_count"]) == ("working", 3)
    assert requests_in_log(dev_runtime, f"POST /v1/tasks/{tid}/reply 200") == 2
    done = run("worker", "complete", tid, "done", "--rev", "4", "--fence", fence)
    assert (done["state"], done["revision"], done["message_count"]) == ("completed", 5, 4)
    assert requests_in_log(dev_runtime, f"POST /v1/tasks/{tid}/complete 200") == 2


def test_a_retry_by_hand_with_the_same_command_id_replays_through_the_cli(cli_env: dict[str, str]) -> None:
    tid = uid("cliid")

    def twice(*args: str) -> dict[str, Any]:
        command_id = uid("c")
        first = cli(cli_env, *args, "--command-id", command_id, "--json")
        second = cli(cli_env, *args, "--command-id", command_id, "--json")
        assert first.returncode == 0, first.stderr
        assert second.returncode == 0, second.stderr  # not 409 idempotency_conflict
        assert json.loads(first.stdout) == json.loads(second.stdout)
        return dict(unwrap(json.loads(first.stdout)))

    assert twice("tasks", "create", tid, "hello")["message_count"] == 1
    fence = str(twice("worker", "acquire", tid)["fence"])
    twice("worker", "accept", tid, "--rev", "1", "--fence", fence)
    assert twice("worker", "request-input", tid, "why?", "--rev", "2", "--fence", fence)["message_count"] == 2
    assert twice("tasks", "reply", tid, "because", "--rev", "3")["message_count"] == 3
    done = twice("worker", "complete", tid, "done", "--rev", "4", "--fence", fence)
    assert (done["state"], done["message_count"]) == ("completed", 4)
    different = cli(cli_env, "tasks", "reply", tid, "other text", "--rev", "3", "--command-id", uid("c"))
    assert different.returncode == 1  # a new command, judged on its own: the task has moved on
    assert different.stderr.startswith("error: 409 revision_conflict:") and different.stderr.count("\n") == 1


def test_a_command_id_without_a_revision_is_refused_before_sending(cli_env: dict[str, str]) -> None:
    """Without --rev the CLI reads the revision; a retry would read the one the first run made and
    send another command (409 idempotency_conflict), so --command-id takes --rev with it."""
    tid = uid("norev")
    assert cli(cli_env, "tasks", "create", tid, "hello").returncode == 0
    command_id = uid("c")
    for args in (("tasks", "cancel", tid), ("tasks", "reply", tid, "because")):
        refused = cli(cli_env, *args, "--command-id", command_id)
        assert refused.returncode == 2, refused.stderr
        assert "--command-id needs --rev" in refused.stderr and refused.stderr.count("\n") == 1
    task = json.loads(cli(cli_env, "tasks", "get", tid, "--json").stdout)
    assert (unwrap(task)["state"], unwrap(task)["revision"]) == ("submitted", 1)  # nothing was sent
    first = cli(cli_env, "tasks", "cancel", tid, "--rev", "1", "--command-id", command_id, "--json")
    again = cli(cli_env, "tasks", "cancel", tid, "--rev", "1", "--command-id", command_id, "--json")
    assert first.returncode == again.returncode == 0 and json.loads(first.stdout) == json.loads(again.stdout)
