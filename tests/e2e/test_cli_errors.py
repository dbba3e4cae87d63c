"""Expected failures of the CLI: exactly one line on stderr starting with `error:`, no traceback, no
rich box, the documented exit code (1 an API error, 2 usage or a missing file, 3 nothing claimable / a
wait timed out, 4 unreachable or not configured); with --json the same failure is JSON on stdout,
`{"error": {code, message, details}}`. DOVECOTE_DEBUG=1 shows the traceback instead. Every process
runs in a temporary directory outside the clone, with no profile of the user's."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends: nothing listens there


NO_PROFILES = str(Path(tempfile.gettempdir()) / "dovecote-tests-no-config")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOVECOTE_", "AWS_"))}
    return env | {"COLUMNS": "200", "XDG_CONFIG_HOME": NO_PROFILES} | extra


def run(env: dict[str, str], *args: str, cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dovecote.cli", *args],
        input=stdin.decode(),
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


def one_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    """The one stderr line of a failure, without its `error: ` prefix."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n"), result.stderr
    assert "Traceback" not in result.stderr and "╭" not in result.stderr and result.stdout == ""
    assert result.stderr.startswith("error: "), result.stderr
    return result.stderr.removeprefix("error: ").rstrip("\n")


def json_error(result: subprocess.CompletedProcess[str], code: int) -> dict[str, Any]:
    """The JSON error of a failure run with --json: on stdout, nothing on stderr."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert result.stderr == "", result.stderr
    document = json.loads(result.stdout)
    assert set(document) == {"error"} and set(document["error"]) == {"code", "message", "details"}
    return dict(document["error"])


VERBS = [
    ("tasks", "get", "t1"),
    ("tasks", "create", "t1", "hello"),
    ("notes", "ls"),
    ("worker", "claim", "--wait", "1"),
    ("tasks", "wait", "t1", "--timeout", "1"),
    ("health",),
]


@pytest.mark.parametrize("args", VERBS, ids=[" ".join(v[:2]) for v in VERBS])
def test_the_server_is_not_running(args: tuple[str, ...], tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    env = clean_env(DOVECOTE_ENDPOINT=endpoint, DOVECOTE_TOKEN="dvc_x_y")
    line = one_line(run(env, *args, cwd=tmp_path), 4)
    assert line == f"cannot reach Dovecote at {endpoint}: connection refused; is `make dev` running?"


def test_a_stale_tokens_file_from_a_stopped_runtime(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    (tmp_path / ".dovecote").mkdir()
    tokens = {"endpoint": endpoint, "tokens": {"admin": "dvc_a_b", "caller": "dvc_c_d", "worker": "dvc_w_x"}}
    (tmp_path / ".dovecote" / "dev-tokens.json").write_text(json.dumps(tokens))
    for args in (("tasks", "get", "t1"), ("worker", "leases"), ("tokens", "ls")):
        line = one_line(run(clean_env(), *args, cwd=tmp_path), 4)
        assert line == (
            f"cannot reach Dovecote at {endpoint} (from .dovecote/dev-tokens.json): connection refused; "
            "is `make dev` running?"
        )


def test_no_configuration_says_where_it_looked(tmp_path: Path) -> None:
    line = one_line(run(clean_env(), "tasks", "ls", cwd=tmp_path), 4)
    assert line.startswith("no Dovecote configuration: set DOVECOTE_ENDPOINT and DOVECOTE_TOKEN")
    assert "dovecote login" in line and f"no .dovecote/dev-tokens.json in {tmp_path} or a parent" in line
    assert f"no profile in {NO_PROFILES}/dovecote/config.toml" in line
    half = one_line(run(clean_env(DOVECOTE_ENDPOINT="http://127.0.0.1:1"), "tasks", "ls", cwd=tmp_path), 4)
    assert "DOVECOTE_TOKEN is not" in half
    other_half = one_line(run(clean_env(DOVECOTE_TOKEN="dvc_x"), "tasks", "ls", cwd=tmp_path), 4)
    assert other_half.startswith("DOVECOTE_TOKEN is set but DOVECOTE_ENDPOINT is not")
    for endpoint in ("127.0.0.1:8787", "not-a-url", "ftp://host", "http://"):
        bad = one_line(run(clean_env(DOVECOTE_ENDPOINT=endpoint, DOVECOTE_TOKEN="x"), "whoami", cwd=tmp_path), 4)
        assert bad.startswith(f"the endpoint {endpoint!r} (from DOVECOTE_ENDPOINT) is not an http:// or https://")
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    unreadable = one_line(run(clean_env(DOVECOTE_TOKENS_FILE=str(broken)), "tasks", "ls", cwd=tmp_path), 4)
    assert str(broken) in unreadable and "cannot be read" in unreadable


@pytest.mark.parametrize(
    "args",
    [
        ("notes", "put", "k", "1", "n", "--file", "missing.bin"),
        ("tasks", "create", "t1", "--file", "missing.txt"),
        ("tasks", "reply", "t1", "--rev", "3", "--file", "missing.txt"),
        ("worker", "complete", "t1", "--rev", "4", "--fence", "1", "--file", "missing.txt"),
    ],
    ids=["notes put", "tasks create", "tasks reply", "worker complete"],
)
def test_a_missing_file(args: tuple[str, ...], tmp_path: Path, dev_runtime: dict[str, Any]) -> None:
    env = clean_env(DOVECOTE_TOKENS_FILE=str(dev_runtime["tokens_file"]))
    line = one_line(run(env, *args, cwd=tmp_path), 2)
    assert line == f"no such file: {args[args.index('--file') + 1]}"
    error = json_error(run(env, *args, "--json", cwd=tmp_path), 2)
    assert error["code"] == "usage" and error["details"] == {"file": args[args.index("--file") + 1]}


def test_usage_errors_of_our_own_are_one_line_with_exit_2(tmp_path: Path, dev_runtime: dict[str, Any]) -> None:
    env = clean_env(DOVECOTE_TOKENS_FILE=str(dev_runtime["tokens_file"]))
    assert one_line(run(env, "tasks", "create", "t1", cwd=tmp_path), 2) == (
        "give the message as TEXT, or --file FILE (- reads stdin)"
    )
    assert "not a ref" in one_line(run(env, "notes", "rm", "plan", cwd=tmp_path), 2)
    assert "KEY RUN NAME" in one_line(run(env, "notes", "get", "k", "1", cwd=tmp_path), 2)
    assert "--timeout must be 0" in one_line(run(env, "tasks", "wait", "t1", "--timeout", "-1", cwd=tmp_path), 2)


def test_an_api_error_is_one_line_with_exit_1(tmp_path: Path, dev_runtime: dict[str, Any]) -> None:
    env = clean_env(DOVECOTE_TOKENS_FILE=str(dev_runtime["tokens_file"]))
    line = one_line(run(env, "tasks", "get", "no-such-task", cwd=tmp_path), 1)
    assert line == '404 not_found: task not found {"task":"no-such-task"}'


def test_a_refused_token_says_so_and_where_it_came_from(tmp_path: Path, dev_runtime: dict[str, Any]) -> None:
    """The gateway's authorizer answers a bad token 403 {"message": "Forbidden"} before any function:
    the CLI names what was refused instead of printing that word alone; a function's 403 is its own."""
    env = clean_env(DOVECOTE_ENDPOINT=dev_runtime["endpoint"], DOVECOTE_TOKEN="dvc_bogus")
    line = one_line(run(env, "whoami", cwd=tmp_path), 1)
    assert line.startswith("403 forbidden: the token was refused (the token from DOVECOTE_TOKEN): it is unknown")
    assert line.endswith("the gateway said 'Forbidden'") and "dvc_bogus" not in line
    assert json_error(run(env, "whoami", "--json", cwd=tmp_path), 1)["code"] == "forbidden"
    caller = clean_env(DOVECOTE_ENDPOINT=dev_runtime["endpoint"], DOVECOTE_TOKEN=dev_runtime["tokens"]["caller"])
    own = one_line(run(caller, "worker", "claim", "--wait", "0", cwd=tmp_path), 1)  # a caller on a worker route
    assert own.startswith("403 forbidden:") and "the token was refused" not in own


