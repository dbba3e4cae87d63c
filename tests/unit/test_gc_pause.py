"""dovecote.platform.gc_pause: in Lambda the collector is off from the first import of a handler to
the end of its first invocation, then on again with what exists frozen; outside Lambda nothing
changes; and every function's handler resumes it (none may keep it off)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import pytest

from dovecote.platform.gc_pause import resumes_gc
from tests.conftest import ROOT

HANDLERS = sorted(p.parent.name for p in (ROOT / "functions").glob("*/handler.py"))

SCRIPT = r"""
import gc, json, sys
seen = {"before": gc.isenabled()}
from functions.authorizer import handler
seen["after_import"] = gc.isenabled()
try:
    handler.handler({"headers": {}}, None)  # no bearer token: refused before any AWS call
except Exception as exc:  # the context is None: Powertools' logger may refuse it after the pause ends
    seen["raised"] = type(exc).__name__
seen["after_first"] = gc.isenabled()
seen["frozen"] = gc.get_freeze_count()
print(json.dumps(seen))
"""


def _run(env_extra: dict[str, str]) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "AWS_LAMBDA_FUNCTION_NAME"}
    env.update(AWS_DEFAULT_REGION="us-east-1", POWERTOOLS_LOG_LEVEL="CRITICAL", **env_extra)
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_in_lambda_the_collector_is_off_until_the_first_invocation_ends() -> None:
    seen = _run({"AWS_LAMBDA_FUNCTION_NAME": "f"})
    assert seen["before"] is True and seen["after_import"] is False
    assert seen["after_first"] is True and isinstance(seen["frozen"], int) and seen["frozen"] > 10_000


def test_outside_lambda_the_collector_is_left_alone() -> None:
    seen = _run({})
    assert seen["before"] is seen["after_import"] is seen["after_first"] is True and seen["frozen"] == 0


@pytest.mark.parametrize("name", HANDLERS)
def test_every_handler_resumes_the_collector(name: str) -> None:
    module = importlib.import_module(f"functions.{name}.handler")
    assert getattr(module.handler, "resumes_gc", False), f"functions/{name}/handler.py: wrap it in resumes_gc"


def test_a_failing_first_invocation_resumes_it_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from dovecote.platform import gc_pause

    monkeypatch.setattr(gc_pause, "_paused", True)
    calls: list[str] = []
    monkeypatch.setattr(gc_pause.gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(gc_pause.gc, "enable", lambda: calls.append("enable"))

    @resumes_gc
    def boom(event: object, context: object) -> None:
        raise RuntimeError("first request failed")

    with pytest.raises(RuntimeError):
        boom({}, None)
    boom_again = calls[:]
    with pytest.raises(RuntimeError):
        boom({}, None)
    assert boom_again == ["freeze", "enable"] and calls == boom_again  # once, not per invocation
