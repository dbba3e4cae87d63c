"""`dovecote notes get` answered without typer or httpx (`dovecote.cli.quick`) says byte for byte what
the full typer command says, and hands everything it does not take to that command.

Each case runs the console entry twice against `dovecote dev`: as a user runs it (`python -m
dovecote.cli`, which may take the quick path), under `-X importtime` so the test sees which path ran;
and through `main(args)`, which always runs the full command. Stdout, the stderr lines that are not
import timings, and the exit code must be equal."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from dovecote.cli.quick import _parse
from dovecote.client import DovecoteClient
from dovecote.notes.limits import INLINE_LIMIT
from dovecote.notes.model import note_ref
from tests.conftest import ROOT
from tests.e2e.test_cli import base_env

FULL = "import sys; from dovecote.cli import main; main(sys.argv[1:])"
HEAVY = ("typer", "httpx", "rich", "click")


def run(
    env: dict[str, str], *args: str
) -> tuple[subprocess.CompletedProcess[bytes], subprocess.CompletedProcess[bytes]]:
    quick = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "dovecote.cli", *args],
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    full = subprocess.run([sys.executable, "-c", FULL, *args], capture_output=True, env=env, cwd=ROOT, timeout=120)
    return quick, full


def imported(result: subprocess.CompletedProcess[bytes]) -> set[str]:
    """The top-level packages a run imported (its -X importtime lines)."""
    names = set()
    for line in result.stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


def said(result: subprocess.CompletedProcess[bytes]) -> tuple[int, bytes, list[str]]:
    errors = [line for line in result.stderr.decode().splitlines() if not line.startswith("import time:")]
    return result.returncode, result.stdout, errors


def same(env: dict[str, str], *args: str, quick: bool) -> tuple[int, bytes, list[str]]:
    """Both paths say the same; `quick` is whether the user's run took the quick path."""
    fast, full = run(env, *args)
    assert said(fast) == said(full), (args, said(fast), said(full))
    heavy = imported(fast) & set(HEAVY)
    assert "dovecote" in imported(fast)  # the timings are there to read
    assert (not heavy) is quick, (args, sorted(heavy))
    return said(fast)


@pytest.fixture(scope="module")
def notes(dev_runtime: dict[str, Any]) -> dict[str, Any]:
    key = f"quick:{uuid.uuid4().hex[:8]}"
    with DovecoteClient(dev_runtime["endpoint"], dev_runtime["tokens"]["caller"]) as sdk:
        made = {
            "text": sdk.put_note(key, 1, "plan", "a plan, with ünïcode ✓\nand a second line\n".encode()),
            "bytes": sdk.put_note(key, 1, "blob", bytes(range(256)) * 3, content_type="application/octet-stream"),
            "empty": sdk.put_note(key, 1, "empty", b""),
            "authored": sdk.put_note(key, 2, "plan", b"ana's plan\n", author="ana"),
            "large": sdk.put_note(key, 1, "large", os.urandom(INLINE_LIMIT + 1024)),
        }
    return {"key": key, **{name: answer["ref"] for name, answer in made.items()}}


@pytest.fixture
def env(dev_runtime: dict[str, Any]) -> dict[str, str]:
    return base_env() | {
        "DOVECOTE_ENDPOINT": dev_runtime["endpoint"],
        "DOVECOTE_TOKEN": dev_runtime["tokens"]["caller"],
    }


def test_plain_gets_take_the_quick_path_and_print_the_same_bytes(env: dict[str, str], notes: dict[str, Any]) -> None:
    code, out, _ = same(env, "notes", "get", notes["text"], quick=True)
    assert (code, out) == (0, "a plan, with ünïcode ✓\nand a second line\n".encode())
    assert same(env, "notes", "get", notes["bytes"], quick=True)[1] == bytes(range(256)) * 3
    assert same(env, "notes", "get", notes["empty"], quick=True)[:2] == (0, b"")
    by_coordinates = same(env, "notes", "get", notes["key"], "1", "plan", quick=True)
    assert by_coordinates[1] == out
    authored = same(env, "notes", "get", "--author", "ana", notes["key"], "2", "plan", quick=True)
    assert authored[1] == b"ana's plan\n"
    assert same(env, "notes", "get", notes["key"], "2", "plan", "--author=ana", quick=True)[1] == authored[1]
    code, document, _ = same(env, "notes", "get", notes["text"], "--json", quick=True)
    assert code == 0 and document.startswith(b'{"ref": "' + notes["text"].encode())


def test_a_profile_named_before_the_group_is_read_the_same_way(
    dev_runtime: dict[str, Any], notes: dict[str, Any], tmp_path: Path
) -> None:
    config = tmp_path / "dovecote" / "config.toml"
    config.parent.mkdir()
    config.write_text(
        f'[profiles.here]\nendpoint = "{dev_runtime["endpoint"]}"\ntoken = "{dev_runtime["tokens"]["caller"]}"\n'
    )
    env = base_env() | {"XDG_CONFIG_HOME": str(tmp_path)}
    assert same(env, "--profile", "here", "notes", "get", notes["empty"], quick=True)[0] == 0
    assert same(env, "--profile=here", "notes", "get", notes["authored"], quick=True)[1] == b"ana's plan\n"
    code, _, errors = same(env, "--profile", "elsewhere", "notes", "get", notes["empty"], quick=False)
    assert code == 4 and errors[0].startswith("error:")


