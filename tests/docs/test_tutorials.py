"""The site's runnable shell blocks run as written.

A ```bash block right after a ``<!-- runnable -->`` line needs nothing beyond this machine
(no broker, no dashboard, no Docker). Each page's runnable blocks run in order, in one shell
in a fresh directory, as a reader following the page would; the store is the default SQLite
file there.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from site_support import ROOT

MARKER = "<!-- runnable -->"
_BLOCK = re.compile("^" + re.escape(MARKER) + r"\n```(\w*)\n(.*?)```", flags=re.S | re.M)
# a marker is a line of its own; prose may quote it


def runnable_blocks(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    found = _BLOCK.findall(text)
    markers = sum(line == MARKER for line in text.splitlines())
    assert len(found) == markers, f"{page}: a {MARKER} line not right above a fence"
    assert all(lang == "bash" for lang, _ in found), f"{page}: runnable blocks are bash"
    return [body for _, body in found]


PAGES = sorted(
    p for p in (ROOT / "docs").rglob("*.md") if MARKER in p.read_text("utf-8").splitlines()
)


def test_the_tutorials_have_runnable_blocks() -> None:
    names = {p.relative_to(ROOT / "docs").as_posix() for p in PAGES}
    assert {
        "tutorials/first-sweep.md",
        "tutorials/depth-study.md",
        "tutorials/adaptive-search.md",
        "how-to/csv-datasets.md",
    } <= names, names


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT / "docs").as_posix())
def test_runnable_blocks_run(page: Path, tmp_path: Path) -> None:
    script = "set -euo pipefail\n" + "\n".join(runnable_blocks(page))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DNNFRAME_")}
    # the commands of the environment running the tests: dnnframe, python
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert proc.returncode == 0, (
        f"{page.name}: exit {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}"
        f"\n--- stderr\n{proc.stderr[-4000:]}"
    )


def _dnnframe_commands() -> list[tuple[str, str]]:
    """(page, command line) for each ``dnnframe …`` command in the site's bash blocks, env
    assignments before it and ``# comments`` after it dropped, ``&&`` chains split."""
    found = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                for part in line.split(" #", 1)[0].split("&&"):
                    words = part.strip().split()
                    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                        words.pop(0)
                    if words[:1] == ["dnnframe"]:
                        found.append((page.name, " ".join(words)))
    return found


def test_every_dnnframe_command_in_the_docs_parses() -> None:
    """Each command names a real subcommand and real options, as the CLI would parse it."""
    import shlex

    from dnnframe.cli import cli

    commands = _dnnframe_commands()
    assert len(commands) >= 30, commands
    for page, line in commands:
        name, *rest = shlex.split(line)[1:]
        command = cli.get_command(None, name)  # type: ignore[arg-type]
        assert command is not None, f"{page}: no command {name!r}: {line}"
        with command.make_context(name, list(rest), parent=None) as ctx:
            assert ctx.command is command, f"{page}: {line}"
