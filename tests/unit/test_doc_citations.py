"""The repo holds its own contract (issue 35): a comment or docstring that says why a rule is as it is
cites a page of the manual, `docs/<page>.md#<anchor>`, never a document beside the repository (a fresh
clone has nothing beside it). Every `docs/` citation must name a page and an anchor that exist."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from markdown import Markdown

from infra.docs_site import GUIDES_MARK, OPENAPI_MARK, openapi, render_openapi
from tests.conftest import ROOT

SOURCES = ("shared", "functions", "infra", "tests", "bench", "examples", "docs")
ROOT_FILES = ("README.md", "Makefile", "pyproject.toml", "mkdocs.yml", "cdk.json")
SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".txt", ".json", ".cfg", ""}
SKIP_PARTS = {"__pycache__", ".venv", "node_modules", "data", "target", ".build", "cdk.out"}
# Documents that live outside the repository: the design notes and seed specs it was built from. Each
# pattern is spelled so that this file does not match itself.
OUTSIDE = [
    re.compile(pattern)
    for pattern in (
        r"\bSEMANTICS\b",
        r"\bAPI" + r"\.md\b",
        r"\bARCHITECTURE" + r"\.md\b",
        r"\bSTYLE" + r"\.md\b",
        r"\bseeds" + r"/",
        r"(?i)\bthe seed(?:'s)?\b(?!ed)",
        r"/work" + r"/shared",
        r"\bshared" + r"/design\b",
    )
]
CITATION = re.compile(r"\bdocs/([\w./-]+\.md)(?:#([\w-]+))?")


def sources() -> list[Path]:
    found = [ROOT / name for name in ROOT_FILES if (ROOT / name).is_file()]
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*")):
            if not path.is_file() or path.suffix not in SUFFIXES or path == Path(__file__):
                continue
            if SKIP_PARTS & set(path.relative_to(ROOT).parts) or path.name.endswith(".egg-info"):
                continue
            if ".egg-info" in str(path):
                continue
            found.append(path)
    return found


@cache
def anchors(page: str) -> frozenset[str]:
    """The ids MkDocs gives the page's headings (Python-Markdown's toc, with attr_list ids)."""
    text = (ROOT / "docs" / page).read_text()
    text = text.replace(OPENAPI_MARK, render_openapi(openapi()) if OPENAPI_MARK in text else "")
    text = text.replace(GUIDES_MARK, "")
    md = Markdown(extensions=["toc", "attr_list", "tables"])
    md.convert(text)
    ids: set[str] = set()

    def walk(tokens: list[dict[str, object]]) -> None:
        for token in tokens:
            ids.add(str(token["id"]))
            walk(token["children"])  # type: ignore[arg-type]

    walk(md.toc_tokens)  # type: ignore[attr-defined]
    return frozenset(ids)


def test_no_source_cites_a_document_outside_the_repo() -> None:
    found = []
    for path in sources():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for pattern in OUTSIDE:
                if pattern.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
                    break
    assert found == [], "cite docs/<page>.md#<anchor> instead:\n" + "\n".join(found)


def test_every_cited_docs_page_and_anchor_exists() -> None:
    broken = []
    cited = 0
    for path in sources():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for page, anchor in CITATION.findall(line):
                page = page.rstrip(".")
                cited += 1
                where = f"{path.relative_to(ROOT)}:{number}: docs/{page}" + (f"#{anchor}" if anchor else "")
                if not (ROOT / "docs" / page).is_file():
                    broken.append(where + " (no such page)")
                elif anchor and anchor not in anchors(page):
                    broken.append(where + f" (no such anchor; the page has {sorted(anchors(page))[:12]}…)")
    assert broken == []
    assert cited > 0, "the code cites the manual somewhere"


@pytest.mark.parametrize(
    ("line", "outside"),
    [
        ("# The state machine of SEMANTICS §2", True),
        ("(API" + ".md § Tasks)", True),
        ("the seed's rule", True),
        ("a seeded runtime", False),
        ("# docs/design/tasks.md#the-check-order", False),
    ],
)
def test_the_patterns_can_fail(line: str, outside: bool) -> None:
    assert any(pattern.search(line) for pattern in OUTSIDE) is outside


def test_an_anchor_that_does_not_exist_is_found() -> None:
    assert "the-check-order" in anchors("design/tasks.md")
    assert "no-such-anchor" not in anchors("design/tasks.md")
