"""No test, fixture, benchmark or source reaches beside the clone.

A user's fresh clone sits alone in an empty directory, so anything read from `../shared` (this
team's layout) or another sibling works only here. The run-time half of the rule is an audit hook
(tests/support/confinement.py) that fails any test opening such a path; this file is the static
half: it reads every Python source for a path that climbs out of the repo, and proves both guards
can fail.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from tests.support import confinement
from tests.support.confinement import ROOT, beside_the_clone

SCANNED = ("tests", "bench", "shared", "functions", "infra", "examples")
OPENERS = {"Path", "open", "PurePath"}  # calls whose string argument is a file-system path


def _sources() -> list[Path]:
    # This file is left out: it spells out the ways out, to prove the guard finds them.
    here = Path(__file__).resolve()
    return sorted(p for d in SCANNED for p in (ROOT / d).rglob("*.py") if ".venv" not in p.parts and p != here)


def _chain(node: ast.expr, file: Path, names: dict[str, Path]) -> Path | None:
    """The directory an expression built from `Path(__file__)` (or a name bound to one) names, or None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Path":
        if len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id == "__file__":
            return file
        return None
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return _chain(node.func.value, file, names) if node.func.attr in ("resolve", "absolute") else None
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        base = _chain(node.value, file, names)
        return base.parent if base else None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents":
        base = _chain(node.value.value, file, names)
        if base and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
            return base.parents[node.slice.value] if node.slice.value < len(base.parents) else Path("/")
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant):
        base = _chain(node.left, file, names)
        if base and isinstance(node.right.value, str):
            return Path(os.path.normpath(base / node.right.value))
    return None


def module_name(file: Path) -> str:
    """The dotted name a repo file is imported by (shared/ is the `dovecote` package's root)."""
    parts = file.relative_to(ROOT).with_suffix("").parts
    parts = parts[1:] if parts[0] == "shared" else parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def bound_paths(source: str, file: Path) -> dict[str, Path]:
    """The names a module binds to a path built from `Path(__file__)` (ROOT and the like)."""
    names: dict[str, Path] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if (target := _chain(node.value, file, names)) is not None:
                names[node.targets[0].id] = target
    return names


def reaches_out(source: str, file: Path, modules: dict[str, dict[str, Path]] | None = None) -> list[str]:
    """Every place in `source` (the text of `file`) that names a path beside the clone. `modules`:
    the paths other repo modules bind, for a name imported from one (`from bench.common import ROOT`)."""
    found: dict[int, str] = {}  # one finding per line: the outermost expression's
    nodes = list(ast.walk(ast.parse(source)))  # breadth first: a line's outermost expression first
    docstrings = {
        id(node.body[0].value)
        for node in nodes
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    # Strings used as paths: arguments of Path()/open() and the right side of `/`. Elsewhere a
    # "../x" is usually hostile input under test (a traversal an id must refuse), not a path.
    as_paths = {
        id(arg)
        for node in nodes
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in OPENERS
        for arg in node.args
    } | {id(node.right) for node in nodes if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)}
    names: dict[str, Path] = {}
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and modules and node.module in modules:
            for alias in node.names:
                if alias.name in modules[node.module]:
                    names[alias.asname or alias.name] = modules[node.module][alias.name]
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if (target := _chain(node.value, file, names)) is not None:
                names[node.targets[0].id] = target
    shown = file.relative_to(ROOT) if file.is_relative_to(ROOT) else file
    for node in nodes:
        line = getattr(node, "lineno", 0)
        if line in found:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value
            climbs = id(node) in as_paths and text.replace("\\", "/").startswith("../")
            if "../shared" in text or climbs or (text.startswith("/") and beside_the_clone(text)):
                found[line] = f"{shown}:{line}: {text[:60]!r}"
        elif isinstance(node, ast.expr) and not isinstance(node, ast.Name):
            target = _chain(node, file, names)
            if target is not None and not target.is_relative_to(ROOT):
                found[line] = f"{shown}:{line}: resolves to {target}"
    return [found[line] for line in sorted(found)]


