"""The `dovecote` CLI against `dovecote dev`, one test per command group, every verb: notes (stdin,
files, large streamed bodies, refs or coordinates, full refs in tables), tasks (TEXT, --file, stdin,
wait), worker (claim --wait, heartbeat, release, fence, the commands with --rev/--fence), tokens,
--json on every command (pages with their cursor), --version and health."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from dovecote.notes.limits import INLINE_LIMIT
from dovecote.notes.model import note_ref
from tests.conftest import ROOT
from tests.support.authorities import Authority, fresh_authority

REF = re.compile(r"\b[0-9a-f]{64}\b")


def run(env: dict[str, str], *args: str, stdin: bytes = b"", cwd: Path = ROOT) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "dovecote.cli", *args], input=stdin, capture_output=True, env=env, cwd=cwd, timeout=120
    )


# No profile of the user's: these tests name their endpoint and token.
NO_PROFILES = {"XDG_CONFIG_HOME": str(Path(tempfile.gettempdir()) / "dovecote-tests-no-config")}


def base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")} | {"COLUMNS": "200"} | NO_PROFILES


def cli(
    dev_runtime: dict[str, Any], *args: str, stdin: bytes = b"", role: str = "caller"
) -> subprocess.CompletedProcess[bytes]:
    env = base_env() | {"DOVECOTE_ENDPOINT": dev_runtime["endpoint"], "DOVECOTE_TOKEN": dev_runtime["tokens"][role]}
    return run(env, *args, stdin=stdin)


def as_json(result: subprocess.CompletedProcess[bytes]) -> Any:
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---- notes --------------------------------------------------------------------------------------


def test_notes_put_get_ls_rm(dev_runtime: dict[str, Any], tmp_path: Path) -> None:
    key = f"cli:{uuid.uuid4().hex[:8]}"
    put = cli(dev_runtime, "notes", "put", key, "1", "plan", "--author", "claude", "--json", stdin=b"from stdin\n")
    assert as_json(put)["ref"] == note_ref(key, 1, "plan", "claude")
    body = tmp_path / "critique.bin"
    body.write_bytes(b"\x00\xffbinary")
    assert cli(dev_runtime, "notes", "put", key, "1", "critique", "-f", str(body)).returncode == 0
    dash = cli(dev_runtime, "notes", "put", key, "1", "dash", "--file", "-", "--json", stdin=b"dash")
    assert as_json(dash)["content_type"] == "text/plain; charset=utf-8"
    # KEY RUN NAME positionals, as for put; a lone ref still works.
    got = cli(dev_runtime, "notes", "get", key, "1", "plan", "--author", "claude")
    assert got.returncode == 0 and got.stdout == b"from stdin\n"
    assert cli(dev_runtime, "notes", "get", note_ref(key, 1, "critique", "")).stdout == b"\x00\xffbinary"
    meta = as_json(cli(dev_runtime, "notes", "get", key, "1", "critique", "--json"))
    assert meta["body_b64"] and meta["content_type"] == "application/octet-stream"
    human = cli(dev_runtime, "notes", "get", key, "1", "critique", "--meta")
    assert human.returncode == 0 and b"sha256" in human.stdout and b"binary" not in human.stdout

    page = as_json(cli(dev_runtime, "notes", "ls", "--key", key, "--limit", "1", "--json"))
    assert len(page["items"]) == 1 and page["cursor"]  # a page, with its cursor
    nxt = as_json(cli(dev_runtime, "notes", "ls", "--key", key, "--limit", "1", "--cursor", page["cursor"], "--json"))
    assert nxt["items"][0]["ref"] > page["items"][0]["ref"]
    every = as_json(cli(dev_runtime, "notes", "list", "--key", key, "--limit", "1", "--all", "--json"))
    assert sorted(i["name"] for i in every["items"]) == ["critique", "dash", "plan"] and not every["cursor"]

    # The table prints whole refs, and every ref it prints works in `rm`.
    table = cli(dev_runtime, "notes", "ls", "--key", key)
    assert table.returncode == 0
    refs = REF.findall(table.stdout.decode())
    assert sorted(refs) == sorted(i["ref"] for i in every["items"])
    plan = note_ref(key, 1, "plan", "claude")
    for ref in refs:
        if ref != plan:
            removed = cli(dev_runtime, "notes", "rm", ref)
            assert removed.returncode == 0 and ref.encode() in removed.stdout
    by_coordinates = as_json(cli(dev_runtime, "notes", "delete", key, "1", "plan", "--author", "claude", "--json"))
    assert by_coordinates == {"ref": note_ref(key, 1, "plan", "claude"), "deleted": True}
    missing = cli(dev_runtime, "notes", "rm", note_ref(key, 1, "plan", "claude"))
    assert missing.returncode == 1 and missing.stderr.decode().startswith("error: 404 not_found")
    bad = cli(dev_runtime, "notes", "get", "plan")
    assert bad.returncode == 2 and b"not a ref" in bad.stderr


def test_a_large_note_streams_both_ways_and_keeps_its_content_type(dev_runtime: dict[str, Any], tmp_path: Path) -> None:
    key = uid("big")
    source = tmp_path / "table.csv"
    with source.open("wb") as handle:
        for i in range(INLINE_LIMIT // 8):
            handle.write(f"{i:07d}\n".encode())
    note = as_json(cli(dev_runtime, "notes", "put", key, "1", "table", "--file", str(source), "--json"))
    assert note["size"] == source.stat().st_size and note["content_type"] == "text/csv"
    target = tmp_path / "copy.csv"
    got = cli(dev_runtime, "notes", "get", key, "1", "table", "-o", str(target))
    assert got.returncode == 0, got.stderr
    assert target.read_bytes() == source.read_bytes()
    assert cli(dev_runtime, "notes", "get", key, "1", "table").stdout == source.read_bytes()
    piped = cli(dev_runtime, "notes", "put", key, "1", "piped", "--json", stdin=source.read_bytes())
    assert as_json(piped)["content_type"] == "text/plain; charset=utf-8"  # undeclared UTF-8 text, on upload too


# ---- tokens, version, health --------------------------------------------------------------------


def create_token(
    dev_runtime: dict[str, Any], role: str, *options: str, by: str = "admin"
) -> subprocess.CompletedProcess[bytes]:
    """`dovecote tokens create` in the dev authority, run with the `by` token."""
    return cli(dev_runtime, "tokens", "create", "--authority", "dev", "--role", role, *options, role=by)


def test_tokens_create_with_the_admin_token(dev_runtime: dict[str, Any]) -> None:
    out = as_json(create_token(dev_runtime, "worker", "--worker", "w9", "--json"))
    assert out["worker"] == "w9" and out["token"].startswith("dvc_")
    human = create_token(dev_runtime, "caller")
    assert human.returncode == 0 and b"dvc_" in human.stdout and b"shown once" in human.stderr
    denied = create_token(dev_runtime, "caller", by="caller")
    assert denied.returncode == 1 and denied.stderr.decode().startswith("error: 403 forbidden")
    # Without --authority: the admin's own (the only one the API takes), read from whoami.
    own = as_json(cli(dev_runtime, "tokens", "create", "--role", "caller", "--json", role="admin"))
    assert own["authority"] == "dev" and own["token"].startswith("dvc_")


def test_tokens_ls_and_revoke_and_the_revoked_token_is_denied(dev_runtime: dict[str, Any]) -> None:
    minted = as_json(create_token(dev_runtime, "caller", "--agent", "bot", "--json"))
    assert minted["agent"] == "bot" and minted["token_id"] in minted["token"]
    env_token = {**dev_runtime, "tokens": {**dev_runtime["tokens"], "bot": minted["token"]}}
    assert cli(env_token, "notes", "put", "tok:k", "1", "n", "--author", "bot", stdin=b"x", role="bot").returncode == 0
    other = cli(env_token, "notes", "put", "tok:k", "1", "n", "--author", "eve", stdin=b"x", role="bot")
    assert other.returncode == 1 and b"forbidden" in other.stderr

    listed = as_json(cli(dev_runtime, "tokens", "list", "--all", "--json", role="admin"))
    mine = [r for r in listed["items"] if r["token_id"] == minted["token_id"]]
    assert mine and mine[0]["agent"] == "bot" and not mine[0].get("revoked_at")
    text = json.dumps(listed)
    assert minted["token"] not in text and "token_hash" not in text
    table = cli(dev_runtime, "tokens", "ls", role="admin")
    assert table.returncode == 0 and minted["token_id"].encode() in table.stdout

    assert cli(dev_runtime, "tokens", "revoke", minted["token_id"], role="admin").returncode == 0
    denied = cli(env_token, "notes", "put", "tok:k", "1", "n", "--author", "bot", stdin=b"x", role="bot")
    assert denied.returncode == 1 and b"403" in denied.stderr
    again = as_json(cli(dev_runtime, "tokens", "ls", "--all", "--json", role="admin"))
    assert any(r["token_id"] == minted["token_id"] and r["revoked_at"] for r in again["items"])
    unknown = cli(dev_runtime, "tokens", "revoke", "ffffffffffffffff", role="admin")
    assert unknown.returncode == 1 and b"not_found" in unknown.stderr


def test_version_health_and_help(dev_runtime: dict[str, Any]) -> None:
    version = cli(dev_runtime, "--version")
    assert version.returncode == 0 and re.fullmatch(rb"dovecote \d+\.\d+\.\d+\n", version.stdout)
    assert as_json(cli(dev_runtime, "health", "--json"))["status"] == "ok"
    helped = cli(dev_runtime, "--help")
    assert helped.returncode == 0 and b"Exit codes" in helped.stdout and b"4 Dovecote" in helped.stdout
    assert b"5 a wait cannot succeed" in helped.stdout


# ---- tasks and worker ---------------------------------------------------------------------------


@pytest.fixture
def own(dev_runtime: dict[str, Any]) -> Authority:
    """An authority of this test's own: `worker claim` takes the oldest claimable task."""
    return fresh_authority(dev_runtime, "cli")


