"""Suite-wide isolation: a developer's own dnnframe settings must not leak into the tests."""

from __future__ import annotations

import compileall
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# markers by service, a missing service's skip and CI's refusal of skips (tests/tiers.py);
# pytester runs small suites through that plugin to test it; how xdist splits the suite
# (tests/xdist_units.py)
pytest_plugins = ["tiers", "pytester", "xdist_units"]


def _write_bytecode(config) -> None:  # noqa: ANN001 - pytest's Config
    """The project's modules compiled once, before the run. Where PYTHONDONTWRITEBYTECODE is
    set (CI's machine sets it) no process caches what it compiles, so each of the hundreds
    of processes the tests start (CLI runs, local and Celery workers, servers) compiled
    dnnframe's modules from source again: 0.1-0.2 s of CPU each (test_cli and test_local_run
    used 104 core-s, 96 with the modules compiled). The test processes cache what they
    compile too (pytest's rewritten test modules among it); subprocesses keep the setting."""
    sys.dont_write_bytecode = False
    if hasattr(config, "workerinput"):
        return  # xdist's controller compiled them before starting this worker
    from xdist_units import rewrite_test_modules, rewritten  # a plugin, loaded by now

    root = Path(__file__).resolve().parents[1]
    for package in ("dnnframe", "dashboard", "tasks"):
        compileall.compile_dir(root / package, quiet=1)
    for helper in Path(_TESTS).rglob("*.py"):  # the tests' helpers: imported, not rewritten
        if not rewritten(helper):
            compileall.compile_file(helper, quiet=1)
    if config.getoption("numprocesses", None):
        rewrite_test_modules(config)  # before xdist starts its workers


def pytest_configure(config) -> None:  # noqa: ANN001 - pytest hook
    _write_bytecode(config)
    # Settings a user may have exported (a broker, a store, a token) would reroute the CLI
    # and the app under test; each test that needs one sets it itself. Removed for the whole
    # session, before any fixture (module-scoped ones included) starts a subprocess.
    # DNNFRAME_TEST_* variables configure the suite and stay.
    for name in list(os.environ):
        if name.startswith("DNNFRAME_") and not name.startswith("DNNFRAME_TEST_"):
            del os.environ[name]
    # Playwright's expect() polls for what it asserts, 5 s by default: a busy machine (CI's,
    # with every xdist worker at once) can take longer to load and draw a page, so the limit
    # is where a page that never gets there fails, not a measure of speed. The browser tests
    # pass no shorter limit (nor to wait_for_function, 30 s by default): a page under CI's load
    # once took over 10 s to start following its experiment
    try:
        from playwright.sync_api import expect
    except ImportError:  # the browser tests skip, naming what is missing (tests/tiers.py)
        return
    expect.set_options(timeout=30_000)


# Tests run without coverage's tracer under --cov. On Python 3.11 tracing makes all Python
# slower, libraries' own included. The engine's equivalence tests that train graphs in this
# process took 1.5 to 1.7 times their CPU traced (test_widths.py with test_blocks.py: 51-58 s
# untraced, 80-97 s traced) and reach no line of dnnframe/ the other engine tests do not
# (measured with coverage's per-test contexts); the schemathesis runs send thousands of
# requests down the API tests' paths and took 1.5 (under xdist) to 2.2 times as long traced.
UNTRACED = {
    "engine/test_widths.py",
    "engine/test_unrolled.py",
    "engine/test_blocks.py",
    "engine/test_blas.py",
    "engine/test_float32.py",
    "engine/test_rewrites.py",
    "dashboard/test_dashboard_openapi_fuzz.py",
    "test_untraced.py",  # checks that these run untraced
}
_TESTS = os.path.dirname(os.path.abspath(__file__))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    # Not pytest-cov's no_cover marker: an xdist worker holds two started coverages, and the
    # marker stops only the newest, which resumes the other (the test was traced all the
    # same). Every started one is stopped here, and started again in the same order after.
    if os.path.relpath(item.path, _TESTS) not in UNTRACED:
        yield
        return
    import coverage

    stopped = []
    while (current := coverage.Coverage.current()) is not None:
        current.stop()
        stopped.append(current)
    try:
        yield
    finally:
        for cov in reversed(stopped):
            cov.start()


@pytest.fixture
def validations(monkeypatch) -> list[int]:
    """TrialConfig.model_validate counted, one entry per call (what a spec or a pack costs
    in validations)."""
    calls: list[int] = []
    from dnnframe.spec.models import TrialConfig

    original = TrialConfig.model_validate.__func__

    def counting(cls, *args, **kwargs):
        calls.append(1)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(TrialConfig, "model_validate", classmethod(counting))
    return calls
