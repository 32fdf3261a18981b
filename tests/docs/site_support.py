"""Building the documentation site once per test session, and reading its pages back."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_HEADING = re.compile(r'<h([1-6]) id="([^"]+)"')


@dataclass(frozen=True)
class Site:
    directory: Path
    returncode: int
    log: str

    def page(self, path: str) -> str:
        """The HTML of a page, by its markdown path (``reference/spec.md``)."""
        folder = path.removesuffix(".md")
        return (self.directory / folder / "index.html").read_text(encoding="utf-8")

    def sections(self, path: str) -> dict[str, str]:
        """Heading id -> the HTML from that heading to the next heading of any level."""
        text = self.page(path)
        starts = [(m.start(), m[2]) for m in _HEADING.finditer(text)]
        ends = [start for start, _ in starts[1:]] + [len(text)]
        return {anchor: text[start:end] for (start, anchor), end in zip(starts, ends)}


def build(directory: Path) -> Site:
    """``mkdocs build --strict`` into ``directory``, as CI and a contributor run it."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--site-dir",
            str(directory),
            "--config-file",
            str(ROOT / "mkdocs.yml"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return Site(directory, proc.returncode, proc.stdout + proc.stderr)


def codes(section_html: str) -> set[str]:
    """The texts of the inline ``<code>`` elements in ``section_html``."""
    return {html.unescape(c) for c in re.findall(r"<code>([^<]*)</code>", section_html)}
