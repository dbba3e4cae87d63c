"""examples/a2a_client.py's failures as a user meets them: one line on stderr, exit 1, no traceback
(the docs run its happy paths: docs/clients/a2a.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from tests.conftest import ROOT

CLIENT = str(ROOT / "examples" / "a2a_client.py")


def run(dev_runtime: dict[str, Any], *args: str, token: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")}
    env |= {"DOVECOTE_ENDPOINT": dev_runtime["endpoint"], "DOVECOTE_TOKEN": token}
    return subprocess.run([sys.executable, CLIENT, *args], env=env, capture_output=True, text=True, timeout=120)


def test_a_bad_token_is_one_line_on_stderr(dev_runtime: dict[str, Any]) -> None:
    for args in (("hello",), ("--subscribe", "no-such-task")):
        done = run(dev_runtime, *args, token="dvc_not_a_token")
        assert done.returncode == 1, done.stdout + done.stderr
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
        assert "Traceback" not in done.stderr and done.stdout == ""


def test_an_unknown_task_to_follow_is_one_line_on_stderr(dev_runtime: dict[str, Any]) -> None:
    done = run(dev_runtime, "--subscribe", "no-such-task", token=dev_runtime["tokens"]["caller"])
    assert done.returncode == 1 and done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
