"""`dovecote dev --data DIR` keeps its state across restarts (clean stop and kill -9), with the same
dev tokens; `--fresh` starts empty. Real `dovecote dev` processes, real HTTP."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import ROOT
from tests.e2e.conftest import bearer, start_dev
from tests.support.notes import put_uploaded_note
from tests.support.transcripts import transcript


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def msg(text: str) -> dict[str, Any]:
    return {"id": uid("m"), "parts": [{"media_type": "text/plain", "text": text}]}


class Burst:
    """Four threads writing to a runtime until `kill`: notes, and a task every `task_every`-th write.
    `acknowledged` holds each write the runtime answered, as (kind, key); every restart must keep them."""

    def __init__(
        self, dev: dict[str, Any], *, key: str, task_every: int, note_text: Callable[[str], str] = str
    ) -> None:
        self.acknowledged: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._key, self._task_every, self._note_text = key, task_every, note_text
        self._threads = [threading.Thread(target=self._write, args=(dev, n)) for n in range(4)]
        for thread in self._threads:
            thread.start()

    def _write(self, dev: dict[str, Any], n: int) -> None:
        caller = bearer(dev["tokens"]["caller"])
        with httpx.Client(base_url=dev["endpoint"], timeout=10, headers=caller) as http:
            i = 0
            while not self._stop.is_set():
                i += 1
                try:
                    if i % self._task_every:
                        name = f"{self._key}{n}-{i}"
                        body = {"key": self._key, "run": 1, "name": name, "text": self._note_text(name)}
                        r = http.put("/v1/notes", json=body)
                        kind = ("note", r.json()["ref"]) if r.status_code == 200 else None
                    else:
                        tid = uid("t")
                        body = {
                            "command_id": uid("c"),
                            "workspace": "ws",
                            "id": tid,
                            "context": "c",
                            "message": msg("x"),
                        }
                        r = http.post("/v1/tasks", json=body)
                        kind = ("task", tid) if r.status_code == 201 else None
                except (httpx.TransportError, ValueError):
                    continue  # the process died mid-request: not acknowledged
                if kind is not None:
                    with self._lock:
                        self.acknowledged.append(kind)

    def kill(self, dev: dict[str, Any]) -> None:
        """kill -9 the runtime under the writes, then stop the writers."""
        dev["process"].send_signal(signal.SIGKILL)
        dev["process"].wait()
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def lost(self, dev: dict[str, Any]) -> list[tuple[str, str]]:
        """The acknowledged writes the (restarted) runtime `dev` does not have."""
        with httpx.Client(base_url=dev["endpoint"], timeout=30, headers=bearer(dev["tokens"]["caller"])) as http:
            return [
                (kind, key)
                for kind, key in self.acknowledged
                if http.get(f"/v1/notes/{key}" if kind == "note" else f"/v1/tasks/{key}").status_code != 200
            ]


def test_everything_survives_a_clean_restart(tmp_path: Path) -> None:
    data = tmp_path / "state"
    big = hashlib.sha256(b"persist").digest() * 32_768  # 1 MiB: over the inline limit, its body lives in S3
    word = "w" + uuid.uuid4().hex[:10]
    session_id = "persist-" + uuid.uuid4().hex
    scope, write_id, tid = uid("scope"), uid("w"), uid("t")
    with start_dev(tmp_path, "--data", str(data)) as dev:
        caller, worker = bearer(dev["tokens"]["caller"]), bearer(dev["tokens"]["worker"])
        with httpx.Client(base_url=dev["endpoint"], timeout=30) as http:
            coords = {"key": "k", "run": 1, "name": "big"}
            # The presigned PUT goes to moto directly: journaled by the same middleware.
            ref = put_uploaded_note(http, caller, coords, big).json()["ref"]
            body = {"command_id": uid("c"), "workspace": "ws", "id": tid, "context": uid("x"), "message": msg("hi")}
            # The grant stays unaccepted across the restart: no accept timeout may fence it meanwhile,
            # however slowly a loaded machine runs the two starts.
            body["accept_timeout_seconds"] = 0
            assert http.post("/v1/tasks", json=body, headers=caller).status_code == 201
            lease = http.post(f"/v1/tasks/{tid}/lease", json={"command_id": uid("c")}, headers=worker)
            assert lease.status_code == 200, lease.text
            held = http.get(f"/v1/tasks/{tid}/lease", headers=worker).json()
            task = http.get(f"/v1/tasks/{tid}", headers=caller).json()["task"]
            submitted = http.post(
                "/v1/memory/writes", json={"id": write_id, "scope": scope, "content": "kept"}, headers=caller
            )
            assert submitted.status_code == 202, submitted.text
            status = http.get(f"/v1/memory/writes/{write_id}", params={"wait": 20}, headers=caller).json()
            assert status["status"] == "complete", status
            ingested = http.post(
                "/v1/transcripts",
                json=transcript(session_id, ["hello", f"the {word} rollout"], "persist"),
                headers=caller,
            )
            assert ingested.status_code == 200, ingested.text
            assert http.get("/v1/recall/search", params={"q": word}, headers=caller).json()["results"]
            tokens = dev["tokens"]
    # start_dev sent SIGTERM: a clean stop compacts the journal into the snapshot (if the stop
    # outlasts start_dev's 10 s it is killed, and the restart replays the journal instead).
    with start_dev(tmp_path, "--data", str(data)) as again:
        assert again["tokens"] == tokens  # an MCP client configured once keeps working
        caller, worker = bearer(tokens["caller"]), bearer(tokens["worker"])
        with httpx.Client(base_url=again["endpoint"], timeout=30) as http:
            got = http.get(f"/v1/notes/{ref}", headers=caller).json()
            assert httpx.get(got["download_url"], timeout=60).content == big
            after = http.get(f"/v1/tasks/{tid}", headers=caller).json()["task"]
            assert after["revision"] == task["revision"] and after["state"] == task["state"]
            assert http.get(f"/v1/tasks/{tid}/lease", headers=worker).json() == held
            items = http.get("/v1/memory", params={"scope": scope}, headers=caller).json()["items"]
            assert [(m["id"], m["content"]) for m in items] == [(write_id, "kept")]
            hits = http.get("/v1/recall/search", params={"q": word}, headers=caller).json()["results"]
            assert hits and hits[0]["session_id"] == session_id


def test_acknowledged_writes_survive_kill_9(tmp_path: Path) -> None:
    data = tmp_path / "state"
    big = hashlib.sha256(b"crash").digest() * 16_384  # 512 KiB: an S3 body version a DynamoDB item names
    with start_dev(tmp_path, "--data", str(data)) as dev:
        caller = bearer(dev["tokens"]["caller"])
        # Before the burst, since the last snapshot: a presigned upload (straight to moto) + commit.
        with httpx.Client(base_url=dev["endpoint"], timeout=30) as http:
            coords = {"key": "crash", "run": 1, "name": "big"}
            big_ref = put_uploaded_note(http, caller, coords, big).json()["ref"]

        burst = Burst(dev, key="burst", task_every=2)
        deadline = time.monotonic() + 30
        while len(burst.acknowledged) < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
        burst.kill(dev)
    assert len(burst.acknowledged) >= 60
    with start_dev(tmp_path, "--data", str(data)) as again:
        assert burst.lost(again) == []
        caller = bearer(again["tokens"]["caller"])
        with httpx.Client(base_url=again["endpoint"], timeout=30) as http:
            got = http.get(f"/v1/notes/{big_ref}", headers=caller).json()
            assert httpx.get(got["download_url"], timeout=60).content == big
        assert "journaled requests replayed" in again["log"].read_text()


def test_fresh_starts_empty(tmp_path: Path) -> None:
    data = tmp_path / "state"
    with start_dev(tmp_path, "--data", str(data)) as dev:
        caller = bearer(dev["tokens"]["caller"])
        put = httpx.put(
            dev["endpoint"] + "/v1/notes", json={"key": "f", "run": 1, "name": "n", "text": "x"}, headers=caller
        )
        assert put.status_code == 200
        ref, tokens = put.json()["ref"], dev["tokens"]
        # A second dev on the same DIR is refused, and its --fresh wipes nothing.
        second = subprocess.run(
            [sys.executable, "-m", "dovecote.cli", "dev", "--port", "0", "--data", str(data), "--fresh"]
            + ["--tokens-file", str(tmp_path / "second.json")],
            capture_output=True,
            timeout=120,
            cwd=ROOT,
        )
        assert second.returncode == 2 and b"another dovecote dev is using" in second.stderr
        assert httpx.get(f"{dev['endpoint']}/v1/notes/{ref}", headers=caller).status_code == 200
        # Another DIR on the same port: one error line naming the way out, and no DIR left behind.
        port = int(dev["endpoint"].rsplit(":", 1)[1])
        third = subprocess.run(
            [sys.executable, "-m", "dovecote.cli", "dev", "--port", str(port), "--data", str(tmp_path / "third")]
            + ["--tokens-file", str(tmp_path / "third.json"), "--write-profile", ""],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
        assert third.returncode == 4 and third.stderr.count("\n") == 1, third.stderr
        assert third.stderr.startswith(f"error: port {port} on 127.0.0.1 is in use") and "--port" in third.stderr
        assert not (tmp_path / "third").exists() and not (tmp_path / "third.json").exists()
    with start_dev(tmp_path, "--data", str(data), "--fresh") as fresh:
        assert fresh["tokens"] != tokens
        assert (
            httpx.get(f"{fresh['endpoint']}/v1/notes/{ref}", headers=bearer(fresh["tokens"]["caller"])).status_code
            == 404
        )
        assert httpx.get(f"{fresh['endpoint']}/v1/notes/{ref}", headers=bearer(tokens["caller"])).status_code in (
            401,
            403,
        )


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def test_kill_9_during_and_after_background_compactions_loses_nothing(tmp_path: Path) -> None:
    """The runtime snapshots in a forked child once the journal passes 24 KB (here: a few dozen
    writes); a kill -9 while that child writes, and another right after a compaction, leave every
    acknowledged write and a short replay. The child dies with the runtime (it never writes into a
    DIR reopened since)."""
    data = tmp_path / "state"
    never = "1000000"  # only the size triggers
    settings = {
        "DOVECOTE_DEV_COMPACT_BYTES": "24576",
        "DOVECOTE_DEV_COMPACT_REPLAY_S": never,
        "DOVECOTE_DEV_COMPACT_RECORDS": never,
        "DOVECOTE_DEV_COMPACT_AGE_S": never,
    }
    with start_dev(tmp_path, "--data", str(data), settings=settings) as dev:
        burst = Burst(dev, key="compact", task_every=3, note_text=lambda name: name * 20)
        pid = dev["process"].pid
        deadline = time.monotonic() + 120
        child: list[int] = []
        while time.monotonic() < deadline:
            if len(burst.acknowledged) >= 150:
                child = _children(pid)
                if child:
                    break
            time.sleep(0.005)
        burst.kill(dev)  # while the compaction's child writes
        log = dev["log"].read_text()
    assert child, "no background compaction was running to kill -9 during"
    assert "compacted in the background" in log  # earlier ones finished while the burst went on
    gone = time.monotonic() + 10
    while time.monotonic() < gone and Path(f"/proc/{child[0]}").exists():
        time.sleep(0.05)
    assert not Path(f"/proc/{child[0]}").exists() or "zombie" in Path(f"/proc/{child[0]}/status").read_text()

    with start_dev(tmp_path, "--data", str(data), settings=settings) as again:
        assert burst.lost(again) == []
        # The replayed journals are folded into a snapshot in the background at once: kill -9 after it.
        deadline = time.monotonic() + 120
        while "compacted in the background" not in again["log"].read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "compacted in the background" in again["log"].read_text()
        again["process"].send_signal(signal.SIGKILL)
        again["process"].wait()
    with start_dev(tmp_path, "--data", str(data), settings=settings) as third:
        assert burst.lost(third) == []
        restored = next(line for line in third["log"].read_text().splitlines() if "restored" in line)
        replayed = int(restored.split(" journaled requests replayed")[0].rsplit(" ", 1)[-1])
        # Only what came after the last compaction (the janitor catching up on the burst's stream
        # records, here): the burst itself is in the snapshot.
        assert replayed < len(burst.acknowledged) // 2, restored


def test_a_data_dir_written_under_another_claim_shard_count_claims_oldest_first(tmp_path: Path) -> None:
    """A DIR written when the default was 16 claim shards (or with DOVECOTE_CLAIM_SHARDS=16), restarted
    with the default of 1: every claimable task is still claimed, strictly oldest first, because
    the start moves the claimable entries to the new layout before it serves."""
    from dovecote.tasks.storage import FLEET_CLAIM_SHARDS, claim_shard

    data = tmp_path / "state"
    prefix = uid("old")
    ids = [f"{prefix}-{n}" for n in range(5)]
    with start_dev(tmp_path, "--data", str(data), settings={"DOVECOTE_CLAIM_SHARDS": str(FLEET_CLAIM_SHARDS)}) as dev:
        caller = bearer(dev["tokens"]["caller"])
        authority = httpx.get(dev["endpoint"] + "/v1/whoami", headers=caller, timeout=30).json()["authority"]
        with httpx.Client(base_url=dev["endpoint"], timeout=30, headers=caller) as http:
            for task_id in ids:
                body = {"command_id": uid("c"), "workspace": "ws", "id": task_id, "context": "c", "message": msg("go")}
                assert http.post("/v1/tasks", json=body).status_code == 201
    assert sum(claim_shard(authority, t, FLEET_CLAIM_SHARDS) != 0 for t in ids) >= 2  # most lie outside shard 0
    with start_dev(tmp_path, "--data", str(data)) as again:
        worker = bearer(again["tokens"]["worker"])
        with httpx.Client(base_url=again["endpoint"], timeout=30, headers=worker) as http:
            claimed = []
            for _ in ids:
                response = http.post("/v1/leases/claim", json={"command_id": uid("c")})
                assert response.status_code == 200, response.text
                claimed.append(response.json()["assignment"]["task"]["id"])
            assert http.post("/v1/leases/claim", json={"command_id": uid("c")}).status_code == 404
    assert claimed == ids
