"""Fuzz the local runtime from its own OpenAPI document (tests/support/fuzzing.py): every operation
but the task service's (test_schemathesis_tasks.py), as its owner and as the two other roles; the
served document is the fuzzed one; an unknown method is API Gateway's 404."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from functions.admin_api.handler import openapi_document
from tests.conftest import examples
from tests.support.fuzzing import (
    OTHER_EXAMPLES,
    OTHER_PREFIXES,
    conforms,
    lazy_schemas,
)

schema, schema_few = lazy_schemas(OTHER_PREFIXES)


def test_served_document_is_the_fuzzed_one(dev_runtime: dict[str, Any]) -> None:
    import httpx

    # The runtime builds the document on the first request (every function's routes and models: a few
    # seconds on a loaded machine, more than httpx's 5 s default when this file runs first).
    served = httpx.get(dev_runtime["endpoint"] + "/v1/openapi.json", timeout=120)
    assert served.json() == openapi_document()


@schema.parametrize()
@settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_schema(case: Any, dev_runtime: dict[str, Any]) -> None:
    conforms(case, dev_runtime, "owner")


@schema_few.parametrize()
@pytest.mark.usefixtures("role")  # a lazy schema's test takes fixtures (pytest.mark.parametrize cannot see it)
@settings(max_examples=OTHER_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_other_roles_get_documented_answers(case: Any, dev_runtime: dict[str, Any], role: str) -> None:
    conforms(case, dev_runtime, role)


def test_unknown_methods_are_404_like_api_gateway(dev_runtime: dict[str, Any]) -> None:
    """The reason unsupported_method is excluded above, checked: a method a path does not have is
    API Gateway's own 404, before any function runs."""
    import httpx

    for method, path in (("PATCH", "/v1/notes"), ("DELETE", "/v1/tasks"), ("PUT", "/v1/health")):
        response = httpx.request(method, dev_runtime["endpoint"] + path, headers={"Authorization": "Bearer x"})
        assert (response.status_code, response.json()) == (404, {"message": "Not Found"}), (method, path)
