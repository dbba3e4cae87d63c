"""The function assets ship compiled for the Lambda runtime's Python (infra/build.py): Lambda's code
directories are read-only, so a module without bytecode is compiled on every cold start."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from infra import build
from tests.conftest import CI


def test_the_functions_asset_holds_unchecked_runtime_bytecode_for_every_module() -> None:
    python = build._runtime_python()
    if python is None:
        reason = "no Python 3.12 interpreter (python3.12 on PATH or DOVECOTE_RUNTIME_PYTHON) to compile with"
        if CI:
            pytest.fail(f"CI=true: {reason}; .ci/run finds one (pyenv) or set DOVECOTE_RUNTIME_PYTHON")
        pytest.skip(reason=reason)
    root = build.build_functions() / "functions"
    tag = "cpython-{}{}".format(*build.RUNTIME_PYTHON)
    modules = sorted(root.rglob("*.py"))
    assert modules
    for module in modules:
        compiled = module.parent / "__pycache__" / f"{module.stem}.{tag}.pyc"
        assert compiled.exists(), compiled
        flags = int.from_bytes(compiled.read_bytes()[4:8], "little")
        assert flags == 0b01, f"{compiled}: not an unchecked hash-based .pyc (flags {flags})"
    # And the runtime's interpreter loads them: the magic number is its own.
    magic = subprocess.run(  # noqa: S603 - the interpreter found above, a fixed probe
        [python, "-c", "import importlib.util, sys; sys.stdout.buffer.write(importlib.util.MAGIC_NUMBER)"],
        capture_output=True,
        check=True,
    ).stdout
    assert (root / "__pycache__" / f"__init__.{tag}.pyc").read_bytes()[:4] == magic


def test_without_a_runtime_interpreter_the_build_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(build, "_runtime_python", lambda: None)
    (tmp_path / "m.py").write_text("X = 1\n")
    build._compile(tmp_path, quiet=False)
    assert "ships without bytecode" in capsys.readouterr().out
    assert not list(tmp_path.rglob("*.pyc"))
