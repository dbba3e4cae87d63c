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
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import ROOT
from tests.e2e.conftest import bearer, start_dev


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def msg(text: str) -> dict[str, Any]:
    return {"id": uid("m"), "parts": [{"media_type": "text/plain", "text": text}]}


def transcript(session_id: str, texts: list[str]) -> dict[str, Any]:
    return {
        "source": "e2e",
        "project": "persist",
        "session_id": session_id,
        "messages": [
            {
                "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session_id}/{i}")),
                "role": "user" if i % 2 == 0 else "assistant",
                "text": text,
                "timestamp": f"2025-06-01T00:{i:02d}:00Z",
            }
            for i, text in enumerate(texts)
        ],
    }


def test_everything_survives_a_clean_restart(tmp_path: Path) -> None:
    data = tmp_path / "state"
    big = hashlib.sha256(b"persist").digest() * 32_768  # 1 MiB: over the inline limit, its body lives in S3
    digest = hashlib.sha256(big).hexdigest()
    word = "w" + uuid.uuid4().hex[:10]
    session_id = "persist-" + uuid.uuid4().hex
    scope, write_id, tid = uid("scope"), uid("w"), uid("t")
    with start_dev(tmp_path, "--data", str(data)) as dev:
        caller, worker = bearer(dev["tokens"]["caller"]), bearer(dev["tokens"]["worker"])
        with httpx.Client(base_url=dev["endpoint"], timeout=30) as http:
            coords = {"key": "k", "run": 1, "name": "big"}
            upload = http.post("/v1/notes/uploads", json={**coords, "size": len(big), "sha256": digest}, headers=caller)
            assert upload.status_code == 200, upload.text
            # The presigned PUT goes to moto directly: journaled by the same middleware.
            url, headers = upload.json()["upload_url"], upload.json()["upload_headers"]  # exactly as signed
            assert httpx.put(url, content=big, headers=headers, timeout=60).status_code == 200
            put = http.put("/v1/notes", json={**coords, "upload": True, "sha256": digest}, headers=caller)
            assert put.status_code == 200, put.text
            ref = put.json()["ref"]
            body = {"command_id": uid("c"), "workspace": "ws", "id": tid, "context": uid("x"), "message": msg("hi")}
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
                "/v1/transcripts", json=transcript(session_id, ["hello", f"the {word} rollout"]), headers=caller
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
    acknowledged: list[tuple[str, str]] = []
    lock = threading.Lock()
    stop = threading.Event()
    big = hashlib.sha256(b"crash").digest() * 16_384  # 512 KiB: an S3 body version a DynamoDB item names
    with start_dev(tmp_path, "--data", str(data)) as dev:
        caller = bearer(dev["tokens"]["caller"])
        # Before the burst, since the last snapshot: a presigned upload (straight to moto) + commit.
        with httpx.Client(base_url=dev["endpoint"], timeout=30) as http:
            coords = {"key": "crash", "run": 1, "name": "big"}
            sha = hashlib.sha256(big).hexdigest()
            upload = http.post("/v1/notes/uploads", json={**coords, "size": len(big), "sha256": sha}, headers=caller)
            url, headers = upload.json()["upload_url"], upload.json()["upload_headers"]  # exactly as signed
            assert httpx.put(url, content=big, headers=headers, timeout=60).status_code == 200
            committed = http.put("/v1/notes", json={**coords, "upload": True, "sha256": sha}, headers=caller)
            assert committed.status_code == 200, committed.text
            big_ref = committed.json()["ref"]

        def burst(n: int) -> None:
            with httpx.Client(base_url=dev["endpoint"], timeout=10) as http:
                i = 0
                while not stop.is_set():
                    i += 1
                    try:
                        if i % 2:
                            name = f"n{n}-{i}"
                            r = http.put(
                                "/v1/notes", json={"key": "burst", "run": 1, "name": name, "text": name}, headers=caller
                            )
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
                            r = http.post("/v1/tasks", json=body, headers=caller)
                            kind = ("task", tid) if r.status_code == 201 else None
                    except (httpx.TransportError, ValueError):
                        continue  # the process died mid-request: not acknowledged
                    if kind is not None:
                        with lock:
                            acknowledged.append(kind)

        threads = [threading.Thread(target=burst, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while len(acknowledged) < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
        dev["process"].send_signal(signal.SIGKILL)
        dev["process"].wait()
        stop.set()
        for thread in threads:
            thread.join()
    assert len(acknowledged) >= 60
    with start_dev(tmp_path, "--data", str(data)) as again:
        caller = bearer(again["tokens"]["caller"])
        with httpx.Client(base_url=again["endpoint"], timeout=30) as http:
            missing = []
            for kind, key in acknowledged:
                path = f"/v1/notes/{key}" if kind == "note" else f"/v1/tasks/{key}"
                if http.get(path, headers=caller).status_code != 200:
                    missing.append((kind, key))
            assert missing == []
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
    acknowledged: list[tuple[str, str]] = []
    lock = threading.Lock()
    stop = threading.Event()
    with start_dev(tmp_path, "--data", str(data), settings=settings) as dev:
        caller = bearer(dev["tokens"]["caller"])

        def burst(n: int) -> None:
            with httpx.Client(base_url=dev["endpoint"], timeout=10) as http:
                i = 0
                while not stop.is_set():
                    i += 1
                    try:
                        if i % 3:
                            name = f"c{n}-{i}"
                            body = {"key": "compact", "run": 1, "name": name, "text": name * 20}
                            r = http.put("/v1/notes", json=body, headers=caller)
                            kind = ("note", r.json()["ref"]) if r.status_code == 200 else None
                        else:
                            tid = uid("t")
                            body = {"command_id": uid("c"), "workspace": "ws", "id": tid, "context": "c"}
                            r = http.post("/v1/tasks", json={**body, "message": msg("x")}, headers=caller)
                            kind = ("task", tid) if r.status_code == 201 else None
                    except (httpx.TransportError, ValueError):
                        continue
                    if kind is not None:
                        with lock:
                            acknowledged.append(kind)

        threads = [threading.Thread(target=burst, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        pid = dev["process"].pid
        deadline = time.monotonic() + 120
        child: list[int] = []
        while time.monotonic() < deadline:
            if len(acknowledged) >= 150:
                child = _children(pid)
                if child:
                    break
            time.sleep(0.005)
        dev["process"].send_signal(signal.SIGKILL)  # while the compaction's child writes
        dev["process"].wait()
        stop.set()
        for thread in threads:
            thread.join()
        log = dev["log"].read_text()
    assert child, "no background compaction was running to kill -9 during"
    assert "compacted in the background" in log  # earlier ones finished while the burst went on
    gone = time.monotonic() + 10
    while time.monotonic() < gone and Path(f"/proc/{child[0]}").exists():
        time.sleep(0.05)
    assert not Path(f"/proc/{child[0]}").exists() or "zombie" in Path(f"/proc/{child[0]}/status").read_text()

    def all_there(endpoint: str, token: str) -> list[tuple[str, str]]:
        with httpx.Client(base_url=endpoint, timeout=30, headers=bearer(token)) as http:
            return [
                (kind, key)
                for kind, key in acknowledged
                if http.get(f"/v1/notes/{key}" if kind == "note" else f"/v1/tasks/{key}").status_code != 200
            ]

    with start_dev(tmp_path, "--data", str(data), settings=settings) as again:
        assert all_there(again["endpoint"], again["tokens"]["caller"]) == []
        # The replayed journals are folded into a snapshot in the background at once: kill -9 after it.
        deadline = time.monotonic() + 120
        while "compacted in the background" not in again["log"].read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "compacted in the background" in again["log"].read_text()
        again["process"].send_signal(signal.SIGKILL)
        again["process"].wait()
    with start_dev(tmp_path, "--data", str(data), settings=settings) as third:
        assert all_there(third["endpoint"], third["tokens"]["caller"]) == []
        restored = next(line for line in third["log"].read_text().splitlines() if "restored" in line)
        replayed = int(restored.split(" journaled requests replayed")[0].rsplit(" ", 1)[-1])
        # Only what came after the last compaction (the janitor catching up on the burst's stream
        # records, here): the burst itself is in the snapshot.
        assert replayed < len(acknowledged) // 2, restored
