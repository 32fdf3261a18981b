"""The documentation site builds strictly, and its generated references leave nothing out.

The expected entries come from the code (the pydantic models, the click commands, the
OpenAPI document, the settings model), so a new field, option, path or setting without a
reference entry fails here.
"""

from __future__ import annotations

import types
import typing

import pytest
from pydantic import BaseModel
from site_support import Site, build, codes

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    return build(tmp_path_factory.mktemp("site"))


def test_the_site_builds_strictly_without_a_warning(site: Site) -> None:
    assert site.returncode == 0, site.log
    assert "WARNING" not in site.log, site.log
    for page in (
        "reference/spec.md",
        "reference/cli.md",
        "reference/rest-api.md",
        "reference/settings.md",
        "deploy.md",
        "paper/README.md",
    ):
        assert "<h1" in site.page(page.replace("README.md", "")), page


def test_the_pages_load_nothing_from_other_hosts(site: Site) -> None:
    """No fonts, scripts or styles from a CDN: the site reads the same offline."""
    import re

    pages = list(site.directory.rglob("index.html"))
    assert len(pages) > 20
    for page in pages:
        text = page.read_text(encoding="utf-8")
        remote = re.findall(r'<(?:script|link)\b[^>]*(?:src|href)="(?:https?:)?//[^"]+"', text)
        assert not remote, f"{page.relative_to(site.directory)} loads {remote}"


def _nested_models(annotation: object) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (``EarlyStopping | None`` and the like)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _nested_models(arg)]
    return []


def _spec_sections() -> dict[str, type[BaseModel]]:
    """Section path -> model, walked from the models a spec is validated with."""
    from dnnframe.spec.models import ExperimentSpec, TrialConfig

    found: dict[str, type[BaseModel]] = {"top-level": ExperimentSpec}

    def walk(path: str, model: type[BaseModel]) -> None:
        found[path] = model
        for name, field in model.model_fields.items():
            for nested in _nested_models(field.annotation):
                walk(f"{path}.{name}", nested)

    for name in ("dataset", "model", "training"):
        walk(name, TrialConfig.model_fields[name].annotation)  # type: ignore[arg-type]
    walk("search", ExperimentSpec.model_fields["search"].annotation)  # type: ignore[arg-type]
    return found


def _anchor(path: str) -> str:
    return path.replace(".", "-").replace("_", "-").lower()


def _first_cells(section: str) -> set[str]:
    """The code in each table row's first cell: the names a reference table lists."""
    import re

    return {
        c for row in re.findall(r"<tr>\s*<td>(.*?)</td>", section, flags=re.S) for c in codes(row)
    }


def test_every_spec_field_has_a_row(site: Site) -> None:
    from dnnframe.datasets import REGISTRY

    sections = site.sections("reference/spec.md")
    expected = {_anchor(path): model for path, model in _spec_sections().items()}
    for info in REGISTRY.values():  # each dataset's generator parameters
        if info.params.model_fields:
            expected[f"params-{info.params.__name__.lstrip('_').lower()}"] = info.params
    assert len(expected) >= 9, expected
    for anchor, model in expected.items():
        assert anchor in sections, f"no section #{anchor} for {model.__name__}"
        missing = set(model.model_fields) - _first_cells(sections[anchor])
        assert not missing, f"#{anchor} ({model.__name__}) has no row for {sorted(missing)}"


def test_every_cli_command_and_option_is_listed(site: Site) -> None:
    import click

    from dnnframe.cli import cli

    sections = site.sections("reference/cli.md")
    ctx = click.Context(cli, info_name="dnnframe")
    names = cli.list_commands(ctx)
    assert {"run", "validate", "serve", "worker"} <= set(names)
    for name in names:
        command = cli.get_command(ctx, name)
        section = sections.get(f"dnnframe-{name}")
        assert section is not None, f"no CLI reference section for dnnframe {name}"
        listed = _first_cells(section)
        for param in command.params:
            if getattr(param, "hidden", False):
                continue
            wanted = (
                [param.human_readable_name]
                if isinstance(param, click.Argument)
                else [*param.opts, *param.secondary_opts]
            )
            for opt in wanted:
                assert opt in listed, f"dnnframe {name}: {opt} is not in the CLI reference"


def test_every_rest_operation_is_described_with_a_curl_line(site: Site) -> None:
    from dashboard import create_app
    from dashboard.openapi import openapi_document

    sections = site.sections("reference/rest-api.md")
    doc = openapi_document(create_app())
    assert len(doc["paths"]) >= 10
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            anchor = op["operationId"].lower()
            section = sections.get(anchor)
            assert section is not None, f"{method.upper()} {path} has no reference section"
            assert path in codes(section), f"{method.upper()} {path}: path not shown"
            assert "curl" in section, f"{method.upper()} {path}: no curl example"
            for status in op["responses"]:
                assert f"<td>{status}</td>" in section, f"{method.upper()} {path}: {status}"
            for param in op.get("parameters", []):
                assert param["name"] in _first_cells(section), (path, param["name"])
    schemas = site.sections("reference/rest-api.md")
    for name in doc["components"]["schemas"]:
        assert f"schema-{name.lower()}" in schemas, f"schema {name} is not listed"


def test_every_setting_is_listed_with_its_meaning(site: Site) -> None:
    import re

    from dnnframe.settings import ENV_PREFIX, Settings

    page = site.page("reference/settings.md")
    rows = dict(
        re.findall(r"<tr>\s*<td><code>(DNNFRAME_\w+)</code></td>(.*?)</tr>", page, flags=re.S)
    )
    for field in Settings.model_fields:
        name = f"{ENV_PREFIX}{field.upper()}"
        assert name in rows, f"{name} is not in the settings reference"
        meaning = re.findall(r"<td>(.*?)</td>", rows[name], flags=re.S)[-1]
        assert meaning.strip(), (
            f"{name} has no meaning (give its field a description in dnnframe/settings.py)"
        )


def test_every_default_shown_is_the_models(site: Site) -> None:
    """The default column is the model's default, the dashboard's limits included (their one
    home is Settings), or what leaving the variable unset does."""
    import html
    import json
    import re

    from dnnframe.settings import ENV_PREFIX, Settings

    page = site.page("reference/settings.md")
    rows = dict(
        re.findall(r"<tr>\s*<td><code>(DNNFRAME_\w+)</code></td>(.*?)</tr>", page, flags=re.S)
    )
    assert Settings.model_fields["max_trials"].default is not None
    for field, info in Settings.model_fields.items():
        shown = html.unescape(
            re.findall(r"<td>(.*?)</td>", rows[f"{ENV_PREFIX}{field.upper()}"], flags=re.S)[1]
        )
        if info.default is None:
            assert shown.startswith("unset"), (field, shown)
        else:
            value = info.default if isinstance(info.default, str) else json.dumps(info.default)
            assert shown == f"<code>{value}</code>", (field, shown)
