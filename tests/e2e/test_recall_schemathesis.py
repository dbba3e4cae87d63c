"""Fuzz the recall routes from the served OpenAPI document: no 5xx, and every response matches the
documented status codes and schemas. (The shared fuzz test lists the other services' prefixes; the
lead may fold this prefix into it.)"""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi import checks as openapi_checks

from functions.admin_api.handler import openapi_document

RECALL_PREFIXES = ("/v1/recall", "/v1/transcripts")

schema = schemathesis.openapi.from_dict(openapi_document()).include(path_regex="^(" + "|".join(RECALL_PREFIXES) + ")")

TOKEN: dict[str, str] = {}


@schema.auth()
class DevBearer:
    def get(self, case: Any, context: Any) -> str:
        return TOKEN.get("caller", "pending")

    def set(self, case: Any, data: str, context: Any) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


@schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_recall_conforms_to_its_schema(case: Any, dev_runtime: dict[str, Any]) -> None:
    TOKEN["caller"] = dev_runtime["tokens"]["caller"]
    if case.headers and "Authorization" in case.headers:
        case.headers["Authorization"] = f"Bearer {TOKEN['caller']}"
    case.call_and_validate(
        base_url=dev_runtime["endpoint"],
        excluded_checks=[
            # The schema types the parameters; the domain gates are narrower (a ref's grammar, a
            # transcript's shape), so schema-valid input may rightly be refused with 400.
            openapi_checks.positive_data_acceptance,
            openapi_checks.unsupported_method,
            openapi_checks.negative_data_rejection,
        ],
    )
