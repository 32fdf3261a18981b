"""The browser tests wait as long as the suite's limit (tests/conftest.py: 30 s): a shorter
limit on one wait is a timing assumption a busy machine breaks (a page under CI's load once
took over 10 s to start following its experiment)."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# a Playwright wait given a limit in milliseconds, written as the suite writes them
LIMIT = re.compile(r"\btimeout=(\d+)_000\b")


def test_no_browser_wait_is_shorter_than_the_suites_limit() -> None:
    short = []
    for path in sorted(TESTS.rglob("*.py")):
        text = path.read_text()
        if "playwright" not in text:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            short += [
                f"{path.relative_to(TESTS)}:{number}: {line.strip()}"
                for m in LIMIT.finditer(line)
                if int(m.group(1)) < 30
            ]
    assert not short, "waits shorter than 30 s:\n" + "\n".join(short)


def test_every_browser_test_starts_the_chromium_blind_to_interface_changes() -> None:
    # dnnframe/testing/chromium.py says why; the one test that starts a plain Chromium shows
    # the difference
    direct = [
        f"{path.relative_to(TESTS)}:{number}: {line.strip()}"
        for path in sorted(TESTS.rglob("*.py"))
        if path.name not in ("test_chromium_network.py", Path(__file__).name)
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "chromium.launch(" in line or "executable_path=" in line
    ]
    assert not direct, "Chromium started by its path, not dnnframe.testing.chromium:\n" + "\n".join(
        direct
    )
