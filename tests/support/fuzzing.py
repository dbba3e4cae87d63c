"""Fuzzing the local runtime from its own OpenAPI document (tests/e2e/test_schemathesis*.py): no
5xx, and every response matches the documented status codes and schemas. The document, the
schemathesis configuration, the runtime each fuzzing module starts, the roles, and the refusals the
document states in words (each asserted by name elsewhere). New services join by adding their path
prefix here."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi import checks as openapi_checks

from dovecote.platform.schema import MAX_UTF8_BYTES
from dovecote.tasks.limits import MAX_CLAIM_WAIT
from functions.admin_api.handler import openapi_document
from tests.conftest import CI, examples

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
DOCUMENT = openapi_document()
# Schema-invalid data must be refused. 413 payload_too_large is one of Dovecote's refusals (an inline
# body or an upload over its limit, docs/reference/limits.md), beside schemathesis' default list.
CONFIG_DICT: dict[str, Any] = {
    "checks": {
        "negative_data_rejection": {
            "expected-statuses": [
                "400",
                "401",
                "403",
                "404",
                "405",
                "406",
                "409",
                "413",
                "415",
                "422",
                "428",
                "429",
                "5xx",
            ]
        }
    }
}
CONFIG = SchemathesisConfig.from_dict(CONFIG_DICT)
# The task service's operations are fuzzed in a file of their own (test_schemathesis_tasks.py), the
# rest in test_schemathesis.py: two workers, each with its runtime, share what was the suite's
# longest file.
TASK_PREFIXES = ("/v1/tasks", "/v1/contexts", "/v1/leases", "/v1/workspaces", "/v1/worker")
OTHER_PREFIXES = tuple(p for p in FUZZED_PREFIXES if p not in TASK_PREFIXES)
# Without the coverage phase: the other roles' few examples (below) need not repeat every boundary case.
CONFIG_FEW = SchemathesisConfig.from_dict({**CONFIG_DICT, "phases": {"coverage": {"enabled": False}}})


TOKEN: dict[str, str] = {}  # "current": the token of the role being fuzzed


def refused_beyond_the_schema(case: Any) -> bool:
    """Rules JSON Schema cannot state, which the document says in words; each refusal is asserted by
    name elsewhere (test_recall_http.py, test_task_artifacts.py, test_memory_*.py):
    - recall's query grammar: balanced parentheses, an operator followed by a term;
    - recall's path patterns: valid RE2 within its program-size cap;
    - an apply receipt: `success` observes exactly the result revision (one field equal to another);
    - memory tags: distinct case-insensitively (`uniqueItems` compares exactly);
    - a message part's url: one urllib.parse can split (no unclosed IPv6 host, no host that
      NFKC-normalizes into a delimiter);
    - a webhook's url: https, a host that resolves now, no private address (dovecote/push/addresses.py:
      what DNS answers is not the document's to state); asked of the same check, so only its refusals
      are excused, and they are asserted by name in tests/unit/test_push_addresses.py.
    What JSON Schema can state is declared instead: a `conflict` or `success` receipt names its
    observed revision, at most one `subject:` tag, which has a key."""
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
        if body.get("decision") == "success" and body.get("observed_revision") != body.get("result_revision"):
            return True
    if any(_urllib_refuses(url) for url in _part_urls(body)):
        return True
    if path.endswith("/webhooks") and isinstance(body.get("url"), str) and _webhook_refused(body["url"]):
        return True
    if path == "/v1/memory/writes" and isinstance(body.get("tags"), list):
        tags = [t.lower() for t in body["tags"] if isinstance(t, str)]
        if len(set(tags)) != len(tags):
            return True
    return over_a_byte_limit(case)


def _webhook_refused(url: str) -> bool:
    from dovecote.platform.errors import InvalidArgument
    from dovecote.push.addresses import SystemResolver, check

    try:
        check(url, SystemResolver())  # the shared runtime runs without --allow-loopback-webhooks
    except InvalidArgument:
        return True
    return False


def _part_urls(body: dict[str, Any]) -> list[str]:
    message = body.get("message")
    parts = message.get("parts") if isinstance(message, dict) else None
    if not isinstance(parts, list):
        return []
    return [p["url"] for p in parts if isinstance(p, dict) and isinstance(p.get("url"), str)]


def _urllib_refuses(url: str) -> bool:
    from urllib.parse import urlsplit

    try:
        urlsplit(url)
    except ValueError:
        return True
    return False


def _resolved(node: Any) -> Any:
    while isinstance(node, dict) and isinstance(node.get("$ref"), str):
        node = DOCUMENT["components"]["schemas"][node["$ref"].split("/")[-1]]
    return node


def _over_bytes(value: Any, node: Any) -> bool:
    node = _resolved(node)
    if not isinstance(node, dict):
        return False
    limit = node.get(MAX_UTF8_BYTES)
    if isinstance(value, str) and limit is not None and len(value.encode("utf-8", "surrogatepass")) > limit:
        return True
    if any(_over_bytes(value, option) for keyword in ("anyOf", "oneOf", "allOf") for option in node.get(keyword) or []):
        return True
    if isinstance(value, dict):
        properties = node.get("properties") or {}
        return any(_over_bytes(v, properties[k]) for k, v in value.items() if k in properties)
    if isinstance(value, list) and isinstance(node.get("items"), dict):
        return any(_over_bytes(v, node["items"]) for v in value)
    return False


def over_a_byte_limit(case: Any) -> bool:
    """A string within its `maxLength` but over its `x-max-utf8-bytes` (multi-byte characters): the
    document declares the byte limit (platform/schema.py utf8_text), which no JSON Schema keyword can
    check, and the server refuses it (400, or 413 for an inline body), as declared."""
    operation = DOCUMENT["paths"][case.operation.path][case.operation.method.lower()]
    body_schema = (operation.get("requestBody") or {}).get("content", {}).get("application/json", {}).get("schema")
    if body_schema is not None and _over_bytes(case.body, body_schema):
        return True
    query = case.query or {}
    return any(
        _over_bytes(query[p["name"]], p.get("schema"))
        for p in operation.get("parameters") or []
        if p["in"] == "query" and p["name"] in query
    )


def after_past_the_end(case: Any, dev_runtime: dict[str, Any]) -> bool:
    """`after` beyond the task's message or event count (a page of either, or the task's stream): a
    400 the document states in words (its bound is the task's own count). Asked of the server, so
    only a real overrun is excused."""
    import httpx

    path = case.operation.path
    after = (case.query or {}).get("after")
    if isinstance(after, str) and after.isascii() and after.isdigit():
        after = int(after)  # the coverage phase sends its boundary values as text
    resumed = str((case.headers or {}).get("Last-Event-ID") or "").strip()
    if path.endswith("/stream") and resumed.isdigit():
        after = int(resumed)  # the header comes before `after` (functions/streams_api resume_after)
    if not path.endswith(("/messages", "/events", "/stream")) or not isinstance(after, int):
        return False
    parameters = case.path_parameters or {}
    task_id = parameters.get("task_id", parameters.get("id"))  # the stream's route names it `id`
    if not isinstance(task_id, str):
        return False
    from urllib.parse import quote

    response = httpx.get(
        f"{dev_runtime['endpoint']}/v1/tasks/{quote(task_id, safe='')}",
        headers={"Authorization": f"Bearer {TOKEN['current']}"},
        timeout=30,
    )
    if response.status_code != 200:
        return False
    count = response.json()["task"]["message_count" if path.endswith("/messages") else "event_count"]
    return bool(after > count)


def an_ambiguous_prefix(case: Any, dev_runtime: dict[str, Any]) -> bool:
    """A recall ref or session named by a prefix that several of the authority's sessions share: a
    400 ambiguous_ref the document states in words (which sessions exist is data, and other tests of
    the module add some). Asked of the server, the request as schemathesis sends it, so only a real
    ambiguity is excused."""
    import requests

    path = case.operation.path
    if case.operation.method.upper() != "GET" or not path.startswith("/v1/recall/") or not case.path_parameters:
        return False
    sent = case.as_transport_kwargs(base_url=dev_runtime["endpoint"])
    sent["headers"]["Authorization"] = f"Bearer {TOKEN['current']}"
    sent["params"] = {k: str(v).lower() if isinstance(v, bool) else v for k, v in (sent.get("params") or {}).items()}
    response = requests.request(**sent, timeout=30)
    return response.status_code == 400 and response.json().get("error", {}).get("code") == "ambiguous_ref"


class DevBearer:
    """The bearer token as schemathesis' auth provider, so it knows every case is authenticated
    (a header added behind its back turns its 'no Authorization' negatives into false alarms)."""

    def get(self, case: Any, context: Any) -> str:
        # Coverage cases are generated at collection, before the runtime (and its tokens) exist;
        # conforms() puts the role's real token in before the call.
        return TOKEN.get("current", "pending")

    def set(self, case: Any, data: str, context: Any) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


def fuzz_tests(prefixes: tuple[str, ...]) -> tuple[Any, Any]:
    """The two fuzzing tests of a module, over the operations under `prefixes`: each fuzzed at the
    full count as its owner, then at a few examples as each of the other two roles."""
    schema, schema_few = lazy_schemas(prefixes)

    @schema.parametrize()
    @settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))
    def test_api_conforms_to_its_schema(case: Any, dev_runtime: dict[str, Any]) -> None:
        conforms(case, dev_runtime, "owner")

    @schema_few.parametrize()
    @pytest.mark.usefixtures("role")  # a lazy schema's test takes fixtures (pytest.mark.parametrize cannot see it)
    @settings(max_examples=OTHER_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    def test_the_other_roles_get_documented_answers(case: Any, dev_runtime: dict[str, Any], role: str) -> None:
        conforms(case, dev_runtime, role)

    return test_api_conforms_to_its_schema, test_the_other_roles_get_documented_answers


def lazy_schemas(prefixes: tuple[str, ...]) -> tuple[Any, Any]:
    """The operations under `prefixes`, fuzzed from the module's lazy schemas (api_schema: the full
    count with the coverage phase; api_schema_few: a few examples), each case sent with the role's
    bearer token."""
    regex = "^(" + "|".join(prefixes) + ")"
    full = schemathesis.pytest.from_fixture("api_schema").include(path_regex=regex)
    few = schemathesis.pytest.from_fixture("api_schema_few").include(path_regex=regex)
    full.auth()(DevBearer)
    few.auth()(DevBearer)
    return full, few


# Each operation is fuzzed at the full count as the role that runs it (`OWNER`), and at a few
# examples as each of the other two roles: a route refuses the wrong role with 403 (which both data
# checks accept), and where another role may run it (an admin or a worker on a caller's read) its
# validation and handlers are the owner's, so more examples there would repeat the owner's cases.
# (Every role at the full count was 231 s of CI's 757 s wall.)
OTHER_ROLES = ("other-1", "other-2")
OTHER_EXAMPLES = 5 if CI else 2

# The role whose commands an operation is (services' `principal.require`); the rest are the caller's.
# conforms() fails if an owner is refused for its role, so this table cannot drift silently.
OWNER: tuple[tuple[str, str, str], ...] = (
    ("*", "/v1/admin/", "admin"),
    ("POST", "/v1/recall/rebuild", "admin"),
    ("POST", "/v1/memory/redrive", "admin"),
    ("*", "/v1/leases", "worker"),
    ("*", "/v1/worker/", "worker"),
    ("*", "/v1/tasks/{task_id}/lease", "worker"),
    ("POST", "/v1/tasks/{task_id}/accept", "worker"),
    ("POST", "/v1/tasks/{task_id}/reject", "worker"),
    ("POST", "/v1/tasks/{task_id}/fail", "worker"),
    ("POST", "/v1/tasks/{task_id}/request-input", "worker"),
    ("POST", "/v1/tasks/{task_id}/complete", "worker"),
    ("POST", "/v1/tasks/{task_id}/artifacts", "worker"),
)


def owner(method: str, path: str) -> str:
    for owned_method, prefix, role in OWNER:
        if owned_method in ("*", method.upper()) and path.startswith(prefix):
            return role
    return "caller"


def conforms(case: Any, dev_runtime: dict[str, Any], role: str = "caller") -> None:
    """No 5xx, documented statuses and shapes, every schema-valid request accepted and every
    schema-invalid one refused: every check, except the cases named below. `role` is a role, or
    "owner" (the operation's own, from `OWNER`), or "other-1"/"other-2" (the two others)."""
    fuzzing_as_owner = role == "owner"
    runs_it = owner(case.operation.method, case.operation.path)
    if fuzzing_as_owner:
        role = runs_it
    elif role in OTHER_ROLES:
        role = [r for r in ("caller", "worker", "admin") if r != runs_it][OTHER_ROLES.index(role)]
    TOKEN["current"] = dev_runtime["tokens"][role]
    # A cursor is opaque and signed: only one the server issued is valid, so a generated one is
    # rightly refused. Paging with real cursors is tested in test_notes_http.py / test_tasks_http.py.
    if case.query:
        case.query.pop("cursor", None)
    if case.headers and "Authorization" in case.headers:
        case.headers["Authorization"] = f"Bearer {TOKEN['current']}"
    excluded = []
    if case.operation.path == "/v1/leases/claim" and isinstance(case.body, dict):
        # Each valid wait_seconds long-polls that long when nothing is claimable (a minute per
        # operation here): keep the wait short. Its bounds stay fuzzed (out-of-range values are
        # left alone), and the long poll itself is tested in test_workers_http.py.
        wait = case.body.get("wait_seconds")
        if type(wait) is int and 1 < wait <= MAX_CLAIM_WAIT:
            case.body["wait_seconds"] = 1
    if case.operation.method.upper() == "POST" and case.operation.path == "/v1/transcripts":
        # A JSONL body is a string whose content (at least one parseable session) JSON Schema cannot
        # express: a schema-valid file of garbage is rightly refused. Its refusals are asserted by
        # name in test_recall_http.py; the generic JSON form is fully described.
        body = case.body if isinstance(case.body, dict) else {}
        if "jsonl" in body:
            excluded.append(openapi_checks.positive_data_acceptance)
    if (
        refused_beyond_the_schema(case)
        or after_past_the_end(case, dev_runtime)
        or an_ambiguous_prefix(case, dev_runtime)
    ):
        excluded.append(openapi_checks.positive_data_acceptance)
    settled = case.operation.path == "/v1/worker/events" and case.operation.method.upper() == "POST"
    if settled:
        # A delivery is always settled: an event that breaks the schema is answered 200 with a nack
        # (code invalid, or the refusal the command met), never a 4xx, so the outbox can drop it
        # (docs/design/tasks.md#worker-events). What must hold instead is asserted below: it is never acked.
        excluded.append(openapi_checks.negative_data_rejection)
    response = case.call_and_validate(
        base_url=dev_runtime["endpoint"],
        # A claim long-polls up to MAX_CLAIM_WAIT (20 s) when nothing is claimable: past the default 10 s.
        timeout=MAX_CLAIM_WAIT + 30,
        excluded_checks=[
            *excluded,
            # Its cases are requests with a method the path does not have (PATCH /v1/notes, ...). API
            # Gateway HTTP APIs answer those 404 {"message": "Not Found"}, never 405 with Allow, and the
            # local gateway does the same (test_unknown_methods_are_404_like_api_gateway below).
            openapi_checks.unsupported_method,
        ],
    )
    if settled and case.meta is not None and case.meta.generation.mode.is_negative and response.status_code == 200:
        assert response.json()["decision"] == "nack", response.text
    if fuzzing_as_owner and response.status_code == 403:
        details = response.json().get("error", {}).get("details", {})
        assert "allowed" not in details, f"OWNER names the wrong role for {case.operation.method} {case.operation.path}"