def test_bootstrap_without_an_aws_region(tmp_path: Path) -> None:
    env = clean_env(AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"))
    line = one_line(run(env, "tokens", "bootstrap", "--authority", "a", "--table", "t", cwd=tmp_path), 4)
    assert line == "no AWS region: pass --region, or set AWS_REGION or AWS_DEFAULT_REGION (or region in the AWS config)"


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    env = clean_env(DOVECOTE_ENDPOINT=f"http://127.0.0.1:{closed_port()}", DOVECOTE_TOKEN="x", DOVECOTE_DEBUG="1")
    result = run(env, "tasks", "get", "t1", cwd=tmp_path)
    assert result.returncode != 0 and "Traceback" in result.stderr and "DovecoteError" in result.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("tasks", "get"), "Missing argument 'TASK' (see `dovecote tasks get --help`)"),
        (("worker", "accept", "t1", "--rev", "1"), "Missing option '--fence' (see `dovecote worker accept --help`)"),
        (("notes", "ls", "--bogus"), "No such option: --bogus (see `dovecote notes ls --help`)"),
        (("tasks", "create", "t1", "x", "--lease-timeout-seconds", "soon"), None),
        (("nope",), "No such command 'nope' (see `dovecote --help`)"),
        (("note", "list"), "No such command 'note'. Did you mean 'notes'? (see `dovecote --help`)"),
        (("taks", "get", "t1"), "No such command 'taks'. Did you mean 'tasks'? (see `dovecote --help`)"),
    ],
    ids=["missing argument", "missing option", "unknown option", "bad value", "unknown command", "typo", "typo 2"],
)
def test_a_usage_error_is_one_line_not_a_box(args: tuple[str, ...], expected: str | None, tmp_path: Path) -> None:
    line = one_line(run(clean_env(), *args, cwd=tmp_path), 2)
    if expected is not None:
        assert line == expected
    else:
        assert line.startswith("Invalid value for '--lease-timeout-seconds'")
    error = json_error(run(clean_env(), *args, "--json", cwd=tmp_path), 2)
    assert error["code"] == "usage" and error["message"] == line and error["details"]["command"].startswith("dovecote")


