"""Expected failures of the CLI: exactly one line on stderr, no traceback, the documented exit code
(1 an API error, 2 usage or a missing file, 3 nothing claimable / a wait timed out, 4 unreachable or
not configured). DOVECOTE_DEBUG=1 shows the traceback instead."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends: nothing listens there


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOVECOTE_", "AWS_"))}
    return env | {"COLUMNS": "200"} | extra


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
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n"), result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr.rstrip("\n")


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
    assert str(tmp_path / ".dovecote" / "dev-tokens.json") in line and "DOVECOTE_TOKENS_FILE" in line
    half = one_line(run(clean_env(DOVECOTE_ENDPOINT="http://127.0.0.1:1"), "tasks", "ls", cwd=tmp_path), 4)
    assert "DOVECOTE_TOKEN is not" in half
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


def test_usage_errors_of_our_own_are_one_line_with_exit_2(tmp_path: Path, dev_runtime: dict[str, Any]) -> None:
    env = clean_env(DOVECOTE_TOKENS_FILE=str(dev_runtime["tokens_file"]))
    assert one_line(run(env, "tasks", "create", "t1", cwd=tmp_path), 2) == (
        "give the message as TEXT, or --file FILE (- reads stdin)"
    )
    assert "not a ref" in one_line(run(env, "notes", "rm", "plan", cwd=tmp_path), 2)
    assert "KEY RUN NAME" in one_line(run(env, "notes", "get", "k", "1", cwd=tmp_path), 2)


def test_an_api_error_is_one_line_with_exit_1(tmp_path: Path, dev_runtime: dict[str, Any]) -> None:
    env = clean_env(DOVECOTE_TOKENS_FILE=str(dev_runtime["tokens_file"]))
    line = one_line(run(env, "tasks", "get", "no-such-task", cwd=tmp_path), 1)
    assert line == 'error: 404 not_found: task not found {"task":"no-such-task"}'


def test_bootstrap_without_an_aws_region(tmp_path: Path) -> None:
    env = clean_env(AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"))
    line = one_line(run(env, "tokens", "bootstrap", "--authority", "a", "--table", "t", cwd=tmp_path), 4)
    assert line == "no AWS region: pass --region, or set AWS_REGION or AWS_DEFAULT_REGION (or region in the AWS config)"


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    env = clean_env(DOVECOTE_ENDPOINT=f"http://127.0.0.1:{closed_port()}", DOVECOTE_TOKEN="x", DOVECOTE_DEBUG="1")
    result = run(env, "tasks", "get", "t1", cwd=tmp_path)
    assert result.returncode != 0 and "Traceback" in result.stderr and "DovecoteError" in result.stderr
