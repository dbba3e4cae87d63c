"""Task streams against `dovecote dev` (docs/guides/streams.md): the stream is live, ends with the
task, resumes after Last-Event-ID, keeps authorities apart (404 before any byte), survives a restart
of `dovecote dev` mid-stream (the SDK resumes and misses nothing), and the CLI's `tasks watch` prints
each event and exits 0 when the task ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from dovecote.client import DovecoteClient
from dovecote.platform import sse
from tests.conftest import ROOT
from tests.e2e.conftest import _free_port, bearer, local_http, start_dev


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def clients(runtime: dict[str, Any]) -> tuple[DovecoteClient, DovecoteClient]:
    endpoint, tokens = runtime["endpoint"], runtime["tokens"]
    return DovecoteClient(endpoint, tokens["caller"]), DovecoteClient(endpoint, tokens["worker"])


class Reader(threading.Thread):
    """Reads one stream's raw SSE messages in the background, noting when each arrived."""

    def __init__(self, endpoint: str, token: str, task_id: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(daemon=True)
        self.url = f"{endpoint}/v1/tasks/{task_id}/stream"
        self.headers = {**bearer(token), **(headers or {})}
        self.messages: list[tuple[float, sse.Message]] = []
        self.status = 0
        self.opened = threading.Event()

    def run(self) -> None:
        with httpx.stream("GET", self.url, headers=self.headers, timeout=30) as response:
            self.status = response.status_code
            self.opened.set()
            for message in sse.parse(response.iter_lines()):
                self.messages.append((time.monotonic(), message))

    def events(self) -> list[sse.Message]:
        return [m for _, m in self.messages if m.event != "lease"]


def test_the_stream_is_live_and_ends_with_the_task(dev_runtime: dict[str, Any]) -> None:
    caller, worker = clients(dev_runtime)
    task_id = uid("t")
    caller.create_task(task_id, "stream me")
    reader = Reader(dev_runtime["endpoint"], dev_runtime["tokens"]["caller"], task_id)
    reader.start()
    assert reader.opened.wait(10) and reader.status == 200
    assignment = worker.acquire(task_id)
    task = worker.accept(task_id, assignment["task"]["revision"], assignment["fence"])
    deadline = time.monotonic() + 10
    while len(reader.events()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    # Live: the accept arrived while the task was still working.
    assert [m.event for m in reader.events()] == ["task_submitted", "task_accepted"]
    assert reader.is_alive()
    worker.complete(task_id, task["revision"], assignment["fence"], "done")
    reader.join(10)
    assert not reader.is_alive(), "the stream did not end after the terminal event"
    events = reader.events()
    assert [m.event for m in events] == ["task_submitted", "task_accepted", "task_completed"]
    # id: the sequence; data: the event as the events route pages it.
    assert [m.json() for m in events] == caller.events(task_id)["items"]
    assert [m.id for m in events] == ["1", "2", "3"]
    leases = [m for _, m in reader.messages if m.event == "lease"]
    assert leases and all(m.id is None for m in leases)
    assert leases[0].json() == {"lease": None, "last_lease": None}


def test_last_event_id_and_after_resume_after_that_sequence(dev_runtime: dict[str, Any], http: httpx.Client) -> None:
    caller, worker = clients(dev_runtime)
    task_id = uid("t")
    caller.create_task(task_id, "resume me")
    assignment = worker.acquire(task_id)
    task = worker.accept(task_id, assignment["task"]["revision"], assignment["fence"])
    worker.complete(task_id, task["revision"], assignment["fence"], "done")
    auth = bearer(dev_runtime["tokens"]["caller"])
    url = f"/v1/tasks/{task_id}/stream"
    for headers, params, expected in (
        ({"Last-Event-ID": "1"}, {}, ["2", "3"]),
        ({}, {"after": "2"}, ["3"]),
        ({"Last-Event-ID": "2"}, {"after": "0"}, ["3"]),  # the header wins: EventSource resends it
        ({"Last-Event-ID": "3"}, {}, []),
    ):
        answer = http.get(url, headers={**auth, **headers}, params=params)
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
        messages = list(sse.parse(answer.text.split("\n")))
        assert messages[0].event == "lease" and messages[0].json()["last_lease"]["reason"] == "task_ended"
        assert [m.id for m in messages[1:]] == expected
    bad = http.get(url, headers={**auth, "Last-Event-ID": "9"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_argument"
    assert http.get(url, headers={**auth, "Last-Event-ID": "x"}).json()["error"]["code"] == "invalid_argument"


def test_authorities_are_apart_and_refusals_come_before_any_stream(
    dev_runtime: dict[str, Any], other_authority: dict[str, dict[str, str]], http: httpx.Client
) -> None:
    caller, _ = clients(dev_runtime)
    task_id = uid("t")
    caller.create_task(task_id, "mine")
    url = f"/v1/tasks/{task_id}/stream"
    other = http.get(url, headers=other_authority["caller"])
    assert other.status_code == 404 and other.headers["content-type"] == "application/json"
    assert other.json()["error"]["code"] == "not_found"
    assert http.get(url).status_code == 401
    assert http.get(url, headers=bearer("dvc_nope_nope")).status_code == 403
    # The SDK raises the API's error, as for every other read.
    stranger = DovecoteClient(dev_runtime["endpoint"], other_authority["caller"]["Authorization"].split()[1])
    try:
        next(stranger.follow(task_id))
    except Exception as exc:  # noqa: BLE001 - the error's code is the assertion
        assert getattr(exc, "code", "") == "not_found"
    else:
        raise AssertionError("another authority's task was streamed")


def test_the_cli_watches_a_task_until_it_ends(dev_runtime: dict[str, Any]) -> None:
    caller, worker = clients(dev_runtime)
    task_id = uid("t")
    caller.create_task(task_id, "watch me")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")} | {
        "DOVECOTE_ENDPOINT": dev_runtime["endpoint"],
        "DOVECOTE_TOKEN": dev_runtime["tokens"]["caller"],
        "XDG_CONFIG_HOME": str(Path(os.environ.get("TMPDIR", "/tmp")) / "dovecote-tests-no-config"),
    }
    watch = subprocess.Popen(
        [sys.executable, "-m", "dovecote.cli", "tasks", "watch", task_id, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
        text=True,
    )
    wait = subprocess.Popen(
        [sys.executable, "-m", "dovecote.cli", "tasks", "wait", task_id, "--json", "--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
        text=True,
    )
    assert watch.stdout is not None
    first = json.loads(watch.stdout.readline())  # printed while the task is still submitted
    assert first["type"] == "task_submitted" and watch.poll() is None
    assignment = worker.acquire(task_id)
    task = worker.accept(task_id, assignment["task"]["revision"], assignment["fence"])
    worker.complete(task_id, task["revision"], assignment["fence"], "done")
    out, err = watch.communicate(timeout=30)
    assert watch.returncode == 0, err
    assert [json.loads(line)["type"] for line in out.splitlines()] == ["task_accepted", "task_completed"]
    waited, err = wait.communicate(timeout=30)
    assert wait.returncode == 0, err
    assert json.loads(waited)["task"]["state"] == "completed"


def test_a_stream_survives_a_restart_of_dovecote_dev(tmp_path: Path) -> None:
    """The SDK's follow is cut when `dovecote dev` stops, reconnects with Last-Event-ID once it is
    back on the same port, and sees every event once: the log is durable, no queue was lost."""
    port = _free_port()
    data = tmp_path / "data"
    got: list[dict[str, Any]] = []
    with start_dev(tmp_path / "one", "--data", str(data), port=port) as runtime:
        caller, worker = clients(runtime)
        task_id = uid("t")
        caller.create_task(task_id, "outlive a restart")
        follower = DovecoteClient(runtime["endpoint"], runtime["tokens"]["caller"], backoff=0.5, max_backoff=3.0)
        thread = threading.Thread(target=lambda: got.extend(follower.follow(task_id, max_reconnects=40)), daemon=True)
        thread.start()
        assignment = worker.acquire(task_id)
        task = worker.accept(task_id, assignment["task"]["revision"], assignment["fence"])
        deadline = time.monotonic() + 10
        while len(got) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [e["type"] for e in got] == ["task_submitted", "task_accepted"]
    assert thread.is_alive(), "the follower gave up while the runtime was down"
    with start_dev(tmp_path / "two", "--data", str(data), port=port) as runtime:
        _, worker = clients(runtime)
        worker.request_input(task_id, task["revision"], assignment["fence"], "a question")
        reply = DovecoteClient(runtime["endpoint"], runtime["tokens"]["caller"])
        reply.reply(task_id, task["revision"] + 1, "an answer")
        worker.complete(task_id, task["revision"] + 2, assignment["fence"], "done")
        thread.join(60)
        assert not thread.is_alive()
        every = reply.events(task_id)["items"]
    assert got == every  # each event once, in order, none lost across the restart
    assert [e["sequence"] for e in got] == list(range(1, len(every) + 1))


def test_the_stream_route_is_local_http_too(dev_runtime: dict[str, Any]) -> None:
    """A stream of an unknown task from a worker token: 404 JSON, as any read."""
    with local_http(dev_runtime["endpoint"], timeout=10) as http:
        answer = http.get("/v1/tasks/no-such-task/stream", headers=bearer(dev_runtime["tokens"]["worker"]))
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
