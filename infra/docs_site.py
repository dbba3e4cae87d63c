"""The docs site's build hooks (mkdocs.yml `hooks:`): what the manual generates rather than copies.

- `reference/http-api.md` is rendered at build time from the OpenAPI document the API serves at
  `GET /v1/openapi.json` (`functions.admin_api.handler.openapi_document`, merged from every API
  function's Powertools resolver), so the reference can never drift from the handlers; the document
  itself is published beside it as `reference/openapi.json`.
- Every page under `docs/guides/` joins the nav's Guides section and the list on `guides/index.md`,
  so a topic page needs no nav edit (and `validation.nav.omitted_files: warn` leaves no page orphaned).

The rest is committed Markdown, held to its source by tests: the vocabulary tables
(`dovecote.client.vocabulary`, tests/unit/test_vocabulary.py) and the benchmark figures
(`bench/docs_page.py`, which `make bench` runs).
"""

from __future__ import annotations

import json
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OPENAPI_MARK = "<!-- generated: openapi -->"
GUIDES_MARK = "<!-- generated: guides -->"
METHODS = ("get", "put", "post", "delete", "patch")


# ---- the OpenAPI document as Markdown -------------------------------------------------------------


@cache
def openapi() -> dict[str, Any]:
    if str(ROOT) not in sys.path:  # `functions` is imported from the clone's root, as pytest does
        sys.path.insert(0, str(ROOT))
    from functions.admin_api.handler import openapi_document

    return openapi_document()


def schema_anchor(name: str) -> str:
    return "schema-" + name.lower()


def operation_anchor(method: str, path: str) -> str:
    return method + "-" + re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")


def cell(text: str) -> str:
    """One table cell: no line breaks, no bare pipes."""
    return " ".join(str(text).split()).replace("|", "\\|")