def test_what_the_quick_path_does_not_take_goes_to_the_full_command(env: dict[str, str], notes: dict[str, Any]) -> None:
    # A body behind a download URL, another option, a ref with an author: the typer command's own.
    large = same(env, "notes", "get", notes["large"], quick=False)
    assert large[0] == 0 and len(large[1]) == INLINE_LIMIT + 1024
    assert same(env, "notes", "get", notes["text"], "--meta", quick=False)[0] == 0
    assert same(env, "notes", "get", notes["text"], "--author", "ana", quick=False)[0] == 2
    # Errors are always the full command's words and exit codes.
    missing = note_ref("quick:none", 1, "nothing", "")
    code, out, errors = same(env, "notes", "get", missing, quick=False)
    assert code == 1 and out == b"" and errors[0].startswith("error:") and "not_found" in errors[0]
    code, out, _ = same(env, "notes", "get", missing, "--json", quick=False)
    assert code == 1 and out.startswith(b'{"error": {"code": "not_found"')
    assert same(env, "notes", "get", "not-a-ref", quick=False)[0] == 2
    assert same(env, "notes", "get", "k", "one", "plan", quick=False)[0] == 2
    assert (
        same(env | {"DOVECOTE_TOKEN": "dvc_0000000000000000_bad"}, "notes", "get", notes["text"], quick=False)[0] == 1
    )
    # A proxy in the environment is httpx's to honour (the runtime is exempted from it).
    proxied = env | {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1"}
    assert same(proxied, "notes", "get", notes["empty"], quick=False)[0] == 0


def test_an_unreachable_endpoint_is_reported_once_by_the_full_command(
    env: dict[str, str], notes: dict[str, Any]
) -> None:
    code, out, errors = same(
        env | {"DOVECOTE_ENDPOINT": "http://127.0.0.1:9"}, "notes", "get", notes["text"], quick=False
    )
    assert code == 4 and out == b"" and len(errors) == 1 and "cannot reach" in errors[0]


@pytest.mark.parametrize(
    ("args", "parsed"),
    [
        (["notes", "get", "R"], (None, ["R"], "", False)),
        (["--profile", "p", "notes", "get", "K", "1", "N", "--json"], ("p", ["K", "1", "N"], "", True)),
        (["--profile=p", "notes", "get", "--author=a", "K", "1", "N"], ("p", ["K", "1", "N"], "a", False)),
        (["notes", "get", "K", "1", "N", "--author"], (None, ["K", "1", "N"], "\0", False)),
        (["notes", "get", "R", "-o", "file"], None),
        (["notes", "get", "R", "--json", "--json"], None),
        (["notes", "get", "--", "-R"], None),
        (["notes", "ls"], None),
        (["tasks", "get", "R"], None),
        (["--profile"], None),
    ],
)
def test_only_the_plain_forms_parse(args: list[str], parsed: object) -> None:
    assert _parse(args) == parsed


def test_a_stdout_that_refuses_the_body_is_one_error_line_either_way(
    env: dict[str, str], notes: dict[str, Any]
) -> None:
    said_by = []
    for argv in (
        [sys.executable, "-m", "dovecote.cli", "notes", "get", notes["text"]],
        [sys.executable, "-c", FULL, "notes", "get", notes["text"]],
    ):
        with open("/dev/full", "wb") as full_disk:
            done = subprocess.run(argv, stdout=full_disk, stderr=subprocess.PIPE, env=env, cwd=ROOT, timeout=120)
        said_by.append((done.returncode, done.stderr.decode()))
    assert said_by[0] == said_by[1]
    assert said_by[0][0] == 1 and said_by[0][1].startswith("error:") and said_by[0][1].count("\n") == 1


def on_a_terminal(env: dict[str, str], *args: str) -> bytes:
    """What `dovecote ARGS` writes to stdout when stdout is a terminal (a pseudo-terminal here; its
    line discipline writes each \\n as \\r\\n)."""
    import pty
    import select

    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "dovecote.cli", *args], stdout=follower, stderr=subprocess.PIPE, env=env, cwd=ROOT
    )
    os.close(follower)
    shown = bytearray()
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            process.kill()
            raise AssertionError("no output in 60 s")
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other side is closed, the command is done
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert process.wait(timeout=60) == 0, process.stderr.read() if process.stderr else b""
    return bytes(shown)


def test_a_body_without_a_final_newline_gets_one_on_a_terminal_only(dev_runtime: dict[str, Any]) -> None:
    """On a terminal the prompt came right after the body; piped, the bytes stay exact. Both paths: the
    quick one (an inline body) and the full command (a body behind a download URL)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")} | {
        "DOVECOTE_ENDPOINT": dev_runtime["endpoint"],
        "DOVECOTE_TOKEN": dev_runtime["tokens"]["caller"],
    }
    key = f"tty-{uuid.uuid4().hex[:8]}"
    large = b"x" * (INLINE_LIMIT + 10)
    for name, body in (("small", b"no newline"), ("lines", b"one\ntwo\n"), ("large", large)):
        put = subprocess.run(
            [sys.executable, "-m", "dovecote.cli", "notes", "put", key, "1", name],
            input=body, capture_output=True, env=env, cwd=ROOT, timeout=120,
        )  # fmt: skip
        assert put.returncode == 0, put.stderr
    assert on_a_terminal(env, "notes", "get", key, "1", "small") == b"no newline\r\n"
    assert on_a_terminal(env, "notes", "get", key, "1", "lines") == b"one\r\ntwo\r\n"  # none added
    assert on_a_terminal(env, "notes", "get", key, "1", "large") == large + b"\r\n"
    for name, body in (("small", b"no newline"), ("large", large)):
        piped = subprocess.run(
            [sys.executable, "-m", "dovecote.cli", "notes", "get", key, "1", name],
            capture_output=True, env=env, cwd=ROOT, timeout=120,
        )  # fmt: skip
        assert piped.stdout == body
