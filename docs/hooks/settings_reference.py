"""The settings reference page: every field of ``dnnframe.settings.Settings`` (its variable,
type and default from the model), with its meaning from docs/deploy.md's configuration
table, the one place those sentences are written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from schema_text import cell, code

from dnnframe.settings import ENV_PREFIX, Settings

DEPLOY = Path(__file__).resolve().parents[1] / "deploy.md"
_ROW = re.compile(r"^\| `(DNNFRAME_[A-Z0-9_]+)` \| (.*?) \| (.*?) \| (.*) \|$")


def deploy_rows() -> dict[str, tuple[str, str, str]]:
    """variable -> (default as written, value in compose, meaning), from the configuration
    table of docs/deploy.md (four columns; the compose-only table has three)."""
    text = DEPLOY.read_text(encoding="utf-8")
    section = text.split("\n## Configuration", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = _ROW.match(line.strip())
        if match:
            rows[match[1]] = (match[2], match[3], match[4])
    return rows


def variable(field: str) -> str:
    return f"{ENV_PREFIX}{field.upper()}"


def _type(info: FieldInfo) -> str:
    text = str(info.annotation).replace("typing.", "").replace("Optional[", "")
    text = re.sub(r"<class '(\w+)'>", r"\1", text)
    return text.replace(" | None", " (optional)")


def _default(info: FieldInfo) -> Any:
    return "unset" if info.default is None else code(info.default)


def settings_page() -> str:
    rows = deploy_rows()
    out = [
        "# Settings reference",
        "",
        "Every `DNNFRAME_*` environment variable the CLI, the workers and the dashboard "
        "read, generated at build time from `dnnframe.settings.Settings` (pydantic-settings: "
        "one typed object, read afresh at each use). An unset or empty variable takes its "
        "default; an unusable value is an error naming the variable. The meanings come from "
        "the configuration table of the [deployment guide](../deploy.md#configuration), "
        "which also lists the compose-only variables (`.env`).",
        "",
        "| variable | type | default in the model | default as used | in compose | meaning |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for field, info in Settings.model_fields.items():
        name = variable(field)
        used, compose, meaning = rows.get(name, ("", "", ""))
        out.append(f"| `{name}` | {cell(_type(info))} | {_default(info)} | {cell(used)} "
                   f"| {cell(compose)} | {cell(_relink(meaning))} |")
    out += ["", "Besides these, `THEANO_FLAGS` (and `PYTENSOR_FLAGS`) choose the backend and "
            "device: see [GPU through THEANO_FLAGS](../how-to/gpu.md)."]
    return "\n".join(out) + "\n"


def _relink(text: str) -> str:
    """deploy.md's in-page links, pointed at deploy.md from the reference folder."""
    return re.sub(r"\]\(#", "](../deploy.md#", text)
