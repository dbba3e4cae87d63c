"""The CLI's artifact verbs against `dovecote dev`: `worker freeze` (a file through a presigned upload,
stdin inline), `worker complete --artifact`, `worker event` (JSON from a file or stdin; a NACK prints
its settlement and exits 1), `artifacts get` (metadata, --json, --output verified), `artifacts head`,
`artifacts receipt record|get`; bad input exits 2 (or 1 for what the API refuses) with one line on
stderr; a server that is not running exits 4 with one line."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli import as_json, cli
from tests.e2e.test_cli_errors import clean_env, closed_port, one_line, run


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def leased(dev_runtime: dict[str, Any], workspace: str) -> tuple[str, int]:
    """A new task in `workspace`, acquired and accepted by the dev worker: (task, fence), revision 2."""
    task_id = uid("t")
    assert cli(dev_runtime, "tasks", "create", task_id, "change it", "--workspace", workspace).returncode == 0
    fence = as_json(cli(dev_runtime, "worker", "acquire", task_id, "--json", role="worker"))["assignment"]["fence"]
    accepted = cli(dev_runtime, "worker", "accept", task_id, "--rev", "1", "--fence", str(fence), role="worker")
    assert accepted.returncode == 0, accepted.stderr
    return task_id, fence


def stderr_line(result: Any, code: int) -> str:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    text = result.stderr.decode()
    assert text.count("\n") == 1 and "Traceback" not in text, text
    return text.rstrip("\n")


def test_freeze_a_file_complete_with_it_read_it_and_record_its_receipt(
    dev_runtime: dict[str, Any], tmp_path: Path
) -> None:
    workspace = uid("ws")
    task_id, fence = leased(dev_runtime, workspace)
    payload = os.urandom(2 * 1024 * 1024 + 3)  # over the inline limit: a presigned upload
    source = tmp_path / "patch.bin"
    source.write_bytes(payload)
    frozen = as_json(
        cli(
            dev_runtime,
            *("worker", "freeze", task_id, "--rev", "2", "--fence", str(fence)),
            *("--artifact", "patch", "--base", "rev-0", "-f", str(source), "--json"),
            role="worker",
        )
    )
    assert frozen["artifact"]["payload_digest"] == "sha256:" + hashlib.sha256(payload).hexdigest()
    assert frozen["artifact"]["media_type"] == "application/octet-stream" and frozen["task"]["revision"] == 3
    done = as_json(
        cli(
            dev_runtime,
            *("worker", "complete", task_id, "--rev", "3", "--fence", str(fence), "done"),
            *("--artifact", "patch", "--json"),
            role="worker",
        )
    )
    assert (done["task"]["state"], done["task"]["artifact"]) == ("completed", "patch")

    human = cli(dev_runtime, "artifacts", "get", workspace, "patch")
    assert (
        human.returncode == 0 and b"published" in human.stdout and frozen["artifact"]["digest"].encode() in human.stdout
    )
    answer = as_json(cli(dev_runtime, "artifacts", "get", workspace, "patch", "--json"))
    # Up to 4 MiB the answer carries the payload itself (larger ones a download_url: the SDK e2e test).
    assert answer["artifact"]["state"] == "published" and set(answer["payload"]) == {"media_type", "data_b64"}
    copy = tmp_path / "copy.bin"
    wrote = cli(dev_runtime, "artifacts", "get", workspace, "patch", "--output", str(copy))
    assert wrote.returncode == 0 and copy.read_bytes() == payload and f"wrote {copy}".encode() in wrote.stderr

    head = as_json(cli(dev_runtime, "artifacts", "head", workspace, "--json"))
    assert head["confirmed_revision"] == "rev-0"
    missing = stderr_line(cli(dev_runtime, "artifacts", "receipt", "get", workspace, "patch"), 1)
    assert "no apply receipt" in missing
    receipt = as_json(
        cli(dev_runtime, "artifacts", "receipt", "record", workspace, "patch", "--decision", "success", "--json")
    )["receipt"]
    assert receipt["decision"] == "success" and receipt["observed_revision"] == frozen["artifact"]["result_revision"]
    assert as_json(cli(dev_runtime, "artifacts", "receipt", "get", workspace, "patch", "--json"))["receipt"] == receipt
    moved = as_json(cli(dev_runtime, "artifacts", "head", workspace, "--json"))
    assert moved["confirmed_revision"] == frozen["artifact"]["result_revision"]
    # The same command again (a new command id) is an identical repeat: the stored receipt.
    again = cli(dev_runtime, "artifacts", "receipt", "record", workspace, "patch", "--decision", "success", "--json")
    assert again.returncode == 0, again.stderr
    assert as_json(again)["receipt"] == receipt
    # A different receipt for the same artifact is the API's conflict: exit 1, one line.
    conflict = cli(dev_runtime, "artifacts", "receipt", "record", workspace, "patch", "--decision", "rejected")
    assert "receipt_conflict" in stderr_line(conflict, 1)


def test_freeze_from_stdin_and_drive_the_task_with_worker_events(dev_runtime: dict[str, Any], tmp_path: Path) -> None:
    workspace = uid("ws")
    task_id = uid("t")
    assert cli(dev_runtime, "tasks", "create", task_id, "by events", "--workspace", workspace).returncode == 0
    fence = as_json(cli(dev_runtime, "worker", "acquire", task_id, "--json", role="worker"))["assignment"]["fence"]
    accept = tmp_path / "accept.json"
    accept.write_text(json.dumps({"kind": "accept_task", "task": task_id, "fence": fence, "expected_revision": 1}))
    settled = as_json(cli(dev_runtime, "worker", "event", str(accept), "--json", role="worker"))
    assert settled["decision"] == "ack"
    # The same file again is a new event (a fresh event id): the revision moved, so a NACK.
    again = cli(dev_runtime, "worker", "event", str(accept), "--json", role="worker")
    assert again.returncode == 1 and json.loads(again.stdout)["code"] == "revision_conflict"
    assert stderr_line(again, 1).startswith("nack: revision_conflict")

    frozen = as_json(
        cli(
            dev_runtime,
            *("worker", "freeze-artifact", task_id, "--expected-revision", "2", "--fence", str(fence)),
            *("--artifact-id", "notes", "--expected-base-revision", "r0", "--media-type", "text/markdown", "--json"),
            stdin=b"# the echo\n",
            role="worker",
        )
    )
    assert frozen["artifact"]["media_type"] == "text/markdown" and frozen["artifact"]["payload_size"] == 11
    complete: dict[str, Any] = {
        "delivery_id": uid("d"),
        "event": {
            "event_id": uid("e"),
            "kind": "complete_task",
            "task": task_id,
            "fence": fence,
            "expected_revision": 3,
            "message": "done",
            "artifact": "notes",
        },
    }
    stdin = json.dumps(complete).encode()
    first = as_json(cli(dev_runtime, "worker", "event", "-", "--json", stdin=stdin, role="worker"))
    assert first == {
        "delivery_id": complete["delivery_id"],
        "event_id": complete["event"]["event_id"],
        "decision": "ack",
    }
    # The exact delivery again (same ids): the same settlement, nothing run twice.
    assert as_json(cli(dev_runtime, "worker", "event", "--json", stdin=stdin, role="worker")) == first
    task = as_json(cli(dev_runtime, "tasks", "get", task_id, "--json"))["task"]
    assert (task["state"], task["revision"], task["artifact"]) == ("completed", 4, "notes")
    got = as_json(cli(dev_runtime, "artifacts", "get", workspace, "notes", "--json"))
    assert got["payload"] == {"media_type": "text/markdown", "text": "# the echo\n"}


@pytest.mark.parametrize(
    ("args", "stdin", "code", "fragment"),
    [
        (("worker", "event"), b"{not json", 2, "the event is not JSON"),
        (("worker", "event"), b"[1, 2]", 2, "must be a JSON object"),
        (("worker", "event", "no-such-file.json"), b"", 2, "no such file"),
        (("worker", "event"), b'{"event": 3}', 2, "event must be a JSON object"),
        (("worker", "event"), b'{"kind": "dance", "task": "t1", "fence": 1, "expected_revision": 1}', 1, "nack"),
        (
            ("worker", "freeze", "t1", "--rev", "2", "--fence", "1", "--artifact", "a", "--base", "b", "-f", "nope"),
            b"",
            2,
            "no such file",
        ),
        (
            ("worker", "freeze", "t1", "--rev", "2", "--fence", "1", "--artifact", "bad id", "--base", "b"),
            b"x",
            1,
            "invalid_argument",
        ),
        (("artifacts", "receipt", "record", "ws", "a", "--decision", "maybe"), b"", 2, "unknown decision 'maybe'"),
        (("artifacts", "head", "never-frozen-ws"), b"", 1, "has no head yet"),
        (("artifacts", "get", "ws", "no-such-artifact"), b"", 1, "404 not_found"),
    ],
    ids=[
        "event-not-json",
        "event-array",
        "event-missing-file",
        "event-not-object",
        "event-bad-kind",
        "freeze-missing-file",
        "freeze-bad-id",
        "receipt-bad-decision",
        "head-none",
        "get-missing",
    ],
)
def test_bad_input_is_one_line_and_its_exit_code(
    dev_runtime: dict[str, Any], args: tuple[str, ...], stdin: bytes, code: int, fragment: str
) -> None:
    role = "worker" if args[0] == "worker" else "caller"
    line = stderr_line(cli(dev_runtime, *args, stdin=stdin, role=role), code)
    assert fragment in line, line


VERBS = [
    ("worker", "freeze", "t1", "--rev", "2", "--fence", "1", "--artifact", "a", "--base", "b"),
    ("worker", "event"),
    ("artifacts", "get", "ws", "a"),
    ("artifacts", "head", "ws"),
    ("artifacts", "receipt", "get", "ws", "a"),
    ("artifacts", "receipt", "record", "ws", "a", "--decision", "success"),
]


@pytest.mark.parametrize("args", VERBS, ids=[" ".join(v[:3]) for v in VERBS])
def test_the_server_is_not_running(args: tuple[str, ...], tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    env = clean_env(DOVECOTE_ENDPOINT=endpoint, DOVECOTE_TOKEN="dvc_x_y")
    stdin = b'{"kind": "accept_task", "task": "t1", "fence": 1, "expected_revision": 1}' if "event" in args else b"x"
    line = one_line(run(env, *args, cwd=tmp_path, stdin=stdin), 4)
    assert line == f"cannot reach Dovecote at {endpoint}: connection refused; is `make dev` running?"


# ---- recall's errors go through the same path ----------------------------------------------------


@pytest.mark.parametrize("args", [("recall", "search", "foo"), ("recall", "search", "foo", "--oneline")])
def test_recall_with_the_server_not_running_exits_4_with_one_line(args: tuple[str, ...], tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    env = clean_env(DOVECOTE_ENDPOINT=endpoint, DOVECOTE_TOKEN="dvc_x_y")
    line = one_line(run(env, *args, cwd=tmp_path), 4)
    assert line == f"cannot reach Dovecote at {endpoint}: connection refused; is `make dev` running?"


def test_a_recall_api_error_is_one_line_with_its_details(dev_runtime: dict[str, Any]) -> None:
    line = stderr_line(cli(dev_runtime, "recall", "search", "foo", "--limit", "1000"), 1)
    assert line.startswith("error: 400 invalid_argument: limit must be between") and '"maximum":100' in line