def test_with_json_every_kind_of_failure_is_json_on_stdout(tmp_path: Path, dev_runtime: dict[str, Any]) -> None:
    env = clean_env(DOVECOTE_TOKENS_FILE=str(dev_runtime["tokens_file"]))
    missing = json_error(run(env, "tasks", "get", "no-such-task", "--json", cwd=tmp_path), 1)
    assert missing == {"code": "not_found", "message": "task not found", "details": {"task": "no-such-task"}}
    refused = json_error(run(env, "notes", "get", "plan", "--json", cwd=tmp_path), 2)
    assert refused["code"] == "usage" and "not a ref" in refused["message"]
    down = clean_env(DOVECOTE_ENDPOINT=f"http://127.0.0.1:{closed_port()}", DOVECOTE_TOKEN="dvc_x_y")
    unreachable = json_error(run(down, "notes", "ls", "--json", cwd=tmp_path), 4)
    assert unreachable["code"] == "unavailable" and unreachable["details"]["reason"] == "connection refused"
    unconfigured = json_error(run(clean_env(), "whoami", "--json", cwd=tmp_path), 4)
    assert unconfigured["code"] == "configuration" and unconfigured["message"].startswith("no Dovecote configuration")
    timed_out = json_error(run(env, "tasks", "wait", "no-such-task", "--timeout", "1", "--json", cwd=tmp_path), 1)
    assert timed_out["code"] == "not_found"


