"""The conformance suites run every scenario on every store: each test function of a suite takes
its parametrised store fixture, so a new scenario cannot silently run on the fake alone (the list of
imported names it replaced did let that happen)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A conformance module → the fixture that stands for each store in turn (params memory, dynamo).
SUITES = {"tests/integration/test_task_machine.py": "service"}


def _tests(path: Path) -> list[ast.FunctionDef]:
    tree = ast.parse(path.read_text())
    return [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]


@pytest.mark.parametrize("module,fixture", sorted(SUITES.items()))
def test_every_scenario_takes_the_store_fixture(module: str, fixture: str) -> None:
    tests = _tests(ROOT / module)
    assert len(tests) >= 40, f"{module} lost scenarios: {len(tests)}"
    alone = [t.name for t in tests if fixture not in {a.arg for a in t.args.args + t.args.kwonlyargs}]
    assert not alone, f"these run on one store only: {alone}"


@pytest.mark.parametrize("module,fixture", sorted(SUITES.items()))
def test_the_fixture_is_parametrised_over_both_stores(module: str, fixture: str) -> None:
    source = (ROOT / module).read_text()
    assert f"{fixture} = service_fixture(" in source
    support = (ROOT / "tests/support/tasks.py").read_text()
    assert 'params=["memory", "dynamo"]' in support


def test_the_check_reads_the_arguments() -> None:
    """The check can fail: a scenario without the fixture is found."""
    tree = ast.parse("def test_x(clock):\n    pass\n")
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert "service" not in {a.arg for a in fn.args.args}
