"""The manual builds (issue 35): `mkdocs build --strict` with the checks mkdocs.yml turns on, so a
broken link or anchor, a page left out of the nav, or a warning of any kind fails; the API reference
is generated from the served OpenAPI document; the README's links into docs/ reach real pages."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from infra.docs_site import OPENAPI_MARK, operation_anchor, render_openapi, with_guides
from tests.conftest import ROOT


def build(site: Path, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    if config:
        argv += ["--config-file", str(config)]
    env = os.environ | {"NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = build(tmp_path / "site")
    assert done.returncode == 0, done.stderr[-4000:]
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
    reference = (tmp_path / "site" / "reference" / "http-api" / "index.html").read_text()
    assert OPENAPI_MARK not in reference and 'id="post-v1-tasks"' in reference
    assert (tmp_path / "site" / "reference" / "openapi.json").is_file()
    # The A2A client shown is the example file itself (a snippet), not a copy that could drift.
    a2a = (tmp_path / "site" / "clients" / "a2a" / "index.html").read_text()
    assert "A2ACardResolver" in a2a


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The check can fail: the same site with one page linking to a page that does not exist."""
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(ROOT / "docs"), str(docs)], check=True)
    (docs / "development.md").write_text((docs / "development.md").read_text() + "\n[gone](no-such-page.md)\n")
    config = tmp_path / "mkdocs.yml"
    text = (ROOT / "mkdocs.yml").read_text().replace("docs_dir: docs", f"docs_dir: {docs}")
    config.write_text(text.replace("infra/docs_site.py", str(ROOT / "infra" / "docs_site.py")))
    done = build(tmp_path / "site", config)
    assert done.returncode != 0 and "no-such-page.md" in done.stderr


def test_a_guide_joins_the_nav_without_a_nav_edit(tmp_path: Path) -> None:
    (tmp_path / "guides").mkdir()
    (tmp_path / "guides" / "streams.md").write_text("# Task streams\n")
    nav = with_guides([{"Home": "index.md"}, {"Guides": ["guides/index.md"]}], tmp_path)
    assert nav[1] == {"Guides": ["guides/index.md", {"Task streams": "guides/streams.md"}]}


def test_the_reference_has_every_operation() -> None:
    from functions.admin_api.handler import openapi_document

    doc = openapi_document()
    page = render_openapi(doc)
    for path, operations in doc["paths"].items():
        for method in operations:
            assert f"{{#{operation_anchor(method, path)}}}" in page, (method, path)


def test_the_readme_links_reach_pages() -> None:
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", readme)
    assert links, "the README links into the manual"
    assert [link for link in links if not (ROOT / link).is_file()] == []
