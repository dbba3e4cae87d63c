"""The web console's browser tests: Debian's chromium, driven by Playwright's Python package with
`executable_path` (Playwright never downloads a browser here), against a `dovecote dev` of the
module's own. One runtime and one browser per module; each test opens fresh pages (a new tab has an
empty sessionStorage, so nothing signs in by accident).

Without chromium, Playwright or a built console these tests skip and say why, except under CI=true,
where .ci/run installs them and they must run."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CI, ROOT
from tests.e2e.conftest import mint_dev_token, start_dev

CHROMIUM = os.environ.get("DOVECOTE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# The machine's network is closed: without these, Chromium waits on updates, sync and QUIC probes.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
AXE = ROOT / "console" / "node_modules" / "axe-core" / "axe.min.js"
BUILT = ROOT / "console" / "dist" / "index.html"
SCREENSHOTS = ROOT / "docs" / "clients" / "img"
PERSON = "person"
EXPECTED_404 = re.compile(
    r"/v1/(tasks/[^/?]+/stream|workspaces/[^/?]+/head|workspaces/[^/?]+/artifacts/[^/?]+/receipt)(\?|$)"
)


def _missing() -> str:
    if not Path(CHROMIUM).is_file():
        return "chromium is not installed (apt-get install chromium chromium-driver; .ci/run does)"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "playwright is not installed (make install)"
    if not BUILT.is_file() or not AXE.is_file():
        return "the console is not built (it needs npm: install Node.js and npm, then make install)"
    return ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = str(Path(__file__).parent)
    mine = [item for item in items if str(item.fspath).startswith(here)]
    why = _missing()
    if not mine or not why:
        return
    if CI:
        raise pytest.UsageError(f"CI=true but {why}: the console's browser tests cannot be skipped in CI")
    for item in mine:
        item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(scope="module")
def console_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A `dovecote dev` of this module's own, with a worker token for the person's seat."""
    with start_dev(tmp_path_factory.mktemp("console-dev"), "--dispatch-interval", "0.5") as runtime:
        runtime["person_worker"] = mint_dev_token(runtime, "dev", "worker", PERSON)
        yield runtime


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless chromium for the module (Playwright gives it a new empty profile directory)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield launched
        launched.close()


class Watch:
    """What a page did that it must not: a dialog (alert, confirm, prompt), an uncaught error, or a
    console error (a CSP violation is one)."""

    def __init__(self) -> None:
        self.dialogs: list[str] = []
        self.errors: list[str] = []

    def attach(self, page: Any) -> Any:
        def on_dialog(dialog: Any) -> None:
            self.dialogs.append(f"{dialog.type}: {dialog.message}")
            dialog.dismiss()

        page.on("dialog", on_dialog)
        page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))
        page.on("console", lambda m: self._console(m))
        return page

    def _console(self, message: Any) -> None:
        if message.type != "error":
            return
        where = (message.location or {}).get("url", "")
        # Answers the console expects and reads as "absent" (Chromium logs each as an error): the
        # stream route of an API without it, a workspace with no head yet, an artifact without a receipt.
        if "status of 404" in message.text and EXPECTED_404.search(where):
            return
        self.errors.append(f"console.{message.type}: {message.text} ({where})")

    def assert_clean(self) -> None:
        assert self.dialogs == [], self.dialogs
        assert self.errors == [], self.errors


@pytest.fixture
def watch() -> Watch:
    return Watch()


@pytest.fixture
def page(browser: Any, watch: Watch) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    tab = watch.attach(context.new_page())
    tab.set_default_timeout(30_000)  # a loaded two-core CI machine once took over 15 s to sign in
    yield tab
    context.close()


def sign_in(page: Any, endpoint: str, *tokens: str, view: str = "board") -> None:
    """Paste each token on the sign-in page, then open `view`."""
    page.goto(f"{endpoint}/console/#/signin")
    for token in tokens:
        page.get_by_label("Token", exact=True).fill(token)
        page.keyboard.press("Enter")
        page.wait_for_function(
            "n => JSON.parse(sessionStorage.getItem('dovecote.console.tokens') || '[]').length >= n",
            arg=tokens.index(token) + 1,
        )
        page.goto(f"{endpoint}/console/#/signin")
    page.goto(f"{endpoint}/console/#/{view}")


def screenshot(page: Any, name: str) -> Path:
    """A screenshot of the page, taken by the test that drives the view. `make screenshots` (these
    tests with DOVECOTE_SCREENSHOTS=docs) writes them over the docs' pictures
    (docs/clients/console.md); an ordinary run writes them under .build/screenshots, so `make test`
    leaves the working tree as it found it (a PNG's bytes differ from run to run)."""
    folder = SCREENSHOTS if os.environ.get("DOVECOTE_SCREENSHOTS") == "docs" else ROOT / ".build" / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"console-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def run_axe(page: Any) -> list[dict[str, Any]]:
    """axe-core (from the console's npm dev dependencies) on the page as it is: its serious and
    critical violations."""
    page.evaluate(AXE.read_text())
    result = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".map(v => ({id: v.id, impact: v.impact, help: v.help,"
        " nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)}))"
    )
    return [v for v in result if v["impact"] in ("serious", "critical")]


def console_link(runtime: dict[str, Any]) -> str:
    """The link this start wrote to its private file (the banner, going to a log, names the file
    and never prints the link's token)."""
    banner = re.findall(r"console: (\S+)  \(a one-time sign-in link is in (\S+);", runtime["log"].read_text())
    assert banner, "dovecote dev named no console link file"
    url, file = banner[-1]
    link = Path(file).read_text().strip()
    assert link.startswith(f"{url}#link=dvc_"), link[: len(url)]
    assert Path(file).stat().st_mode & 0o077 == 0  # the owner's alone
    return link


def new_link(runtime: dict[str, Any]) -> str:
    """A fresh one-time link, as a new `dovecote dev` start prints (an admin token of one day)."""
    token = mint_dev_token(runtime, "dev", "admin")
    return f"{runtime['endpoint']}/console/#link={token}"
