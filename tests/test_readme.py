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
    assert tests == ["python -m pytest"]
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    for command in install + tests:
        assert command in ci_lines, f".ci/run does not run the README's command {command!r}"
