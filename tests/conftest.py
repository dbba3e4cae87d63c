"""Suite-wide wiring: each test gets the marker of its directory (unit, integration, infra, e2e)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support import confinement
from tests.support.schedule import weights

ROOT = Path(__file__).resolve().parent.parent
# Fixtures live in the repo (tests/data, with their sources and licenses): a fresh clone has
# nothing beside it, and tests/unit/test_repo_confinement.py holds every test to that.
DATA = ROOT / "tests" / "data"
LAYERS = ("unit", "integration", "infra", "e2e")
CI = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")

# Hypothesis searches a quarter as deep at a desk as under CI=true, where every property runs the
# number of examples it was written with. A test that names its own count writes the CI figure
# through `examples()`; the profile sets the others (hypothesis' default, 100, under CI).
DESK_SHARE = 4
settings.register_profile("ci", max_examples=100)
settings.register_profile("desk", max_examples=100 // DESK_SHARE)
settings.load_profile("ci" if CI else "desk")


def examples(ci: int) -> int:
    """A property's example count: `ci` under CI=true, a quarter of it (at least 10) otherwise."""
    return ci if CI else max(10, ci // DESK_SHARE)


confinement.install()


@pytest.fixture(autouse=True)
def _reads_nothing_beside_the_clone() -> Iterator[None]:
    """A test that opens or lists anything beside the clone fails (tests/support/confinement.py)."""
    confinement.take()
    yield
    if seen := confinement.take():
        pytest.fail(f"read beside the clone, which a fresh clone does not have: {seen[:5]}", pytrace=False)


# The shared OpenSearch node (`opensearch_url`): a plugin so its configure/unconfigure hooks run in
# the xdist controller.
pytest_plugins = ("tests.opensearch_fixture",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).relative_to(ROOT / "tests").parts
        if parts and parts[0] in LAYERS:
            item.add_marker(getattr(pytest.mark, parts[0]))
    # The slowest files first, so xdist's workers finish together (tests/support/schedule.py); the
    # sort is stable, so a file's own tests keep their order.
    seconds = weights()
    items.sort(key=lambda item: -seconds.get(item.nodeid.partition("::")[0], 0.0))


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach real AWS: fake credentials and no inherited endpoint or profile."""
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Dovecote")
    monkeypatch.setenv("DOVECOTE_CURSOR_KEY", "unit-test-cursor-key-0123456789")
    os.environ.pop("DOVECOTE_CURSOR_SECRET_ARN", None)
