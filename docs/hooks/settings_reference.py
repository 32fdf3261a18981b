"""The settings reference page: every field of ``dnnframe.settings.Settings``, its variable,
type and default from the model (the one home of every default, the dashboard's limits
among them), and its meaning from the field's description, the one place that sentence is
written; what the compose stack sets is in the deployment guide."""

from __future__ import annotations

import re

from pydantic.fields import FieldInfo
from schema_text import cell, code

from dnnframe.settings import ENV_PREFIX, Settings


def variable(field: str) -> str:
    return f"{ENV_PREFIX}{field.upper()}"


def _type(info: FieldInfo) -> str:
    text = str(info.annotation).replace("typing.", "").replace("Optional[", "")
    text = re.sub(r"<class '(\w+)'>", r"\1", text)
    return text.replace(" | None", " (optional)")


def _default(info: FieldInfo) -> str:
    """The default, or what leaving the variable unset does."""
    if info.default is not None:
        return code(info.default)
    extra = info.json_schema_extra
    unset = extra.get("unset") if isinstance(extra, dict) else None
    return f"unset: {unset}" if isinstance(unset, str) else "unset"


def settings_page() -> str:
    out = [
        "# Settings reference",
        "",
        "Every `DNNFRAME_*` environment variable the CLI, the workers and the dashboard "
        "read, generated at build time from `dnnframe.settings.Settings` (pydantic-settings: "
        "one typed object, read afresh at each use): each meaning is its field's description. "
        "An unset or empty variable takes its default; an unusable value is an error naming "
        "the variable (`DNNFRAME_WORKERS must be a positive integer, but got 'x'`). What the "
        "compose stack sets, and its compose-only variables (`.env`), are in the "
        "[deployment guide](../deploy.md#configuration).",
        "",
        "| variable | type | default | meaning |",
        "| --- | --- | --- | --- |",
    ]
    for field, info in Settings.model_fields.items():
        out.append(
            f"| `{variable(field)}` | {cell(_type(info))} | {cell(_default(info))} "
            f"| {cell(_relink(info.description or ''))} |"
        )
    out += [
        "",
        "Besides these, `THEANO_FLAGS` (and `PYTENSOR_FLAGS`) choose the backend and "
        "device: see [GPU through THEANO_FLAGS](../how-to/gpu.md); and "
        "`dnnframe/testing/hooks.py` reads knobs of its own, `DNNFRAME_HOOK_*`, in tests "
        "and benchmarks only.",
    ]
    return "\n".join(out) + "\n"


def _relink(text: str) -> str:
    """A description's links, relative to docs/, pointed there from the reference folder."""
    return re.sub(r"\]\((?![a-z]+:|#|/)", "](../", text)


__all__ = ["settings_page", "variable"]
