"""The tests in ``UNTRACED`` (tests/conftest.py) run with no coverage tracing, xdist worker
or not: under ``--cov`` (CI's full run) this file is one of them."""

from __future__ import annotations

import sys
import threading

import coverage


def test_a_test_named_untraced_runs_with_no_coverage_started_or_tracing():
    assert coverage.Coverage.current() is None
    assert sys.gettrace() is None
    # a thread started now is not traced either
    seen = []
    thread = threading.Thread(target=lambda: seen.append(sys.gettrace()))
    thread.start()
    thread.join()
    assert seen == [None]