def test_a_planted_tokens_file_receives_nothing(tmp_path: Path) -> None:
    """A `.dovecote/dev-tokens.json` that others can write (planted in a shared directory such as
    /tmp) is refused with one line naming it and why: no command and no `recall hook` sends anything
    to the endpoint it names."""
    import http.server
    import threading

    seen: list[str] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server spelling
            seen.append(self.path)
            self.send_response(200)
            self.end_headers()

        do_POST = do_GET  # noqa: N815

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        shared = tmp_path / "shared"
        (shared / ".dovecote").mkdir(parents=True)
        shared.chmod(0o1777)
        planted = shared / ".dovecote" / "dev-tokens.json"
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        planted.write_text(json.dumps({"endpoint": endpoint, "tokens": {"caller": "dvc_a_b", "worker": "dvc_c_d"}}))
        work = shared / "project"
        work.mkdir()
        for folder, file, why in (
            (0o777, 0o644, f"its directory {planted.parent} (mode 0777)"),
            (0o755, 0o666, "it (mode 0666)"),
        ):
            (shared / ".dovecote").chmod(folder)
            planted.chmod(file)
            line = one_line(run(clean_env(), "tasks", "ls", cwd=work), 4)
            assert line.startswith(f"the tokens file {planted} is not used: others can write {why}. A token goes")
        transcript = work / "session.jsonl"
        transcript.write_text(json.dumps({"type": "user", "sessionId": "s1", "message": {"content": "hi"}}) + "\n")
        payload = json.dumps({"transcript_path": str(transcript), "hook_event_name": "SessionEnd"}).encode()
        log = tmp_path / "push.log"
        hook = run(clean_env(HOME=str(tmp_path)), "recall", "hook", "--log", str(log), cwd=work, stdin=payload)
        assert hook.returncode == 0 and "is not used" in log.read_text()
        assert seen == []
    finally:
        server.shutdown()


def test_recall_push_of_a_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    """It printed "0 pushed" and exited 0; the server is not needed to say so (none is configured)."""
    missing = tmp_path / "no" / "such" / "dir"
    assert one_line(run(clean_env(), "recall", "push", str(missing), cwd=tmp_path), 2) == (
        f"no such file or directory: {missing}"
    )
    error = json_error(run(clean_env(), "recall", "push", str(missing), "--json", cwd=tmp_path), 2)
    assert error["code"] == "usage" and error["details"] == {"file": str(missing)}


def test_a_note_missed_by_its_coordinates_says_the_author_is_one(tmp_path: Path, dev_runtime: dict[str, Any]) -> None:
    """`notes get KEY RUN NAME` without --author asks for the shared scope: a note written by an
    author is not there, and the bare 404 did not say why nor how to find it."""
    env = clean_env(DOVECOTE_TOKENS_FILE=str(dev_runtime["tokens_file"]))
    key = f"coords-{os.getpid()}-{tmp_path.name[-6:]}"
    put = run(env, "notes", "put", key, "1", "plan", "--author", "claude", cwd=tmp_path, stdin=b"the plan")
    assert put.returncode == 0, put.stderr
    for verb in ("get", "delete"):
        line = one_line(run(env, "notes", verb, key, "1", "plan", cwd=tmp_path), 1)
        assert line.startswith(f"404 not_found: no note at key {key!r}, run 1, name 'plan', author '' (the shared"), (
            line
        )
        assert "the author is part of a note's coordinates: give --author AUTHOR" in line
        assert f"`dovecote notes list --key {key} --run 1`" in line
    found = run(env, "notes", "get", key, "1", "plan", "--author", "claude", cwd=tmp_path)
    assert (found.returncode, found.stdout) == (0, "the plan")


