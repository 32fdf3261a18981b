"""How pytest-xdist's workers (the README's full run, ``-n 3``, and its fast tier, ``-n 2``)
split the suite.

A unit of work goes to one worker as a whole: a test file (its module-scoped fixtures, a
Celery fleet, a compiled JAX graph, a network-namespace pair, are then built once), and
everything under ``tests/deploy`` together (those tests build, tag and remove the same
images in one Docker engine, so two at once would race). The units that hold a slow,
Docker, namespace, broker or browser test are handed out first, so the run does not end with
one worker idle while the others work through a long file; and among them, those that mostly
wait on processes (a broker, hosts, containers: their faults wait out timeouts) alternate
with those that compute, so the waits overlap computing rather than each other (handed out
in file order, the distributed tests once ran together for three minutes at half the CPU).

This is xdist's scope scheduler with our own units (``pytest_xdist_make_scheduler``), not
``--dist loadgroup``: that mode marks a group by rewriting a test's node id, which pytest
9.2 no longer honours (the tests are then spread as if ungrouped; pytest-xdist issue 1386).
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any

import pytest

DOCKER_UNIT = "tests/deploy"
# a unit holding one of these goes before the rest; the first three mostly wait
_WAITS = ("docker", "netns", "broker")
_HEAVY = (*_WAITS, "slow", "browser")


def unit_of(nodeid: str) -> str:
    """The unit a test (by node id, relative to the repository) belongs to."""
    path = nodeid.split("::", 1)[0]
    if path == DOCKER_UNIT or path.startswith(DOCKER_UNIT + "/"):
        return DOCKER_UNIT
    return path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    # keep the order the workers collected (heavy units first, below), not by test count
    config.option.loadscopereorder = False
    return Units(config, log)


@pytest.hookimpl(trylast=True)  # after tests/tiers.py has marked the services
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a run in one process keeps the collection order
    marks: dict[str, set[str]] = {}
    for item in items:
        names = {name for name in _HEAVY if item.get_closest_marker(name)}
        marks.setdefault(unit_of(item.nodeid), set()).update(names)
    rank = {unit: i for i, unit in enumerate(hand_out_order(marks))}
    items.sort(key=lambda item: rank[unit_of(item.nodeid)])  # stable: files stay whole


def hand_out_order(marks: dict[str, set[str]]) -> list[str]:
    """The units (in collection order, each with the heavy markers its tests carry) in the
    order the workers get them: waiting and computing heavy units alternately, the rest
    after."""
    waits = [u for u, names in marks.items() if names & set(_WAITS)]
    computes = [u for u, names in marks.items() if names and not names & set(_WAITS)]
    rest = [u for u, names in marks.items() if not names]
    alternate = [u for pair in itertools.zip_longest(waits, computes) for u in pair if u]
    return alternate + rest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # which worker ran each test and when it started, kept in CI's junit file beside the
    # test's time: a run that grew can be read back as a timeline (the unit that ran last,
    # a worker left idle) rather than guessed at
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    item.user_properties += [("worker", worker), ("started", f"{time.time():.3f}")]
