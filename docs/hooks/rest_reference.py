"""The REST reference page, written from the OpenAPI document the server serves
(``dashboard.openapi.openapi_document``): every operation with its parameters, request and
response schemas and a curl line, then every component schema."""

from __future__ import annotations

import json
import shlex
from typing import Any

import yaml
from schema_text import allowed_text, cell, code, ref_name, type_text

from dashboard import create_app
from dashboard.openapi import openapi_document

BASE = "http://127.0.0.1:5000"
# the spec schemas have their own page; these names link there instead of to JSON here
SPEC_SCHEMAS = {"ExperimentSpec": "spec.md"}


def operation_anchor(op: dict[str, Any]) -> str:
    return op["operationId"].lower()


def schema_anchor(name: str) -> str:
    return f"schema-{name.lower()}"


def _ref_text(name: str) -> str:
    if name in SPEC_SCHEMAS:
        return f"[`{name}`]({SPEC_SCHEMAS[name]})"
    return f"[`{name}`](#{schema_anchor(name)})"


def _writes(op: dict[str, Any]) -> bool:
    return any("bearer" in option for option in op.get("security", []))


def curl_line(path: str, method: str, op: dict[str, Any], example: dict[str, Any]) -> str:
    """A curl command for ``op``: path parameters as shell variables, required query
    parameters filled in, the token header on writes, a body where one is taken."""
    url = BASE + "/api/v1" + path
    query = []
    for param in op.get("parameters", []):
        var = "$" + param["name"].upper()
        if param["in"] == "path":
            url = url.replace("{" + param["name"] + "}", var)
        elif param.get("required"):
            query.append(f"{param['name']}={var}")
    if query:
        url += "?" + "&".join(query)
    parts = ["curl", "-s"]
    if method != "get":
        parts += ["-X", method.upper()]
    parts.append(f'"{url}"')
    if _writes(op):
        parts += ["-H", '"Authorization: Bearer $DNNFRAME_API_TOKEN"']
    content = op.get("requestBody", {}).get("content", {})
    if "application/json" in content:
        # a body schema of the operation's own gives its example; a spec body, the spec's
        own = content["application/json"]["schema"].get("examples")
        parts += [
            "-H",
            shlex.quote("Content-Type: application/json"),
            "-d",
            shlex.quote(json.dumps(own[0] if own else example)),
        ]
    elif "multipart/form-data" in content:
        props = content["multipart/form-data"]["schema"]["properties"]
        parts += ["-F", "file=@data.csv"] + (
            ["-F", "label_column=y"] if "label_column" in props else []
        )
    return " ".join(parts)


def _parameters(op: dict[str, Any]) -> list[str]:
    params = op.get("parameters", [])
    if not params:
        return []
    rows = [
        "| parameter | in | type | required | allowed values | description |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for p in params:
        schema = p.get("schema", {})
        rows.append(
            f"| `{p['name']}` | {p['in']} | {cell(type_text(schema, _ref_text))} "
            f"| {'yes' if p.get('required') else 'no'} | {cell(allowed_text(schema))} "
            f"| {cell(p.get('description', ''))} |"
        )
    return ["**Parameters**", "", *rows, ""]


def _content(content: dict[str, Any]) -> str:
    return (
        "; ".join(
            f"`{kind}` {_schema_text(body.get('schema'))}".strip() for kind, body in content.items()
        )
        or "no body"
    )


def _schema_text(schema: dict[str, Any] | None) -> str:
    if not schema:
        return ""
    if "$ref" in schema:
        return _ref_text(ref_name(schema["$ref"]))
    props = schema.get("properties")
    if props:
        return "with fields " + ", ".join(f"`{name}`" for name in props)
    return type_text(schema, _ref_text)


def _headers(response: dict[str, Any]) -> str:
    """The headers an answer declares besides those every answer carries (references to
    ``components.headers``)."""
    own = {name: h for name, h in response.get("headers", {}).items() if "$ref" not in h}
    return "; ".join(
        f"`{name}`{'' if h.get('required') else ' (sometimes)'}: {h.get('description', '')}"
        for name, h in own.items()
    )


def _operation(path: str, method: str, op: dict[str, Any], example: dict[str, Any]) -> list[str]:
    out = [
        f"### {method.upper()} `{path}` {{#{operation_anchor(op)}}}",
        "",
        op.get("summary", ""),
        "",
    ]
    if op.get("description"):
        out += [op["description"], ""]
    if _writes(op):
        out += [
            "A write: it needs `Authorization: Bearer $DNNFRAME_API_TOKEN` when the "
            "server sets a token.",
            "",
        ]
    out += _parameters(op)
    body = op.get("requestBody")
    if body:
        out += [
            f"**Request body**{' (required)' if body.get('required') else ''}: "
            + _content(body["content"]),
            "",
        ]
    out += [
        "**Responses**",
        "",
        "| status | meaning | body | headers |",
        "| --- | --- | --- | --- |",
    ]
    for status, response in op["responses"].items():
        out.append(
            f"| {status} | {cell(response.get('description', ''))} "
            f"| {cell(_content(response.get('content', {})))} "
            f"| {cell(_headers(response))} |"
        )
    out += ["", "```bash", curl_line(path, method, op, example), "```", ""]
    return out


def rest_page() -> str:
    doc = openapi_document(create_app())  # any app serves the same routes
    schemas = doc["components"]["schemas"]
    example = schemas["ExperimentSpec"].get("examples", [{}])[0]
    out = [
        "# REST API reference",
        "",
        f"{doc['info']['description']} Generated at build time from the OpenAPI "
        f"{doc['openapi']} document the server serves at `GET /api/v1/openapi.json`, "
        "itself generated from the routes (`dashboard/openapi.py`); a running dashboard shows "
        "the same document as Swagger UI "
        "at `/api/docs/` (its *API* link). Every "
        f"path is under `{doc['servers'][0]['url']}`. Reads are public; writes need the "
        "bearer token when `DNNFRAME_API_TOKEN` is set (see "
        "[tokens and a reverse proxy](../how-to/tokens-and-proxy.md)). In the curl lines, "
        "`$EXPERIMENT_ID` and the like stand for ids the listing endpoints return. Every "
        "answer carries "
        + ", ".join(
            f"`{name}: {h['schema']['const']}` ({h['description']})"
            for name, h in doc["components"]["headers"].items()
        )
        + "; the headers an answer carries besides these are in its row below.",
        "",
        "## Endpoints",
        "",
    ]
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            out += _operation(path, method, op, example)
    out += [
        "## Schemas",
        "",
        "The request and response bodies, as JSON Schema. The spec's own schemas "
        "(`ExperimentSpec` and the sections it refers to) are laid out field by field in "
        "the [spec reference](spec.md).",
        "",
    ]
    for name, schema in schemas.items():
        out += [f"### `{name}` {{#{schema_anchor(name)}}}", ""]
        if schema.get("description"):
            out += [" ".join(str(schema["description"]).split()), ""]
        out += ['??? note "JSON Schema"', "", "    ```yaml"]
        text = yaml.safe_dump(schema, sort_keys=False, allow_unicode=True, width=90)
        out += ["    " + line for line in text.splitlines()]
        out += ["    ```", ""]
    return "\n".join(out) + "\n"


__all__ = ["rest_page", "operation_anchor", "curl_line", "code"]
