"""Another checkout of this repository for a benchmark to run side by side: a git ref's
tree, extracted (no worktree, nothing of this checkout's state touched)."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def base_tree(ref: str, where: Path) -> Path:
    """The tree of ``ref`` (any git revision) extracted into ``where`` (made here)."""
    where.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", ref], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where
