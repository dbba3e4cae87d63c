"""Fuzz the task service's operations (tasks, contexts, leases, workspaces, worker events) from the
runtime's own OpenAPI document, as their owner and as the two other roles (tests/support/fuzzing.py;
the other services are fuzzed in test_schemathesis.py, on a runtime of their own)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.conftest import examples
from tests.support.fuzzing import (
    OTHER_EXAMPLES,
    TASK_PREFIXES,
    conforms,
    lazy_schemas,
)

schema, schema_few = lazy_schemas(TASK_PREFIXES)


@schema.parametrize()
@settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_schema(case: Any, dev_runtime: dict[str, Any]) -> None:
    conforms(case, dev_runtime, "owner")


@schema_few.parametrize()
@pytest.mark.usefixtures("role")  # a lazy schema's test takes fixtures (pytest.mark.parametrize cannot see it)
@settings(max_examples=OTHER_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_other_roles_get_documented_answers(case: Any, dev_runtime: dict[str, Any], role: str) -> None:
    conforms(case, dev_runtime, role)
