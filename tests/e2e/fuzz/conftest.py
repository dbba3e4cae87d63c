"""The fuzzing modules' fixtures (tests/support/fuzzing.py has the checks): the lazy schemas, a
runtime of each module's own, the other roles."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis

from tests.e2e.conftest import start_dev
from tests.support.fuzzing import CONFIG, CONFIG_FEW, DOCUMENT, OTHER_ROLES


# Lazy schemas, loaded from a fixture when a test runs, each operation a subtest: the coverage phase
# computes every boundary case of every operation when its test is built, which for eagerly
# parametrized tests is at collection, in every xdist worker, whichever of them runs this file
# (50 s of each worker's start on CI's two cores).
@pytest.fixture(scope="module")
def api_schema() -> Any:
    return schemathesis.openapi.from_dict(DOCUMENT, config=CONFIG)


@pytest.fixture(scope="module")
def api_schema_few() -> Any:
    return schemathesis.openapi.from_dict(DOCUMENT, config=CONFIG_FEW)


@pytest.fixture(autouse=True)
def _node_id_for_schemathesis(request: pytest.FixtureRequest) -> None:
    """schemathesis' lazy tests read and rename `node._nodeid` to label each operation's subtest; pytest
    9.2 keeps the id elsewhere (`_id`), so the attribute it reads is given (the renaming is cosmetic)."""
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid


@pytest.fixture(scope="module")
def dev_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A runtime of this module's own: with the worker token the fuzzer claims the oldest claimable
    task, which on the shared runtime would be another test's (its worker would then find it leased)."""
    # A task stream lasts until its task ends: here 5 s at most (the least the setting takes; then
    # `event: reconnect`), so a fuzzed
    # stream of a live task is read whole, its messages checked against the document, and ends.
    with start_dev(
        tmp_path_factory.mktemp("dev-fuzz"),
        "--faults",
        "--dispatch-interval",
        "0.5",
        settings={"DOVECOTE_STREAM_SECONDS": "5"},
    ) as runtime:
        yield runtime


@pytest.fixture(params=OTHER_ROLES)
def role(request: pytest.FixtureRequest) -> str:
    return str(request.param)
