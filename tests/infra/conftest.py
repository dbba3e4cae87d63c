"""CDK synthesis runs aws-cdk-lib through jsii, which needs Node.js. Outside CI a machine without
Node skips these tests with the reason; under CI=true they must run, so a missing Node fails."""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


NO_NODE = "Node.js is not installed; aws-cdk-lib needs it to synthesize (apt-get install nodejs)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if shutil.which("node"):
        return
    if os.environ.get("CI") == "true":
        raise pytest.UsageError("CI=true but Node.js is missing: the CDK infra tests cannot be skipped in CI")
    skip = pytest.mark.skip(reason=NO_NODE)
    for item in items:
        if "tests/infra" in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def production_template(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The stack synthesized with the production context, as a CDK assertions Template."""
    from aws_cdk import App
    from aws_cdk.assertions import Template

    from infra.build import build_functions, build_layer
    from infra.stack import DovecoteStack

    app = App(outdir=str(tmp_path_factory.mktemp("prod")))
    DovecoteStack(app, "Prod", layer_dir=build_layer(quiet=True), functions_dir=build_functions(), production=True)
    return Template.from_stack(app.node.find_child("Prod"))  # type: ignore[arg-type]
