"""Fuzz the local runtime from its own OpenAPI document: no 5xx, and every response matches the
documented status codes and schemas. New services join by adding their path prefix here."""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi import checks as openapi_checks

from functions.admin_api.handler import openapi_document

FUZZED_PREFIXES = (
    "/v1/notes",
    "/v1/admin/tokens",
    "/v1/health",
    "/v1/tasks",
    "/v1/contexts",
    "/v1/leases",
    "/v1/recall",
    "/v1/transcripts",
    "/v1/workspaces",
    "/v1/worker",
    "/v1/memory",
)


# The same document GET /v1/openapi.json serves (a test below checks that), built in-process so
# the operations are known at collection time.
schema = schemathesis.openapi.from_dict(openapi_document()).include(path_regex="^(" + "|".join(FUZZED_PREFIXES) + ")")


def test_served_document_is_the_fuzzed_one(dev_runtime: dict[str, Any]) -> None:
    import httpx

    assert httpx.get(dev_runtime["endpoint"] + "/v1/openapi.json").json() == openapi_document()


TOKEN: dict[str, str] = {}


def refused_beyond_the_schema(case: Any) -> bool:
    """Rules JSON Schema cannot state, which the document says in words; each refusal is asserted by
    name elsewhere (test_recall_http.py, test_task_artifacts.py, test_memory_*.py):
    - recall's query grammar: balanced parentheses, an operator followed by a term;
    - recall's path patterns: valid RE2 within its program-size cap;
    - an apply receipt: `success` observes exactly the result revision, `conflict` names one;
    - memory tags: distinct case-insensitively, at most one `subject:<key>`, which has a key."""
    from dovecote.platform.errors import InvalidArgument
    from dovecote.recall.patterns import compile_path_pattern
    from dovecote.recall.query import parse_query

    path = case.operation.path
    body = case.body if isinstance(case.body, dict) else {}
    query = case.query or {}
    if path.startswith("/v1/recall/") and isinstance(query.get("q"), str):
        try:
            parse_query(query["q"])
        except InvalidArgument:
            return True
    for name in ("include_path", "exclude_path"):
        if path.startswith("/v1/recall/") and isinstance(query.get(name), str):
            try:
                compile_path_pattern(query[name], name)
            except InvalidArgument:
                return True
    if path.endswith("/receipt") and case.operation.method.upper() == "POST":
        decision, observed = body.get("decision"), body.get("observed_revision")
        if decision == "success" and observed != body.get("result_revision"):
            return True
        if decision == "conflict" and not observed:
            return True
    if path == "/v1/memory/writes" and isinstance(body.get("tags"), list):
        tags = [t.lower() for t in body["tags"] if isinstance(t, str)]
        subjects = [t for t in tags if t.startswith("subject:")]
        if len(set(tags)) != len(tags) or len(subjects) > 1 or "subject:" in subjects:
            return True
    return False


class DevBearer:
    """The bearer token as schemathesis' auth provider, so it knows every case is authenticated
    (a header added behind its back turns its 'no Authorization' negatives into false alarms)."""

    def get(self, case: Any, context: Any) -> str:
        # Coverage cases are generated at collection, before the runtime (and its token) exists.
        return TOKEN.get("caller", "pending")

    def set(self, case: Any, data: str, context: Any) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


schema.auth()(DevBearer)


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_schema(case: Any, dev_runtime: dict[str, Any]) -> None:
    conforms(case, dev_runtime)


def conforms(case: Any, dev_runtime: dict[str, Any]) -> None:
    """No 5xx, documented statuses and shapes, and every schema-valid request accepted."""
    TOKEN["caller"] = dev_runtime["tokens"]["caller"]
    # A cursor is opaque and signed: only one the server issued is valid, so a generated one is
    # rightly refused. Paging with real cursors is tested in test_notes_http.py / test_tasks_http.py.
    if case.query:
        case.query.pop("cursor", None)
    if case.headers and "Authorization" in case.headers:
        case.headers["Authorization"] = f"Bearer {TOKEN['caller']}"
    excluded = []
    if case.operation.method.upper() == "POST" and case.operation.path == "/v1/transcripts":
        # A JSONL body is a string whose content (at least one parseable session) JSON Schema cannot
        # express: a schema-valid file of garbage is rightly refused. Its refusals are asserted by
        # name in test_recall_http.py; the generic JSON form is fully described.
        body = case.body if isinstance(case.body, dict) else {}
        if "jsonl" in body:
            excluded.append(openapi_checks.positive_data_acceptance)
    if refused_beyond_the_schema(case):
        excluded.append(openapi_checks.positive_data_acceptance)
    case.call_and_validate(
        base_url=dev_runtime["endpoint"],
        excluded_checks=[
            *excluded,
            # API Gateway answers an unknown method on a known path 404, not 405.
            openapi_checks.unsupported_method,
            # Its negative cases are judged before serialization: an object `cursor` goes out as
            # `?cursor=` (a valid empty string), and the real token replacing the collection-time
            # placeholder counts as a header "violation". Unknown query parameters and bad values
            # are asserted by name in test_notes_http.py and test_tasks_http.py instead.
            openapi_checks.negative_data_rejection,
        ],
    )
