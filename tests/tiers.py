"""Test tiers: which tests need which outside service, what a missing one does.

Each test is marked with the services it needs (``broker``, ``browser``, ``docker``,
``netns``, ``postgres``, ``gpu``; registered in pyproject.toml), from the fixtures it uses,
its parameters and its file, so ``-m "not (...)"`` selects a tier without a hand-written
mark on each test. A test whose service is missing skips, naming it.

Under CI (``DNNFRAME_TEST_CI=1``, which .ci/run exports) every service CI installs must be there:
a skip becomes a failure, except a skip raised as :class:`OptionalServiceMissing` — the
services no CI machine here can have (a real MongoDB server, a GPU).
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from dnnframe.testing import chromium

CI_VARIABLE = "DNNFRAME_TEST_CI"
CHROMIUM = Path(chromium.CHROMIUM)

# marker -> what it needs, as the pytest configuration lists it
TIERS = {
    "broker": "RabbitMQ: the machine's broker on 127.0.0.1:5672, or rabbitmq-server to start one",
    "browser": "Chromium (Debian's chromium) driven through Playwright",
    "docker": "a Docker engine (dockerd)",
    "netns": "Linux namespaces, so root",
    "postgres": "a PostgreSQL server on 127.0.0.1:5432, or its server binaries",
    "gpu": "a usable NVIDIA GPU",
}

# A fixture that talks to a service marks every test that uses it, however indirectly.
_BY_FIXTURE = {
    "broker_url": ("broker",),
    "rabbitmq_node": ("broker",),
}
# Files whose every test needs a service that no shared fixture stands for.
_BY_FILE = {
    "deploy/test_deploy_stack.py": ("docker",),
    "deploy/test_deploy_rabbitmq.py": ("broker",),
    "distributed/test_chaos.py": ("broker", "netns", "postgres"),
    "distributed/test_hosts.py": ("netns",),
    "distributed/test_netns_hosts.py": ("netns", "postgres"),
    "store/test_store_postgresql.py": ("postgres",),
}
_TESTS = Path(__file__).resolve().parent


class OptionalServiceMissing(pytest.skip.Exception):
    """A skip CI accepts: the service cannot exist on a CI machine here (README, Tests)."""


def skip_optional(reason: str) -> None:
    """Skip the running test for a service CI does not provide (a MongoDB server, a GPU)."""
    raise OptionalServiceMissing(reason, _use_item_location=True)


def _skip(reason: str) -> None:
    # reported at the test, as a skipif marker's skip is, rather than at this line
    raise pytest.skip.Exception(reason, _use_item_location=True)


def under_ci() -> bool:
    return os.environ.get(CI_VARIABLE, "") not in ("", "0")


@functools.cache
def chromium_missing() -> str | None:
    if CHROMIUM.is_file():
        return None
    return (
        f"{CHROMIUM} is missing: install Debian's chromium package "
        "(apt-get install chromium; .ci/run does this)"
    )


@functools.cache
def gpu_missing() -> str | None:
    from dnnframe.engine.backend import probe

    return probe({**os.environ, "THEANO_FLAGS": "device=cuda"})


def root_missing() -> str | None:
    if os.geteuid() == 0 and shutil.which("unshare"):
        return None
    return "namespaces need root and util-linux's unshare (these tests run as root in CI)"


def tiers_of(item: pytest.Item) -> set[str]:
    """The service markers ``item`` gets from its fixtures, parameters and file."""
    found = {m for name in getattr(item, "fixturenames", ()) for m in _BY_FIXTURE.get(name, ())}
    params = getattr(getattr(item, "callspec", None), "params", {})
    if params.get("backend") == "postgresql":
        found.add("postgres")
    try:
        relative = item.path.resolve().relative_to(_TESTS).as_posix()
    except ValueError:  # a test outside tests/ (pytester's)
        relative = ""
    found.update(_BY_FILE.get(relative, ()))
    return found


def pytest_configure(config: pytest.Config) -> None:
    # pyproject.toml registers them; a run with another configuration (pytester's) gets them here
    known = {line.split(":", 1)[0].strip() for line in config.getini("markers")}
    for marker, needs in TIERS.items():
        if marker not in known:
            config.addinivalue_line("markers", f"{marker}: needs {needs}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for marker in sorted(tiers_of(item) - {m.name for m in item.iter_markers()}):
            item.add_marker(marker)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture starts something for nothing. The checks cheap enough to make here;
    # a fixture that reaches a server skips itself.
    marked = {m.name for m in item.iter_markers()}
    if "browser" in marked and (reason := chromium_missing()):
        _skip(reason)
    if "netns" in marked and (reason := root_missing()):
        _skip(reason)
    if "gpu" in marked and (reason := gpu_missing()):
        skip_optional(f"no usable GPU: {reason}")


def _ci_failure(reason: str) -> str:
    return (
        f"skipped under CI ({CI_VARIABLE}=1), where every service it needs is installed: {reason}"
    )


def _skip_reason(longrepr: object) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    if call.excinfo is not None and isinstance(call.excinfo.value, OptionalServiceMissing):
        if isinstance(report.longrepr, tuple):  # the reason without the class's name
            report.longrepr = (*report.longrepr[:2], str(call.excinfo.value))
        return
    if not under_ci():
        return
    report.outcome = "failed"
    report.longrepr = _ci_failure(_skip_reason(report.longrepr))


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    # a whole module skipped (pytest.importorskip at import time) is a skip as well
    outcome = yield
    report = outcome.get_result()
    if under_ci() and report.skipped:
        report.outcome = "failed"
        report.longrepr = _ci_failure(_skip_reason(report.longrepr))
