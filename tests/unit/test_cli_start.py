"""What a `dovecote` command imports, and how its values are converted (issue 16 item 8). Start-up time
is measured in `make bench` (section cli), not asserted here; what is asserted is what makes it short:
`--version` imports no typer, a command imports only its own group's module, and no command imports
pydantic, rich (unless it draws), httpx's own CLI (click, pygments) or another group. The plain values
dovecote.cli.coercion converts are the ones typer's pydantic path gives."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from dovecote.cli.coercion import DirectRuntimeParam, direct
from dovecote.cli.root import app
from tests.conftest import ROOT

REF = "0" * 64


# The console script's own code (with its arguments given, so that it returns instead of ending the
# process), then every module it had imported when it exited.
HARNESS = """
import atexit, json, os, sys
atexit.register(lambda: open(os.environ["MODULES"], "w").write(json.dumps(sorted(sys.modules))))
sys.argv[0] = "dovecote"
from dovecote.cli import main
main(sys.argv[1:])
"""


def imported(*args: str, cwd: Path) -> set[str]:
    """The modules a command had imported when it exited, run against a closed port."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOVECOTE_")}
    env |= {"DOVECOTE_ENDPOINT": "http://127.0.0.1:9", "DOVECOTE_TOKEN": "dvc_x", "XDG_CONFIG_HOME": str(cwd)}
    env["MODULES"] = str(cwd / "modules.json")
    subprocess.run([sys.executable, "-c", HARNESS, *args], capture_output=True, env=env, cwd=cwd, timeout=120)
    return set(json.loads((cwd / "modules.json").read_text()))


def test_version_imports_no_typer(tmp_path: Path) -> None:
    modules = imported("--version", cwd=tmp_path)
    assert "dovecote" in modules
    assert not {m for m in modules if m.split(".")[0] in ("typer", "httpx", "rich", "pydantic", "click")}


@pytest.mark.parametrize(
    "args",
    [("notes", "get", REF), ("notes", "list", "--json"), ("tasks", "get", "t1"), ("worker", "claim", "--json")],
    ids=["notes get", "notes list", "tasks get", "worker claim"],
)
def test_a_command_imports_only_its_own_group(args: tuple[str, ...], tmp_path: Path) -> None:
    modules = imported(*args, cwd=tmp_path)
    assert f"dovecote.cli.{args[0]}" in modules and "httpx" in modules  # it did run
    roots = {m.split(".")[0] for m in modules}
    # httpcore and h11 are httpx's pooled transport: a command sends through dovecote.client.oneshot.
    assert not roots & {"pydantic", "pydantic_core", "rich", "click", "pygments", "mcp", "boto3", "httpcore", "h11"}
    groups = {m for m in modules if m.startswith("dovecote.cli.")} - {f"dovecote.cli.{args[0]}"}
    assert groups <= {f"dovecote.cli.{m}" for m in ("root", "groups", "coercion", "common", "errors", "verbs", "tasks")}


def _params() -> list[Any]:
    root = typer.main.get_command(app)
    found = []

    def walk(group: Any) -> None:
        context = group.make_context("dovecote", ["--help"], resilient_parsing=True)
        for name in group.list_commands(context):
            command = group.get_command(context, name)
            if hasattr(command, "list_commands"):
                walk(command)
                found.extend(command.params)
            else:
                found.extend(command.params)

    walk(root)
    return found


@pytest.mark.parametrize(
    "value",
    ["7", " 12 ", "-3", "x", "1.5", "", "0", "true", "no", "maybe", "a/b.txt", "~/x", "-"],
)
def test_direct_values_are_typers_own(value: str) -> None:
    """Every parameter that skips pydantic converts each value as typer's pydantic path does (the same
    value, or a usage error both ways)."""
    from typer._click.exceptions import BadParameter
    from typer._coercion import build_runtime_param

    context = typer.main.get_command(app).make_context("dovecote", ["--help"], resilient_parsing=True)
    checked = 0
    for param in _params():
        descriptor = param.type_descriptor
        if not direct(descriptor):
            continue
        checked += 1
        raw: Any = [value] if param.multiple or param.nargs == -1 else value
        ours = DirectRuntimeParam(annotation=descriptor.annotation, parameter_info=descriptor.parameter_info)
        theirs = build_runtime_param(descriptor)
        outcomes = []
        for runtime in (ours, theirs):
            try:
                outcomes.append(("ok", runtime.coerce(raw, param=param, ctx=context)))
            except BadParameter:
                outcomes.append(("usage", None))
        assert outcomes[0][0] == outcomes[1][0], (param.name, value, outcomes)
        if outcomes[0][0] == "ok":
            assert list(outcomes[0][1]) == list(outcomes[1][1]) if raw is not value else outcomes[0] == outcomes[1]
    assert checked > 50


def test_the_console_script_is_the_entry_point() -> None:
    script = Path(sys.executable).with_name("dovecote")
    assert script.exists()
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    from dovecote import __version__

    assert done.stdout == f"dovecote {__version__}\n"


def test_the_package_version_is_the_distributions() -> None:
    from importlib.metadata import version

    from dovecote import __version__

    assert __version__ == version("dovecote")


def _usages() -> dict[str, str]:
    root = typer.main.get_command(app)
    found: dict[str, str] = {}

    def walk(group: Any, path: str) -> None:
        context = group.make_context(path, ["--help"], resilient_parsing=True)
        for name in group.list_commands(context):
            command = group.get_command(context, name)
            if hasattr(command, "list_commands"):
                walk(command, f"{path} {name}")
            else:
                sub = command.make_context(f"{path} {name}", ["--help"], resilient_parsing=True)
                found[f"{path} {name}"] = command.get_usage(sub)

    walk(root, "dovecote")
    return found


def test_every_positional_argument_is_named_in_capitals() -> None:
    """A usage line names its arguments as the docs do (TASK MESSAGE_ID, SCOPE CONTENT): typer shows a
    parameter without a metavar by its Python name (`{message_id}`), so each argument sets one."""
    usages = _usages()
    assert len(usages) > 50 and "dovecote tasks message" in usages
    lower = {name: usage for name, usage in usages.items() if re.search(r"[{\[][a-z][a-z_]*[}\]]", usage)}
    assert not lower, lower