def test_no_source_names_a_path_beside_the_clone() -> None:
    sources = {path: path.read_text() for path in _sources()}
    modules = {module_name(path): bound_paths(text, path) for path, text in sources.items()}
    found = [hit for path, text in sources.items() for hit in reaches_out(text, path, modules)]
    assert found == []


def test_a_name_imported_from_another_module_is_followed() -> None:
    """`ROOT.parent / "shared"` where ROOT comes from another module (bench/recall.py did this)."""
    here = ROOT / "bench" / "planted.py"
    source = "from bench.common import ROOT\nSAMPLE = ROOT.parent / 'shared' / 'data'\n"
    modules = {"bench.common": {"ROOT": ROOT}}
    assert [hit.split(":")[1] for hit in reaches_out(source, here, modules)] == ["2"]
    assert reaches_out(source, here) == []  # without the other module's bindings it is invisible


def test_the_static_guard_finds_each_way_out() -> None:
    here = ROOT / "tests" / "unit" / "planted.py"
    planted = (
        "from pathlib import Path\n"
        "ROOT = Path(__file__).resolve().parents[2]\n"
        "A = ROOT.parent / 'shared' / 'data'\n"  # the sibling folder by name
        "B = Path(__file__).parents[3]\n"  # one level above the repo
        "C = ROOT / '..' / 'x'\n"
        "D = '../shared/data/transcripts'\n"
        f"E = {str(ROOT.parent / 'shared' / 'data')!r}\n"
        "F = open('../notes.json')\n"
        "G = '../etc/passwd'  # hostile input under test, not a path the suite opens\n"
    )
    found = reaches_out(planted, here)
    assert [hit.split(":")[1] for hit in found] == ["3", "4", "5", "6", "7", "8"], found
    inside = "from pathlib import Path\nROOT = Path(__file__).resolve().parents[2]\nX = ROOT / 'tests'\n"
    assert reaches_out(inside, here) == []


def test_the_run_time_guard_sees_an_open_beside_the_clone() -> None:
    # Given the audit hook the suite installs, when a test opens a path beside the clone (absent
    # here, which is the point: the event fires before the file system answers) ...
    beside = ROOT.parent / "no-such-sibling-of-the-clone" / "vectors.json"
    with pytest.raises(OSError):
        open(beside)  # noqa: SIM115 - the open itself is the event under test
    # ... then the hook recorded it (and the suite's fixture would fail this test for it).
    assert confinement.take() == [str(beside)]


@pytest.mark.parametrize(
    ("path", "beside"),
    [
        (str(ROOT / "tests" / "data" / "x.json"), False),
        (str(ROOT), False),
        (str(ROOT.parent / "shared" / "data"), True),
        (str(ROOT) + "-other/x", True),  # a sibling whose name starts like the clone's
        (str(ROOT.parent / ".cache" / "pip"), False),  # a home directory's dot-folders
        ("/usr/lib/python3/x.py", ROOT.parent == Path("/usr/lib/python3")),
    ],
)
def test_beside_the_clone(path: str, beside: bool) -> None:
    assert beside_the_clone(path, allowed=()) is beside


def test_a_clone_inside_the_temporary_directory_still_has_siblings() -> None:
    """A new user's clone under /tmp: the temporary directory is an allowed place, but it holds the
    clone, so what sits beside the clone is still beside it; a temporary file is not."""
    root = Path("/tmp/fresh/dovecote")
    assert beside_the_clone("/tmp/fresh/shared/data/x.json", root, allowed=("/tmp",))
    assert not beside_the_clone("/tmp/pytest-of-root/x", root, allowed=("/tmp",))
    direct = Path("/tmp/dovecote")  # cloned straight into /tmp
    assert beside_the_clone("/tmp/shared/data/x.json", direct, allowed=("/tmp",))
    assert not beside_the_clone("/tmp/tmpab12cd/x", direct, allowed=("/tmp",))
    assert not beside_the_clone("/tmp/pytest-of-root/pytest-3/x", direct, allowed=("/tmp",))
