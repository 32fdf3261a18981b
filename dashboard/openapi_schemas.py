"""The OpenAPI document's component schemas, all generated: the spec's from its pydantic
models (their ``$defs`` become components), the API's own response objects from their
TypedDicts (:mod:`.responses`)."""

from __future__ import annotations

from typing import Any

from dnnframe.spec import spec_json_schema

from .responses import response_schemas


def _rewrite_refs(node: Any) -> Any:
    # pydantic points into its own $defs; the document keeps them under components
    if isinstance(node, dict):
        return {
            k: (
                "#/components/schemas/" + v.split("/")[-1]
                if k == "$ref" and isinstance(v, str)
                else _rewrite_refs(v)
            )
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_rewrite_refs(v) for v in node]
    return node


def component_schemas() -> dict[str, Any]:
    """Every schema of ``components.schemas``, by name."""
    # web specs may not name files on the server
    spec_schema = spec_json_schema(server_files=False)
    defs = spec_schema.pop("$defs", {})
    schemas: dict[str, Any] = {name: _rewrite_refs(s) for name, s in defs.items()}
    for sub in schemas.values():
        sub.pop("$defs", None)
    schemas["ExperimentSpec"] = _rewrite_refs(spec_schema)
    responses = response_schemas("#/components/schemas/")
    clash = set(schemas) & set(responses)
    if clash:
        raise RuntimeError(f"a response object and a spec schema share the names {sorted(clash)}")
    # what the OpenAPI document itself answers: an object (it has schemas of its own)
    schemas["Object"] = {"type": "object"}
    schemas.update(responses)
    return schemas