def type_of(schema: dict[str, Any]) -> str:
    """A schema's type in a few words, references as links to their section."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{schema_anchor(name)})"
    for combinator in ("anyOf", "oneOf"):
        if combinator in schema:
            kinds = [type_of(s) for s in schema[combinator] if s.get("type") != "null"]
            nullable = any(s.get("type") == "null" for s in schema[combinator])
            return " or ".join(dict.fromkeys(kinds)) + (" or null" if nullable else "")
    if "allOf" in schema:
        return " and ".join(type_of(s) for s in schema["allOf"])
    if "enum" in schema:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if kind == "array":
        return "array of " + type_of(schema.get("items", {}))
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return "object of " + type_of(schema["additionalProperties"])
    return f"{kind} ({schema['format']})" if "format" in schema else str(kind)


CONSTRAINTS = {
    "minLength": "length ≥ {}",
    "maxLength": "length ≤ {}",
    "minimum": "≥ {}",
    "maximum": "≤ {}",
    "exclusiveMinimum": "> {}",
    "exclusiveMaximum": "< {}",
    "minItems": "≥ {} items",
    "maxItems": "≤ {} items",
    "pattern": "matches `{}`",
    "default": "default `{}`",
}


def constraints(schema: dict[str, Any]) -> str:
    found = []
    for key, template in CONSTRAINTS.items():
        if key in schema:
            value = json.dumps(schema[key]) if key == "default" else schema[key]
            found.append(template.format(value))
    return "; ".join(found)


def describe(schema: dict[str, Any]) -> str:
    text = schema.get("description", "")
    extra = constraints(schema)
    return cell("; ".join(part for part in (text, extra) if part))


def body_schema(content: dict[str, Any] | None) -> str:
    if not content:
        return "—"
    return "; ".join(f"{type_of(media.get('schema', {}))} (`{kind}`)" for kind, media in content.items())


def render_operation(method: str, path: str, op: dict[str, Any]) -> list[str]:
    summary = op.get("summary", "").rstrip(".")
    out = [f"### `{method.upper()} {path}` {{#{operation_anchor(method, path)}}}", "", f"**{cell(summary)}.**", ""]
    description = op.get("description", "")
    if description and description.rstrip(".") != summary:
        out += [description.strip(), ""]
    out += ["Needs a bearer token." if op.get("security") else "No token needed.", ""]
    params = [p for p in op.get("parameters", []) if p.get("in") != "header" or p.get("name") != "bearer"]
    if params:
        out += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        for p in params:
            schema = p.get("schema", {})
            text = describe({**schema, "description": p.get("description", schema.get("description", ""))})
            out.append(
                f"| `{p['name']}` | {p['in']} | {type_of(schema)} | {'yes' if p.get('required') else 'no'} | {text} |"
            )
        out.append("")
    body = op.get("requestBody")
    if body:
        required = "required" if body.get("required") else "optional"
        out += [f"Request body ({required}): {body_schema(body.get('content'))}.", ""]
    out += ["| status | meaning | body |", "|---|---|---|"]
    for status, answer in sorted(op.get("responses", {}).items()):
        out.append(f"| {status} | {cell(answer.get('description', ''))} | {body_schema(answer.get('content'))} |")
    return out + [""]


def render_schema(name: str, schema: dict[str, Any]) -> list[str]:
    out = [f"### {name} {{#{schema_anchor(name)}}}", ""]
    if schema.get("description"):
        out += [" ".join(schema["description"].split()), ""]
    properties = schema.get("properties")
    if properties:
        required = set(schema.get("required", []))
        out += ["| field | type | required | description |", "|---|---|---|---|"]
        for field, value in properties.items():
            out.append(f"| `{field}` | {type_of(value)} | {'yes' if field in required else 'no'} | {describe(value)} |")
    else:
        out.append(f"{type_of(schema)}{': ' + constraints(schema) if constraints(schema) else ''}")
    return out + [""]


def render_openapi(doc: dict[str, Any]) -> str:
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, operations in doc["paths"].items():
        for method in METHODS:
            if method in operations:
                tag = (operations[method].get("tags") or ["other"])[0]
                by_tag.setdefault(tag, []).append((method, path, operations[method]))
    out = ["| group | operation | what it does |", "|---|---|---|"]
    for tag, ops in by_tag.items():
        for method, path, op in ops:
            link = f"[`{method.upper()} {path}`](#{operation_anchor(method, path)})"
            out.append(f"| {tag} | {link} | {cell(op.get('summary', ''))} |")
    out.append("")
    for tag, ops in by_tag.items():
        out += [f"## {tag.capitalize()} {{#tag-{tag}}}", ""]
        for method, path, op in ops:
            out += render_operation(method, path, op)
    out += ["## Schemas", ""]
    for name, schema in sorted(doc.get("components", {}).get("schemas", {}).items()):
        out += render_schema(name, schema)
    return "\n".join(out)


# ---- guides: every page under docs/guides/ is in the nav ------------------------------------------


def guide_pages(docs_dir: Path) -> list[str]:
    return sorted(
        p.relative_to(docs_dir).as_posix() for p in (docs_dir / "guides").glob("*.md") if p.name != "index.md"
    )


def title_of(page: Path) -> str:
    for line in page.read_text().splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return page.stem.replace("-", " ").capitalize()


def with_guides(nav: list[Any], docs_dir: Path) -> list[Any]:
    """The nav with every guide page not named in it appended to its Guides section."""
    named = json.dumps(nav)
    extra = [{title_of(docs_dir / p): p} for p in guide_pages(docs_dir) if f'"{p}"' not in named]
    out = []
    for entry in nav:
        if isinstance(entry, dict) and "Guides" in entry:
            entry = {"Guides": list(entry["Guides"]) + extra}
        out.append(entry)
    return out


def render_guides(docs_dir: Path) -> str:
    pages = guide_pages(docs_dir)
    if not pages:
        return "No topic guide has been written yet."
    return "\n".join(f"- [{title_of(docs_dir / p)}]({Path(p).name})" for p in pages)


# ---- MkDocs events ----------------------------------------------------------------------------------


def on_config(config: Any) -> Any:
    if config.get("nav"):
        config["nav"] = with_guides(config["nav"], Path(config["docs_dir"]))
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    document = json.dumps(openapi(), indent=2) + "\n"
    files.append(File.generated(config, "reference/openapi.json", content=document))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if OPENAPI_MARK in markdown:
        markdown = markdown.replace(OPENAPI_MARK, render_openapi(openapi()))
    if GUIDES_MARK in markdown:
        markdown = markdown.replace(GUIDES_MARK, render_guides(Path(config["docs_dir"])))
    return markdown