def as_role(authority: Authority, role: str, worker: str | None = None) -> dict[str, str]:
    return base_env() | {"DOVECOTE_ENDPOINT": authority.endpoint, "DOVECOTE_TOKEN": authority.token(role, worker)}


def test_tasks_and_worker_commands(own: Authority, tmp_path: Path) -> None:
    caller, worker = as_role(own, "caller"), as_role(own, "worker", "w-cli")
    admin = as_role(own, "admin")
    task_id = uid("cli")
    created = as_json(run(caller, "tasks", "create", task_id, "hello", "--context", "cli", "--json"))["task"]
    assert (created["revision"], created["lease_timeout_seconds"], created["accept_timeout_seconds"]) == (1, 300, 30)
    # --json is the HTTP answer: {assignment: …} for a claim, {task: …} for a command.
    claimed = as_json(run(worker, "worker", "claim", "--wait-seconds", "2", "--json"))
    assert set(claimed) == {"assignment"} and claimed["assignment"]["task"]["id"] == task_id
    fence = str(claimed["assignment"]["fence"])
    accepted = as_json(run(worker, "worker", "accept", task_id, "--expected-revision", "1", "--fence", fence, "--json"))
    assert set(accepted) == {"task"} and accepted["task"]["state"] == "working"
    beat = as_json(run(worker, "worker", "heartbeat", task_id, "--fence", fence, "--json"))["assignment"]
    assert beat["fence"] == claimed["assignment"]["fence"] and beat["task"]["revision"] == 2
    question = tmp_path / "question.md"
    question.write_text("# Why?\n")
    asked = run(worker, "worker", "request-input", task_id, "--rev", "2", "--fence", fence, "--file", str(question))
    assert asked.returncode == 0 and b"input_required" in asked.stdout  # the human view
    replied = run(caller, "tasks", "reply", task_id, "--rev", "3", "--file", "-", "--json", stdin=b"because")
    assert as_json(replied)["task"]["state"] == "working"
    done = as_json(run(worker, "worker", "complete", task_id, "done", "--rev", "4", "--fence", fence, "--json"))
    assert done["task"]["state"] == "completed" and done["task"]["submission"]["id"].startswith("s-")
    stale = run(worker, "worker", "fail", task_id, "--rev", "5", "--fence", fence)
    assert stale.returncode == 1 and stale.stderr.decode().startswith("error: 409 stale_lease")
    assert stale.stderr.count(b"\n") == 1

    messages = as_json(run(caller, "tasks", "messages", task_id, "--json"))
    assert [m["author"] for m in messages["items"]] == ["caller", "agent", "caller", "agent"]
    assert messages["items"][1]["parts"][0] == {"media_type": "text/markdown", "text": "# Why?\n"}
    first_two = as_json(run(caller, "tasks", "messages", task_id, "--limit", "2", "--json"))
    assert (len(first_two["items"]), first_two["next"], first_two["has_more"]) == (2, 2, True)
    all_messages = as_json(run(caller, "tasks", "messages", task_id, "--limit", "2", "--all", "--json"))
    assert [m["sequence"] for m in all_messages["items"]] == [1, 2, 3, 4] and not all_messages["has_more"]
    second = messages["items"][1]
    one = as_json(run(caller, "tasks", "message", task_id, second["id"], "--json"))
    assert one == {"message": second}
    shown = run(caller, "tasks", "message", task_id, second["id"])
    assert shown.returncode == 0 and second["id"].encode() in shown.stdout and b"# Why?" in shown.stdout
    unknown = run(caller, "tasks", "message", task_id, "m-nowhere")
    assert unknown.returncode == 1 and unknown.stderr.decode().startswith("error: 404 not_found")
    events = as_json(run(caller, "tasks", "events", task_id, "--after", "3", "--json"))
    assert [e["type"] for e in events["items"]] == ["caller_replied", "task_completed"]
    table = run(caller, "tasks", "events", task_id)
    assert table.returncode == 0 and b"task_completed" in table.stdout
    snapshot = as_json(run(caller, "tasks", "snapshot", task_id, "--json"))
    assert snapshot["event_cursor"] == 5 and snapshot["task"]["state"] == "completed"
    listed = as_json(run(caller, "tasks", "list", "--context", "cli", "--state", "completed", "--json"))
    assert task_id in [t["id"] for t in listed["items"]] and listed["total_size"] >= 1 and "cursor" in listed
    assert as_json(run(caller, "tasks", "ls", "--context", "cli", "--state", "completed", "--json")) == listed
    in_context = as_json(run(caller, "tasks", "context", "cli", "--all", "--json"))
    assert [t["id"] for t in in_context["items"]] == [task_id]
    read = as_json(run(caller, "tasks", "get", task_id, "--json"))  # the HTTP answer: {task, last_lease}
    assert read["task"]["state"] == "completed" and "lease" not in read
    assert (read["last_lease"]["reason"], read["last_lease"]["by"]) == ("task_ended", "w-cli")
    grants = as_json(run(caller, "tasks", "grants", task_id, "--json"))
    assert [(g["fence"], g["worker"], g["reason"]) for g in grants["items"]] == [(int(fence), "w-cli", "task_ended")]
    grant_table = run(caller, "tasks", "grants", task_id)
    assert grant_table.returncode == 0 and b"task_ended" in grant_table.stdout
    waited = as_json(run(caller, "tasks", "wait", task_id, "--state", "completed", "--timeout", "5", "--json"))
    assert waited["task"]["id"] == task_id
    human = run(caller, "tasks", "ls", "--all")
    assert human.returncode == 0 and task_id.encode() in human.stdout

    # Leases: acquire, lease, leases, release (own), fence (admin), reject.
    second = uid("cli")
    # Its leases stay unaccepted across several commands below: no accept deadline under a loaded machine.
    made = run(caller, "tasks", "create", second, "--file", "-", "--accept-timeout-seconds", "0", stdin=b"from stdin")
    assert made.returncode == 0 and b"accept_timeout_seconds" in made.stdout
    lease = as_json(run(worker, "worker", "acquire", second, "--json"))["assignment"]
    assert lease["fence"] == 1
    assert as_json(run(worker, "worker", "lease", second, "--json"))["assignment"]["worker"] == "w-cli"
    leases = as_json(run(worker, "worker", "leases", "--json"))
    assert [a["task"]["id"] for a in leases["items"]] == [second] and "cursor" in leases
    released = run(worker, "worker", "release", second, "--fence", "1")
    assert released.returncode == 0 and b"released" in released.stdout
    unleased = run(worker, "worker", "lease", second)
    assert unleased.returncode == 1 and unleased.stderr.startswith(b"error: 404 not_found")
    again = as_json(run(worker, "worker", "claim", "--json"))["assignment"]
    assert (again["task"]["id"], again["fence"]) == (second, 2)  # released: claimable again, fence + 1
    fenced = run(admin, "worker", "fence", second, "--fence", "2", "--json")
    assert as_json(fenced) == {"task": second, "fence": 2, "fenced": True}
    lease3 = as_json(run(worker, "worker", "acquire", second, "--json"))["assignment"]
    rejected = run(worker, "worker", "reject", second, "--rev", "1", "--fence", str(lease3["fence"]), "--json")
    assert as_json(rejected)["task"]["state"] == "rejected"
    nothing = run(worker, "worker", "claim", "--wait", "1")
    assert nothing.returncode == 3 and nothing.stderr == b"nothing is claimable (waited 1 s)\n"
    none_json = run(worker, "worker", "claim", "--json")
    assert none_json.returncode == 3 and json.loads(none_json.stdout) == {"assignment": None}


