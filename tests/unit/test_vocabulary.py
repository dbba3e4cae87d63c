"""One vocabulary (docs/reference/vocabulary.md; dovecote.client.vocabulary): every name the SDK, the CLI and
the MCP tools use for an operation's inputs is the HTTP field of its route (from the route table and the
OpenAPI request models), or an alias the vocabulary lists; every CLI verb is the MCP tool's verb; every
operation named exists on each interface; the manual's tables are the module's; and the MCP page's
table of tools (docs/clients/mcp.md) names every tool the server registers, and no other."""

from __future__ import annotations

import inspect
import re
from functools import cache
from typing import Any

import anyio
import pytest
import typer

from dovecote.cli.groups import ALIASES as VERB_ALIASES
from dovecote.cli.root import app
from dovecote.client import DovecoteClient
from dovecote.client.vocabulary import ALIASES, CLIENT_COMMANDS, CLIENT_ONLY, OPERATIONS, Operation, render
from dovecote.mcp.server import build_server
from functions.admin_api.handler import openapi_document
from infra.routes import ROUTES, STREAM_ROUTES
from tests.conftest import ROOT

INTERFACES = ("sdk", "cli", "mcp")


def _normal(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def _properties(schema: dict[str, Any], components: dict[str, Any], depth: int = 0) -> set[str]:
    """Every property name of a request body: its fields and, one level down, those of its objects."""
    if "$ref" in schema:
        schema = components[schema["$ref"].split("/")[-1]]
    names: set[str] = set()
    for key in ("anyOf", "oneOf", "allOf"):
        for option in schema.get(key, []):
            names |= _properties(option, components, depth)
    for name, prop in schema.get("properties", {}).items():
        names.add(name)
        if depth < 1:
            names |= _properties(prop, components, depth + 1)
    if "items" in schema and depth < 1:
        names |= _properties(schema["items"], components, depth)
    return names


@cache
def http_fields() -> dict[str, set[str]]:
    """`METHOD /path` → the names of its path parameters, query parameters and body fields."""
    document = openapi_document()
    components = document["components"]["schemas"]
    documented = {
        f"{method.upper()} {_normal(path)}": operation
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    }
    fields: dict[str, set[str]] = {}
    for route in ROUTES + STREAM_ROUTES:
        key = f"{route.method} {route.path}"
        operation = documented[f"{route.method} {_normal(route.path)}"]
        names = set(re.findall(r"\{([^}]+)\}", route.path))
        names |= {p["name"] for p in operation.get("parameters", []) if p.get("in") in ("query", "path")}
        body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        if body:
            names |= _properties(body, components)
        fields[key] = names
    return fields


def allowed(operations: list[Operation], interface: str) -> set[str]:
    names: set[str] = set(CLIENT_ONLY[interface])
    for op in operations:
        fields = http_fields()[op.http]
        names |= fields
        for alias in ALIASES:
            if alias.http in fields:
                names |= set(getattr(alias, interface))
    return names


def by(interface: str) -> dict[str, list[Operation]]:
    grouped: dict[str, list[Operation]] = {}
    for op in OPERATIONS:
        name = getattr(op, interface)
        if name:
            grouped.setdefault(name, []).append(op)
    return grouped


def test_every_operation_names_a_route() -> None:
    routed = {f"{r.method} {r.path}" for r in ROUTES + STREAM_ROUTES}
    assert {op.http for op in OPERATIONS} <= routed
    # Every route a client uses has an operation (the rest are the API's own: uploads, ingest, meta).
    unnamed = routed - {op.http for op in OPERATIONS}
    assert unnamed == {
        "GET /v1/openapi.json",
        "POST /v1/notes/uploads",
        "POST /v1/tasks/{id}/artifacts/uploads",
        "POST /v1/transcripts/uploads",
    }


# ---- the SDK --------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", sorted(by("sdk")))
def test_sdk_parameters_are_http_fields(method: str) -> None:
    signature = inspect.signature(getattr(DovecoteClient, method))
    names = {p.name for p in signature.parameters.values() if p.name != "self" and p.kind is not p.VAR_KEYWORD}
    assert names - allowed(by("sdk")[method], "sdk") == set()


def test_the_sdk_rules_can_fail() -> None:
    """`query` where HTTP says `q` is caught."""
    ops = by("sdk")["recall_search"]
    assert "q" in allowed(ops, "sdk") and "query" not in allowed(ops, "sdk")


# ---- the CLI --------------------------------------------------------------------------------------


@cache
def root() -> Any:
    return typer.main.get_command(app)


def command(path: str) -> Any:
    found = root()
    context = found.make_context("dovecote", ["--help"], resilient_parsing=True)
    for word in path.split():
        found = found.get_command(context, word)
        assert found is not None, path
    return found


def option_names(param: Any) -> tuple[str, list[str]]:
    """A parameter's name as the vocabulary sees it, and its further long spellings."""
    if param.param_type_name == "argument":
        return param.name, []
    longs = [o for o in param.opts if o.startswith("--")]
    return longs[0][2:].replace("-", "_"), longs[1:]


@pytest.mark.parametrize("path", sorted(by("cli")))
def test_cli_options_and_arguments_are_http_fields(path: str) -> None:
    operations = by("cli")[path]
    names = allowed(operations, "cli")
    for param in command(path).params:
        name, more = option_names(param)
        assert name in names, (path, name)
        assert set(more) <= names, (path, more)


def test_every_cli_command_is_an_operation_or_a_client_command() -> None:
    def walk(group: Any, prefix: str) -> list[str]:
        paths = []
        context = group.make_context("dovecote", ["--help"], resilient_parsing=True)
        for name in group.list_commands(context):
            sub = group.get_command(context, name)
            path = f"{prefix} {name}".strip()
            if hasattr(sub, "list_commands") and sub.list_commands(context):
                paths += walk(sub, path)
                if getattr(sub, "invoke_without_command", False):  # `dovecote dev` runs, `dev token` too
                    paths.append(path)
            else:
                paths.append(path)
        return paths

    assert set(walk(root(), "")) == set(by("cli")) | set(CLIENT_COMMANDS)


def test_cli_verbs_are_the_mcp_verbs() -> None:
    for op in OPERATIONS:
        if op.cli and op.mcp:
            verb = op.cli.split()[-1].replace("-", "_")
            tool_verb = op.mcp.split("_", 1)[1] if "_" in op.mcp else op.mcp
            assert verb == tool_verb, op
    assert set(VERB_ALIASES.values()) <= {op.cli.split()[-1] for op in OPERATIONS if op.cli}


# ---- the MCP tools --------------------------------------------------------------------------------


@cache
def tool_schemas(worker_tools: bool = True) -> dict[str, dict[str, Any]]:
    async def run() -> dict[str, dict[str, Any]]:
        client = DovecoteClient("http://127.0.0.1:9", "dvc_token", max_attempts=1)
        tools = await build_server(client, worker_tools=worker_tools).list_tools()
        return {tool.name: tool.input_schema for tool in tools}

    return anyio.run(run)


def test_every_mcp_tool_is_an_operation() -> None:
    assert set(tool_schemas()) == set(by("mcp"))


@pytest.mark.parametrize("tool", sorted(by("mcp")))
def test_mcp_arguments_are_http_fields(tool: str) -> None:
    names = set(tool_schemas()[tool].get("properties", {}))
    assert names - allowed(by("mcp")[tool], "mcp") == set()


def _json_types(schema: dict[str, Any]) -> set[str]:
    """The JSON types a schema admits, `null` left out (an optional argument is still that type)."""
    types = {schema["type"]} if isinstance(schema.get("type"), str) else set(schema.get("type") or [])
    for option in schema.get("anyOf", []) + schema.get("oneOf", []):
        types |= _json_types(option)
    return types - {"null"}


@cache
def http_parameter_types() -> dict[str, dict[str, set[str]]]:
    """`METHOD /path` → each path or query parameter's JSON types."""
    document = openapi_document()
    found: dict[str, dict[str, set[str]]] = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            found[f"{method.upper()} {_normal(path)}"] = {
                p["name"]: _json_types(p.get("schema", {})) for p in operation.get("parameters", [])
            }
    return found


@pytest.mark.parametrize("tool", sorted(by("mcp")))
def test_mcp_arguments_have_the_http_parameters_types(tool: str) -> None:
    """Same name, same type: `recall_read` once took `around` as a message uuid (a string) while the
    route takes an integer offset."""
    properties = tool_schemas()[tool].get("properties", {})
    for op in by("mcp")[tool]:
        method, path = op.http.split(" ", 1)
        for name, types in http_parameter_types()[f"{method} {_normal(path)}"].items():
            if name in properties and types:
                assert _json_types(properties[name]) <= types | ({"number"} if "integer" in types else set()), (
                    tool,
                    name,
                )


# ---- the manual ------------------------------------------------------------------------------------


def test_the_manual_tables_are_the_vocabulary() -> None:
    page = (ROOT / "docs" / "reference" / "vocabulary.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("|")]
    assert rows == [line for line in render() if line.startswith("|")]


def mcp_page_tools() -> dict[str, set[str]]:
    """docs/clients/mcp.md's table of tools: each group (first cell) → the tool names in its second
    cell (the backquoted snake_case words; the resources' URIs are not tools)."""
    page = (ROOT / "docs" / "clients" / "mcp.md").read_text()
    section = page.split("\n## The tools\n", 1)[1].split("\n## ", 1)[0]
    groups: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2 or cells[0] in ("group", "") or set(cells[0]) <= {"-"}:
            continue
        groups[cells[0]] = set(re.findall(r"`([a-z][a-z0-9_]*)`", cells[1]))
    return groups


def test_the_mcp_page_lists_every_tool() -> None:
    """Every tool the server registers (worker tools included) is in mcp.md's table, and the table
    names no tool the server does not serve."""
    listed = set().union(*mcp_page_tools().values())
    served = set(tool_schemas())
    assert served - listed == set(), "tools the server registers that docs/clients/mcp.md does not list"
    assert listed - served == set(), "tools docs/clients/mcp.md lists that the server does not register"


def test_the_mcp_page_says_which_tools_need_a_worker_token() -> None:
    """The table's worker-only row is exactly what a worker token adds to a caller's tools."""
    groups = mcp_page_tools()
    worker_rows = [names for group, names in groups.items() if "worker" in group]
    assert len(worker_rows) == 1, sorted(groups)
    assert worker_rows[0] == set(tool_schemas(True)) - set(tool_schemas(False))


def test_the_manual_explains_every_evidence_code() -> None:
    from dovecote.memory.model import EVIDENCE_CODES

    page = (ROOT / "docs" / "services" / "memory.md").read_text()
    section = page.split("**Evidence codes.**", 1)[1].split("```", 1)[0]
    explained = re.findall(r"^\| `(goncho_[a-z_]+)` \|", section, flags=re.MULTILINE)
    assert sorted(explained) == sorted(EVIDENCE_CODES)
