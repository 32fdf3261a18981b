"""The README's install and test commands are exactly what CI runs, so they cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    """The shell lines of the README's "A fresh machine" section's code blocks."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## A fresh machine", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_ci_runs_the_readme_install_and_test_commands_verbatim() -> None:
    commands = _readme_commands()
    install = [c for c in commands if "pip install" in c]
    tests = [c for c in commands if "pytest" in c]
    assert install == ['python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[dev]"']
    assert tests == ["python -m pytest -n 4"]
    # the fast tier sits beside it (a console block: it is not what CI runs)
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## A fresh machine")[1]
    section = section.split("\n## ", 1)[0]
    assert 'python -m pytest -m "not (slow or broker or browser or docker or netns)"' in section
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    for command in install + tests:
        assert command in ci_lines, f".ci/run does not run the README's command {command!r}"


def _section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split(title, 1)[1].split("\n#", 1)[0]


def _code_lines(lang: str = "bash") -> list[str]:
    """Every line of the README's code blocks in ``lang``, continuation lines joined."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)
    return [
        line.strip()
        for block in blocks
        for line in block.replace("\\\n", " ").splitlines()
        if line.strip()
    ]


def test_the_spec_reference_is_a_valid_spec_naming_every_setting() -> None:
    """The spec format's example parses as a spec, and every setting of every part of a
    spec is named in the section (in the example or, for CSV datasets, in the text)."""
    import yaml

    from dnnframe.spec import parse_spec
    from dnnframe.spec.models import (
        DatasetConfig,
        EarlyStopping,
        ExperimentSpec,
        LrSchedule,
        ModelConfig,
        Objective,
        SearchConfig,
        TrainingConfig,
    )

    section = _section("### The spec format")
    (example,) = re.findall(r"```yaml\n(.*?)```", section, flags=re.S)
    spec = parse_spec(yaml.safe_load(example))
    assert spec.to_dict()["training"]["momentum"] == 0.9 and spec.search.eta == 3
    for model in (
        ExperimentSpec,
        DatasetConfig,
        ModelConfig,
        TrainingConfig,
        SearchConfig,
        EarlyStopping,
        LrSchedule,
        Objective,
    ):
        missing = [f for f in model.model_fields if not re.search(rf"\b{f}\b", section)]
        assert not missing, f"the spec reference omits {model.__name__} {missing}"


def test_the_spec_reference_names_every_search_method() -> None:
    from typing import get_args

    from dnnframe.spec.models import SearchMethod

    section = _section("### The spec format")
    line = next(line for line in section.splitlines() if line.strip().startswith("method:"))
    assert line.split("#", 1)[1].split()[: len(get_args(SearchMethod))] == list(
        get_args(SearchMethod)
    ), line
    for method in get_args(SearchMethod):
        assert f"`{method}`" in section, f"search method {method} is not explained"


def test_urls_with_a_query_are_quoted_for_the_shell() -> None:
    """An unquoted `&` in a pasted curl command sends the rest to the background."""
    for line in _code_lines():
        for url in re.findall(r"https?://\S+", line):
            if "&" in url or "?" in url:
                assert re.search(r"""(['"])https?://[^'"]*\1""", line), line


def test_every_dnnframe_command_in_the_readme_parses() -> None:
    """Each `dnnframe …` line of a bash block names a real command and real options."""
    import shlex

    from dnnframe.cli import cli

    commands = [line.split(" #", 1)[0] for line in _code_lines() if line.startswith("dnnframe ")]
    assert len(commands) >= 8, commands
    for line in commands:
        args = shlex.split(line)[1:]
        name, *rest = args
        command = cli.get_command(None, name)  # type: ignore[arg-type]
        assert command is not None, f"no command {name!r}: {line}"
        with command.make_context(name, list(rest), parent=None) as ctx:
            assert ctx.command is command, line
