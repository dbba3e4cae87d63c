"""Fuzz the local runtime from its own OpenAPI document (tests/support/fuzzing.py): every operation
but the task service's (test_schemathesis_tasks.py), as its owner and as the two other roles; the
served document is the fuzzed one; an unknown method is API Gateway's 404."""

from __future__ import annotations

from typing import Any

from functions.admin_api.handler import openapi_document
from tests.support.fuzzing import OTHER_PREFIXES, fuzz_tests

test_api_conforms_to_its_schema, test_the_other_roles_get_documented_answers = fuzz_tests(OTHER_PREFIXES)


def test_served_document_is_the_fuzzed_one(dev_runtime: dict[str, Any]) -> None:
    import httpx

    # The runtime builds the document on the first request (every function's routes and models: a few
    # seconds on a loaded machine, more than httpx's 5 s default when this file runs first).
    served = httpx.get(dev_runtime["endpoint"] + "/v1/openapi.json", timeout=120)
    assert served.json() == openapi_document()


def test_unknown_methods_are_404_like_api_gateway(dev_runtime: dict[str, Any]) -> None:
    """The reason unsupported_method is excluded above, checked: a method a path does not have is
    API Gateway's own 404, before any function runs."""
    import httpx

    for method, path in (("PATCH", "/v1/notes"), ("DELETE", "/v1/tasks"), ("PUT", "/v1/health")):
        response = httpx.request(method, dev_runtime["endpoint"] + path, headers={"Authorization": "Bearer x"})
        assert (response.status_code, response.json()) == (404, {"message": "Not Found"}), (method, path)
