"""The OpenAPI document's component schemas, all generated: the spec's from its pydantic
models (their ``$defs`` become components), the API's own response objects from their
TypedDicts (:mod:`.responses`, :mod:`.experiment_responses`)."""

from __future__ import annotations

import functools
import json
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema

from dnnframe.spec import spec_json_schema

from .experiment_responses import (
    Cancelled,
    Deleted,
    Experiment,
    ExperimentList,
    Submitted,
    Trial,
    TrialList,
    Validated,
)
from .responses import Error, Health, Importance, Note, Upload, Workers

# The component schemas these give, by name; a TypedDict they refer to joins them.
RESPONSES: tuple[type, ...] = (
    Health,
    Experiment,
    ExperimentList,
    Trial,
    TrialList,
    Deleted,
    Cancelled,
    Workers,
    Importance,
    Error,
    Submitted,
    Validated,
    Upload,
    Note,
)


class _NoFieldTitles(GenerateJsonSchema):
    # "N Trials" above n_trials says nothing: a property's name is its title
    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def response_schemas(ref_prefix: str) -> dict[str, Any]:
    """The JSON Schemas of :data:`RESPONSES` and the objects they hold, by name, referring
    to each other as ``ref_prefix`` + name (a fresh copy: the caller may change it)."""
    return json.loads(_schemas_json(ref_prefix))


@functools.cache
def _schemas_json(ref_prefix: str) -> str:
    # pydantic takes about 20 ms to build them, the same every time
    _, top = TypeAdapter.json_schemas(
        [(t.__name__, "serialization", TypeAdapter(t)) for t in RESPONSES],
        ref_template=ref_prefix + "{model}",
        schema_generator=_NoFieldTitles,
    )
    schemas: dict[str, Any] = top["$defs"]
    for schema in schemas.values():  # a docstring's line breaks are no part of its text
        if "description" in schema:
            schema["description"] = " ".join(schema["description"].split())
    missing = {t.__name__ for t in RESPONSES} - set(schemas)
    if missing:  # pydantic names a def after its class unless two classes share a name
        raise RuntimeError(f"no schema named {sorted(missing)}")
    return json.dumps(schemas)


def _rewrite_refs(node: Any, stored: frozenset[str] = frozenset()) -> Any:
    """``node`` with pydantic's references into its ``$defs`` pointed at the document's
    components, those to ``stored`` names at their stored-spec variants."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                name = v.split("/")[-1]
                out[k] = "#/components/schemas/" + (STORED + name if name in stored else name)
            else:
                out[k] = _rewrite_refs(v, stored)
        return out
    if isinstance(node, list):
        return [_rewrite_refs(v, stored) for v in node]
    return node


STORED = "Stored"  # the prefix of the schemas a stored spec has of its own
_SPEC = "ExperimentSpec"


def _spec_defs(server_files: bool) -> dict[str, Any]:
    """The spec's schema and its ``$defs``, by name (the spec's own as ``ExperimentSpec``)."""
    top = spec_json_schema(server_files=server_files)
    defs = top.pop("$defs", {})
    for sub in defs.values():
        sub.pop("$defs", None)
    return {**defs, _SPEC: top}


def _refers_to(node: Any, names: set[str]) -> bool:
    if isinstance(node, dict):
        return any(
            (k == "$ref" and isinstance(v, str) and v.split("/")[-1] in names)
            or _refers_to(v, names)
            for k, v in node.items()
        )
    if isinstance(node, list):
        return any(_refers_to(v, names) for v in node)
    return False


def spec_schemas() -> dict[str, Any]:
    """The spec's component schemas: a spec submitted over the web (which may not name files
    on the server), and a stored one (``StoredExperimentSpec``: a run from the command line
    may name one), which shares every schema but those that differ or lead to one that does."""
    web, stored = _spec_defs(server_files=False), _spec_defs(server_files=True)
    differ = {name for name, sub in stored.items() if web.get(name) != sub} | {_SPEC}
    while True:  # ... and those that refer to one that differs
        more = {
            name for name, sub in stored.items() if name not in differ and _refers_to(sub, differ)
        }
        if not more:
            break
        differ |= more
    out = {name: _rewrite_refs(sub) for name, sub in web.items()}
    out.update(
        {STORED + name: _rewrite_refs(stored[name], frozenset(differ)) for name in sorted(differ)}
    )
    return out


def component_schemas() -> dict[str, Any]:
    """Every schema of ``components.schemas``, by name."""
    schemas = spec_schemas()
    responses = response_schemas("#/components/schemas/")
    clash = set(schemas) & set(responses)
    if clash:
        raise RuntimeError(f"a response object and a spec schema share the names {sorted(clash)}")
    # what the OpenAPI document itself answers: an object (it has schemas of its own)
    schemas["Object"] = {"type": "object"}
    schemas.update(responses)
    return schemas