def test_tasks_wait_times_out_with_exit_3_and_cancel(own: Authority) -> None:
    caller = as_role(own, "caller")
    task_id = uid("wait")
    assert run(caller, "tasks", "create", task_id, "x").returncode == 0
    waited = run(caller, "tasks", "wait", task_id, "--state", "completed", "--timeout", "1")
    assert waited.returncode == 3
    assert waited.stderr.decode() == (
        f"error: task {task_id} is submitted (revision 1) after 1 s; waited for completed\n"
    )
    canceled = as_json(run(caller, "tasks", "cancel", task_id, "--rev", "1", "--json"))
    assert canceled["task"]["state"] == "canceled"
    assert as_json(run(caller, "tasks", "wait", task_id, "--json"))["task"]["state"] == "canceled"  # any terminal
    unknown = run(caller, "tasks", "wait", task_id, "--state", "done")
    assert unknown.returncode == 2 and b"unknown state" in unknown.stderr


def test_worker_fail_with_a_reason_the_caller_reads_on_the_event(own: Authority) -> None:
    caller, worker = as_role(own, "caller"), as_role(own, "worker", "w-fail")
    task_id = uid("fail")
    as_json(run(caller, "tasks", "create", task_id, "deploy it", "--json"))
    fence = str(as_json(run(worker, "worker", "acquire", task_id, "--json"))["assignment"]["fence"])
    as_json(run(worker, "worker", "accept", task_id, "--rev", "1", "--fence", fence, "--json"))
    why = "the staging cluster is gone"
    failed = run(worker, "worker", "fail", task_id, "--rev", "2", "--fence", fence, "--reason", why, "--json")
    assert as_json(failed)["task"]["state"] == "failed"
    last = as_json(run(caller, "tasks", "events", task_id, "--json"))["items"][-1]
    assert (last["type"], last["reason"]) == ("task_failed", why)
    too_long = run(worker, "worker", "fail", task_id, "--rev", "3", "--fence", fence, "--reason", "x" * 2049)
    assert too_long.returncode == 1 and too_long.stderr.decode().startswith("error: 400 invalid_argument")


