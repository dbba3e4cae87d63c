"""dovecote.platform.lazy: a package registered without running its __init__ (the cold-start trick
functions/__init__.py plays on Powertools' event_handler and data_classes packages)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dovecote.platform.lazy import lazy_package


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A folder holding `lazypkg`: an __init__ that marks that it ran and exports a relative, an
    absolute and a submodule import; its `light` and `heavy` modules."""
    pkg = tmp_path / "lazypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        textwrap.dedent(
            """
            import sys
            sys.modules[__name__].RAN = True
            from .light import Light
            from lazypkg.heavy import Heavy
            from lazypkg import light
            EXTRA = "only the real __init__ defines me"
            """
        )
    )
    (pkg / "light.py").write_text("class Light: ...\n")
    (pkg / "heavy.py").write_text("class Heavy: ...\n")
    return tmp_path


def _run(root: Path, code: str, package: str = "lazypkg") -> str:
    """`code` in a fresh interpreter, after `lazy_package(package)`; what it prints."""
    script = f"import sys\nfrom dovecote.platform.lazy import lazy_package\nlazy_package({package!r})\n"
    out = subprocess.run(  # noqa: S603 - this interpreter, fixed code
        [sys.executable, "-c", script + textwrap.dedent(code)], capture_output=True, text=True, cwd=root, check=True
    )
    return out.stdout.strip()


def test_a_relative_export_loads_only_its_module(root: Path) -> None:
    out = _run(
        root,
        """
        from lazypkg import Light
        print(Light.__module__, "lazypkg.heavy" in sys.modules, "RAN" in vars(sys.modules["lazypkg"]))
        """,
    )
    assert out == "lazypkg.light False False"


def test_an_absolute_export_and_a_submodule_import_as_usual(root: Path) -> None:
    out = _run(
        root,
        """
        from lazypkg import Heavy
        from lazypkg import light
        import lazypkg.light
        print(Heavy.__module__, light.__name__, lazypkg.light.Light.__name__, "RAN" in vars(sys.modules["lazypkg"]))
        """,
    )
    assert out == "lazypkg.heavy lazypkg.light Light False"


def test_any_other_name_runs_the_real_init_once(root: Path) -> None:
    out = _run(
        root,
        """
        import lazypkg
        print(lazypkg.EXTRA, lazypkg.RAN, lazypkg.Light.__module__)
        """,
    )
    assert out == "only the real __init__ defines me True lazypkg.light"


def test_a_nested_package_is_its_parents_attribute(root: Path) -> None:
    (root / "lazypkg" / "inner").mkdir()
    (root / "lazypkg" / "inner" / "__init__.py").write_text("import sys\nsys.modules[__name__].RAN = True\n")
    (root / "lazypkg" / "inner" / "leaf.py").write_text("LEAF = 1\n")
    out = _run(
        root,
        """
        import lazypkg.inner.leaf
        print(lazypkg.inner.leaf.LEAF, "RAN" in vars(sys.modules["lazypkg.inner"]))
        """,
        package="lazypkg.inner",
    )
    assert out == "1 False"


def test_a_package_already_imported_or_missing_is_left_alone() -> None:
    before = sys.modules["json"]
    lazy_package("json")
    assert sys.modules["json"] is before
    lazy_package("no_such_package_for_dovecote")
    assert "no_such_package_for_dovecote" not in sys.modules
    with pytest.raises(ImportError):
        __import__("no_such_package_for_dovecote")
