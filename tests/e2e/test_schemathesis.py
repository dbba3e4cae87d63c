"""Fuzz the local runtime from its own OpenAPI document: no 5xx, and every response matches the
documented status codes and schemas. New services join by adding their path prefix here."""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi import checks as openapi_checks

from functions.admin_api.handler import openapi_document

FUZZED_PREFIXES = ("/v1/notes", "/v1/admin/tokens", "/v1/health", "/v1/tasks", "/v1/contexts", "/v1/leases")


# The same document GET /v1/openapi.json serves (a test below checks that), built in-process so
# the operations are known at collection time.
schema = schemathesis.openapi.from_dict(openapi_document()).include(path_regex="^(" + "|".join(FUZZED_PREFIXES) + ")")


def test_served_document_is_the_fuzzed_one(dev_runtime: dict[str, Any]) -> None:
    import httpx

    assert httpx.get(dev_runtime["endpoint"] + "/v1/openapi.json").json() == openapi_document()


@schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_schema(case: Any, dev_runtime: dict[str, Any]) -> None:
    token = dev_runtime["tokens"]["caller"]
    case.call_and_validate(
        base_url=dev_runtime["endpoint"],
        headers={"Authorization": f"Bearer {token}"},
        excluded_checks=[
            # The schema types a note's coordinates; the domain gate is narrower (key and name
            # non-empty, run >= 1), so schema-valid input may rightly be refused with 400.
            openapi_checks.positive_data_acceptance,
            # API Gateway answers an unknown method on a known path 404, not 405.
            openapi_checks.unsupported_method,
        ],
    )
