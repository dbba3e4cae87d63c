"""`pip install -e .` prints no warning: the package is one source root (shared/), which setuptools
installs as a plain .pth path entry, not an import-hook finder that warns about same-named folders
(pip shows that as a BuildBackendWarning). Installs into a throwaway virtualenv through this pip's
`--python`, so the checkout's own .venv is never touched."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.conftest import ROOT


def test_an_editable_install_prints_no_warning(tmp_path: Path) -> None:
    target = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(target)
    python = target / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-e", str(ROOT)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if done.returncode != 0 and "Could not find a version that satisfies the requirement setuptools" in done.stderr:
        if os.environ.get("CI") != "true":
            pytest.skip(reason="the build backend (setuptools) cannot be fetched: no package index reachable")
    assert done.returncode == 0, done.stderr
    assert "warning" not in (done.stdout + done.stderr).lower(), done.stderr
    site = next((target / "lib").glob("python3.*/site-packages"))
    (pth,) = site.glob("__editable__.dovecote-*.pth")
    # A path entry, not `import __editable___…_finder` run at every interpreter start.
    assert pth.read_text().split() == [str(ROOT / "shared")]
    assert not list(site.glob("__editable___*finder*.py"))
    imported = subprocess.run(
        [str(python), "-c", "import dovecote; print(dovecote.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert imported.stdout.strip() == str(ROOT / "shared" / "dovecote" / "__init__.py")
