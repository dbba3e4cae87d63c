"""The import graph of the code that ships (dovecote, functions, infra): no cycles, and the boundaries
the design draws. grimp reads every import statement, a lazy one inside a function included, so a
cycle hidden behind a deferred import is still found."""

from __future__ import annotations

from functools import cache

import grimp
import pytest

PACKAGES = ("dovecote", "functions", "infra")


@cache
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def cycles(g: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    edges = {m: sorted(g.find_modules_directly_imported_by(m)) for m in g.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            for nxt in edges[node]:
                if nxt in on_stack:
                    low[node] = min(low[node], low[nxt])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_finder_sees_a_cycle() -> None:
    # The check must be able to fail: two modules that import each other, lazily on one side.
    g = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        g.add_module(name)
    g.add_import(importer="pkg.a", imported="pkg.b")
    g.add_import(importer="pkg.b", imported="pkg.a")
    g.add_import(importer="pkg.c", imported="pkg.a")
    assert cycles(g) == [["pkg.a", "pkg.b"]]


def test_the_shipped_code_has_no_import_cycle() -> None:
    assert cycles(graph()) == []


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("dovecote.tasks", "dovecote.notes"),  # uploads and checksums live in platform/
        ("dovecote.platform", "dovecote.tasks"),
        ("dovecote.platform", "dovecote.notes"),
        ("dovecote.platform", "dovecote.recall"),
        ("dovecote.platform", "dovecote.memory"),
        ("dovecote", "functions"),  # the layer never imports a handler
        ("dovecote", "infra"),  # but for `dovecote dev`, which starts the local runtime (below)
    ],
)
def test_a_boundary_holds(importer: str, imported: str) -> None:
    chains = graph().find_shortest_chains(importer=importer, imported=imported, as_packages=True)
    chains = {c for c in chains if c[:2] != ("dovecote.cli.dev", "infra.local.runtime")}
    assert not chains, f"{importer} reaches {imported}: {sorted(chains)[:3]}"


def test_only_the_dev_command_reaches_the_local_runtime() -> None:
    chains = graph().find_shortest_chains(importer="dovecote", imported="infra", as_packages=True)
    assert {c[0] for c in chains} == {"dovecote.cli.dev"}