def test_a_caller_token_on_a_worker_command_is_told_what_to_use(tmp_path: Path, dev_runtime: dict[str, Any]) -> None:
    """ "role 'caller' may not run this command" said nothing of the worker token it needs, nor of the
    profile NAME-worker a worker command takes when it exists."""
    caller = dev_runtime["tokens"]["caller"]
    env = clean_env(DOVECOTE_ENDPOINT=dev_runtime["endpoint"], DOVECOTE_TOKEN=caller)
    line = one_line(run(env, "worker", "claim", "--wait", "0", cwd=tmp_path), 1)
    assert line.startswith("403 forbidden: role 'caller' may not run this command: this command needs a worker")
    assert "the token from DOVECOTE_TOKEN is a caller token (DOVECOTE_TOKEN is the token of every role" in line
    config = tmp_path / "xdg" / "dovecote"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(
        f'[profiles.default]\nendpoint = "{dev_runtime["endpoint"]}"\ntoken = "{caller}"\n'
    )
    logged_in = clean_env(XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    line = one_line(run(logged_in, "worker", "leases", cwd=tmp_path), 1)
    assert f"is a caller token (no profile default-worker in {config / 'config.toml'}, so the token of" in line
    assert "`dovecote login --endpoint URL --token TOKEN --profile default-worker`" in line


def test_logout_removes_a_profile_and_its_role_profiles(tmp_path: Path) -> None:
    config = tmp_path / "xdg" / "dovecote"
    config.mkdir(parents=True)
    path = config / "config.toml"
    path.write_text(
        "".join(
            f'[profiles.{name}]\nendpoint = "http://127.0.0.1:9"\ntoken = "t-{name}"\n\n'
            for name in ("dev", "dev-worker", "dev-admin", "ops", "development")
        )
    )
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    done = run(env, "logout", "--profile", "dev", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"removed the profiles dev, dev-admin, dev-worker from {path}")
    assert "the tokens stay valid until they expire or are revoked" in done.stdout
    import tomllib

    assert set(tomllib.loads(path.read_text())["profiles"]) == {"ops", "development"}
    assert one_line(run(env, "logout", "--profile", "dev", cwd=tmp_path), 2) == (
        f"no profile 'dev' in {path} (profiles: development, ops)"
    )
    assert json.loads(run(env, "logout", "--profile", "ops", "--json", cwd=tmp_path).stdout) == {
        "removed": ["ops"],
        "config": str(path),
    }
    assert one_line(run(env, "logout", "--profile", "../x", cwd=tmp_path), 2).startswith("'../x' is not a profile")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("notes", "get", "1", "plan", "fix"),
            "RUN (the second of KEY RUN NAME) must be an integer, got 'plan'; the first, '1', is one: "
            "did you mean `dovecote notes get plan 1 fix`?",
        ),
        (("notes", "rm", "k", "one", "n"), "RUN (the second of KEY RUN NAME) must be an integer, got 'one'"),
        (
            ("notes", "put", "1", "plan", "fix"),
            "RUN (the second of KEY RUN NAME) must be an integer, got 'plan'; the first, '1', is one: "
            "did you mean `dovecote notes put plan 1 fix`?",
        ),
        (
            ("tasks", "create", "fix the widget", "T1"),
            "TASK 'fix the widget' is not a task id (letters, digits and . _ : -, at most 128); 'T1' is one: "
            "did you swap TASK and TEXT? (`dovecote tasks create T1 'fix the widget'`)",
        ),
        (
            ("memory", "judge", "confirmed", "rel-1"),
            "RELATION 'confirmed' is a decision: the order is RELATION DECISION "
            "(`dovecote memory judge rel-1 confirmed`)",
        ),
        (
            ("memory", "submit", "the db host is db-3", "team/infra"),
            "SCOPE 'the db host is db-3' cannot be a scope (letters, digits and . _ : / -, at most 128); the "
            "order is SCOPE CONTENT (`dovecote memory submit team/infra 'the db host is db-3'`)",
        ),
        (
            ("tasks", "webhooks", "add", "https://example.com/hook", "T1"),
            "TASK 'https://example.com/hook' is a URL: the order is TASK URL "
            "(`dovecote tasks webhooks add T1 https://example.com/hook`)",
        ),
        (
            ("tokens", "revoke", "dvc_0123456789abcdef_c2VjcmV0c2VjcmV0c2VjcmV0"),
            "TOKEN_ID is a token's id (16 hex digits, as `dovecote tokens list` shows), not the token: this "
            "token's id is 0123456789abcdef",
        ),
    ],
    ids=[
        "notes get",
        "notes rm",
        "notes put",
        "tasks create",
        "memory judge",
        "memory submit",
        "webhooks add",
        "tokens revoke",
    ],
)
def test_swapped_arguments_are_caught_before_any_request(args: tuple[str, ...], expected: str, tmp_path: Path) -> None:
    """Checked here, not sent: the endpoint is a closed port (a request would be exit 4)."""
    env = clean_env(DOVECOTE_ENDPOINT=f"http://127.0.0.1:{closed_port()}", DOVECOTE_TOKEN="dvc_x_y")
    line = one_line(run(env, *args, cwd=tmp_path, stdin=b"body"), 2)
    assert line == expected
    assert "c2VjcmV0c2VjcmV0" not in line