def test_revision_and_fence_are_named_options(own: Authority) -> None:
    worker = as_role(own, "worker", "w-opts")
    positional = run(worker, "worker", "accept", "t1", "1", "1")
    assert positional.returncode == 2  # usage: bare numbers are not accepted
    missing = run(worker, "worker", "accept", "t1", "--rev", "1")
    assert missing.returncode == 2 and b"--fence" in missing.stderr


def test_a_caller_command_reads_the_revision_when_rev_is_omitted(own: Authority) -> None:
    """People need not look up a revision to cancel or reply: without --rev the command reads the task
    and sends its revision (--verbose says so). The SDK and HTTP keep expected_revision required."""
    caller, worker = as_role(own, "caller"), as_role(own, "worker", "w-rev")
    asked = uid("rev")
    as_json(run(caller, "tasks", "create", asked, "question?", "--json"))
    fence = str(as_json(run(worker, "worker", "acquire", asked, "--json"))["assignment"]["fence"])
    as_json(run(worker, "worker", "accept", asked, "--rev", "1", "--fence", fence, "--json"))
    as_json(run(worker, "worker", "request-input", asked, "which one?", "--rev", "2", "--fence", fence, "--json"))
    replied = run(caller, "tasks", "reply", asked, "the blue one", "--verbose", "--json")
    assert as_json(replied)["task"]["state"] == "working"
    assert replied.stderr.decode() == f"--rev not given: read task {asked} at revision 3 (input_required); sent it\n"
    cancelled = run(caller, "tasks", "cancel", asked)
    assert cancelled.returncode == 0 and b"canceled" in cancelled.stdout and cancelled.stderr == b""
    # A stale revision given by hand is still the compare-and-swap's conflict.
    other = uid("rev")
    as_json(run(caller, "tasks", "create", other, "x", "--json"))
    stale = run(caller, "tasks", "cancel", other, "--rev", "7")
    assert stale.returncode == 1 and stale.stderr.startswith(b"error: 409 revision_conflict")
    import inspect

    from dovecote.client import DovecoteClient

    for method in (DovecoteClient.cancel, DovecoteClient.reply):
        assert inspect.signature(method).parameters["expected_revision"].default is inspect.Parameter.empty
