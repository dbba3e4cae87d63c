"""`dovecote dev`'s console files (infra/local/console.py): only built files, by name, with the
console's security headers; a missing build says how to build it."""

from __future__ import annotations

from pathlib import Path

import pytest
from werkzeug.test import Client
from werkzeug.wrappers import Response

from infra.console import content_security_policy, security_headers
from infra.local.console import ConsoleAssets


def api(environ: dict[str, object], start_response: object) -> list[bytes]:
    return Response("api", status=200)(environ, start_response)  # type: ignore[arg-type]


@pytest.fixture
def built(tmp_path: Path) -> Path:
    (tmp_path / "index.html").write_text("<!doctype html><title>c</title>")
    (tmp_path / "app-0123456789ab.js").write_text("console.log(1)")
    (tmp_path / "config.json").write_text('{"api": ""}')
    (tmp_path / ".secret.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("x")
    return tmp_path


def test_the_page_and_its_files_carry_the_security_headers(built: Path) -> None:
    client = Client(ConsoleAssets(api, built))
    page = client.get("/console/")
    assert page.status_code == 200 and page.get_data(as_text=True).startswith("<!doctype html>")
    assert page.headers["Content-Type"] == "text/html; charset=utf-8"
    for name, value in security_headers().items():
        assert page.headers[name] == value
    csp = page.headers["Content-Security-Policy"]
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp and "frame-ancestors 'none'" in csp
    assert page.headers["Cache-Control"] == "no-cache"
    script = client.get("/console/app-0123456789ab.js")
    assert (
        script.headers["Content-Type"].startswith("text/javascript") and "immutable" in script.headers["Cache-Control"]
    )
    assert client.get("/console/config.json").get_json() == {"api": ""}
    assert client.get("/console").status_code == 308


@pytest.mark.parametrize(
    "path",
    [
        "/console/../pyproject.toml",
        "/console/%2e%2e/x.json",
        "/console/.secret.json",
        "/console/notes.txt",
        "/console/sub/index.html",
        "/console/missing.js",
    ],
)
def test_nothing_but_a_built_file_is_served(built: Path, path: str) -> None:
    answer = Client(ConsoleAssets(api, built)).get(path)
    assert answer.status_code in (404, 200) and answer.get_data(as_text=True) != "x"
    assert answer.status_code == 404 or answer.get_data(as_text=True) == "api"


def test_only_get_and_head(built: Path) -> None:
    client = Client(ConsoleAssets(api, built))
    assert client.post("/console/").status_code == 405
    head = client.head("/console/config.json")
    assert head.status_code == 200 and head.get_data() == b""


def test_other_paths_reach_the_api(built: Path) -> None:
    assert Client(ConsoleAssets(api, built)).get("/v1/health").get_data(as_text=True) == "api"


def test_a_missing_build_says_how_to_build_it(tmp_path: Path) -> None:
    answer = Client(ConsoleAssets(api, tmp_path / "dist")).get("/console/")
    assert answer.status_code == 503 and "make install" in answer.get_data(as_text=True)
    assert answer.headers["Content-Security-Policy"] == content_security_policy()


def test_the_csp_names_the_api_origin_when_it_is_elsewhere() -> None:
    csp = content_security_policy("https://abc.execute-api.eu-west-1.amazonaws.com")
    assert "connect-src 'self' https://abc.execute-api.eu-west-1.amazonaws.com;" in csp
