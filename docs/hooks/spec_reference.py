"""The spec reference page, written from the spec's JSON Schema (dnnframe.spec.schema), which
pydantic generates from the models that validate a spec: one row per field of every section.
"""

from __future__ import annotations

from typing import Any

import yaml
from schema_text import allowed_text, cell, code, default_text, ref_name, type_text

from dnnframe.datasets import REGISTRY
from dnnframe.spec.schema import CROSS_FIELD_RULES, spec_json_schema

# (section path, $defs name) in the order a spec is written; the top level comes first
SECTIONS = (
    ("dataset", "DatasetConfig"),
    ("model", "ModelConfig"),
    ("training", "TrainingConfig"),
    ("training.early_stopping", "EarlyStopping"),
    ("training.lr_schedule", "LrSchedule"),
    ("search", "SearchConfig"),
    ("search.objective", "Objective"),
)
SPACE_SECTIONS = ("dataset", "model", "training")


def anchor(path: str) -> str:
    return path.replace(".", "-").replace("_", "-").lower()


def params_sections() -> list[tuple[str, str, list[str]]]:
    """(anchor, $defs name, datasets) of each dataset-parameter model."""
    seen: dict[str, list[str]] = {}
    for name, info in REGISTRY.items():
        seen.setdefault(info.params.__name__.lstrip("_"), []).append(name)
    return [(f"params-{anchor(n)}", n, names) for n, names in seen.items()]


def _link_for(defs_to_anchor: dict[str, str]):
    def ref_text(name: str) -> str:
        target = defs_to_anchor.get(name)
        return f"[`{name}`](#{target})" if target else code(name)

    return ref_text


def _example(name: str, prop: dict[str, Any]) -> str:
    """One line of YAML setting ``name``: a value other than the default where the field
    has a list of them, else the schema's example or the default."""
    options = [prop, *prop.get("anyOf", [])]
    values = [v for option in options for v in option.get("enum", [])]
    value: Any = None
    if values:
        value = next((v for v in values if v != prop.get("default")), values[0])
    elif prop.get("examples"):
        value = prop["examples"][0]
    elif prop.get("default") is not None:
        value = prop["default"]
    else:
        return ""
    text = yaml.safe_dump({name: value}, default_flow_style=True, width=1000).strip()
    return code(text[1:-1])


def _table(schema: dict[str, Any], ref_text, section: str) -> list[str]:
    required = set(schema.get("required", []))
    lines = [
        "| field | type | default | allowed values | description | example |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, prop in schema["properties"].items():
        if section == "" and name in SPACE_SECTIONS + ("search",):
            kind = f"[section](#{anchor(name)})"
            if name in SPACE_SECTIONS:
                kind += " or a search space over whole sections"
            if name == "dataset":
                kind += ", or a dataset's name"
            allowed = default = example = ""
        else:
            kind, allowed = type_text(prop, ref_text), allowed_text(prop)
            default, example = default_text(prop, name in required), _example(name, prop)
        about = prop.get("description", "")
        lines.append(
            f"| `{name}` | {cell(kind)} | {default} | {cell(allowed)} | {cell(about)} | {example} |"
        )
    return lines


def spec_page() -> str:
    """The whole page, as markdown."""
    schema = spec_json_schema()
    defs = schema["$defs"]
    params = params_sections()
    to_anchor = {name: anchor(path) for path, name in SECTIONS}
    to_anchor.update({name: a for a, name, _ in params if defs[name]["properties"]})
    ref_text = _link_for(to_anchor)
    out = [
        "# Spec reference",
        "",
        "Generated at build time from the spec's JSON Schema "
        "(`dnnframe.spec.schema.spec_json_schema`, also served in "
        "`GET /api/v1/openapi.json`), which pydantic writes from the models that validate "
        "every spec: a file for `dnnframe run`, a REST body, the web form. A spec is YAML or "
        "JSON; a field left out takes its default.",
        "",
        "In the `dataset`, `model` and `training` sections **any value may be a search "
        "space** instead: `{grid: [...]}` or `{choice: [...]}` (every value under "
        "`method: grid`), `{int_range: [low, high, step]}` (inclusive of `high` when on the "
        "step), `{uniform: [a, b]}` or `{loguniform: [a, b]}` (`method: random`, `asha`, "
        "`tpe`, `cmaes`). How the methods search is explained in the "
        "[search section](#search) and the [adaptive search tutorial]"
        "(../tutorials/adaptive-search.md).",
        "",
        "An example, the schema's own:",
        "",
        "```yaml",
        yaml.safe_dump(schema["examples"][0], sort_keys=False).strip(),
        "```",
        "",
        "## Top level {#top-level}",
        "",
        *_table(schema, ref_text, ""),
        "",
    ]
    for path, name in SECTIONS:
        out += [
            f"## `{path}` {{#{anchor(path)}}}",
            "",
            _about(defs[name]),
            "",
            *_table(defs[name], ref_text, path),
            "",
        ]
        if path == "dataset":
            out += _dataset_names()
    out += [
        "## Dataset parameters {#dataset-params}",
        "",
        "`dataset.params` follows the named dataset's model; datasets without "
        "parameters take `{}`.",
        "",
    ]
    for target, name, names in params:
        if not defs[name]["properties"]:
            continue
        out += [
            f"### `{name}` {{#{target}}}",
            "",
            "For " + ", ".join(f"`{n}`" for n in names) + ".",
            "",
            *_table(defs[name], ref_text, "dataset.params"),
            "",
        ]
    out += [
        "## Rules over several fields {#cross-field-rules}",
        "",
        "A JSON Schema cannot say these; the server checks them and names the field:",
        "",
    ]
    out += [f"- {rule}" for rule in CROSS_FIELD_RULES]
    return "\n".join(out) + "\n"


def _about(schema: dict[str, Any]) -> str:
    """A model's docstring, its reST literals made markdown."""
    return schema.get("description", "").replace("``", "`")


def _dataset_names() -> list[str]:
    rows = [
        "Built-in datasets (`dataset.name`):",
        "",
        "| name | task | what |",
        "| --- | --- | --- |",
    ]
    rows += [f"| `{i.name}` | {i.task} | {cell(i.description)} |" for i in REGISTRY.values()]
    rows += [
        "| `csv` | from the file | a CSV file: `path` (CLI) or `upload` (REST), and "
        "`label_column`; see [CSV datasets](../how-to/csv-datasets.md) |",
        "",
    ]
    return rows


__all__ = ["spec_page", "SECTIONS", "params_sections", "ref_name"]
