"""How pytest-xdist's workers (the README's full run, ``-n 4``, and its fast tier, ``-n 2``)
split the suite.

A unit of work goes to one worker as a whole: a test file (its module-scoped fixtures, a
Celery fleet, a compiled JAX graph, a network-namespace pair, are then built once), and
everything under ``tests/deploy`` together (those tests build, tag and remove the same
images in one Docker engine, so two at once would race). The units that hold a slow,
Docker, namespace, broker or browser test are handed out first, so the run does not end with
one worker idle while the others work through a long file. Those that mostly wait on
processes (a broker, hosts, containers: their faults wait out timeouts) go to the waiting
lanes, one after another on each, while a worker per core computes (:class:`Lanes`; with
``-n 4`` on two cores, two lanes wait and two compute), so the waits overlap computing
rather than each other: handed out in file order, the distributed tests once ran together
for three minutes at half the CPU, and alternated with computing units, two of three workers
still started on waiting ones. Where the lanes do not get through the waiting units while
the others compute, another worker takes them once the computing units are handed out.

This is xdist's scope scheduler with our own units (``pytest_xdist_make_scheduler``), not
``--dist loadgroup``: that mode marks a group by rewriting a test's node id, which pytest
9.2 no longer honours (the tests are then spread as if ungrouped; pytest-xdist issue 1386).
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

DOCKER_UNIT = "tests/deploy"
# a unit holding one of these goes before the rest; the first three mostly wait
_WAITS = ("docker", "netns", "broker")
_HEAVY = (*_WAITS, "slow", "browser")
# at most this many workers run waiting units at once while other work is left: more left
# the CPU idle (three at once: 30-75 % idle), one alone made them the run's last 90 s
WAITING_AT_ONCE = 2
_MARKS_KEY = "dnnframe_unit_marks"
_MARKS_PATH = pytest.StashKey[Path]()


def unit_of(nodeid: str) -> str:
    """The unit a test (by node id, relative to the repository) belongs to."""
    path = nodeid.split("::", 1)[0]
    if path == DOCKER_UNIT or path.startswith(DOCKER_UNIT + "/"):
        return DOCKER_UNIT
    return path


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    # the workers' collection marks each unit (below); the controller, which collects
    # nothing, reads those marks from this file to choose what each worker gets next
    node.workerinput[_MARKS_KEY] = str(_marks_file(node.config))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    marks_file = _marks_file(config)

    class Units(LoadScopeScheduling):
        lanes: Lanes | None = None

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            if self.lanes is None:
                count = waiting_lanes(len(self.nodes), _cores())
                self.lanes = Lanes(_read_marks(marks_file), self.nodes[:count])
            # workers busy with waiting units: a worker runs its units one after another,
            # so a waiting unit it holds next to one it runs is no second one at once
            waiting = sum(
                any(
                    self.lanes.kind(unit) == "wait" and not all(tests.values())
                    for unit, tests in units.items()
                )
                for other, units in self.assigned_work.items()
                if other is not node
            )
            unit = self.lanes.pick(node, list(self.workqueue), waiting)
            self.workqueue.move_to_end(unit, last=False)  # the parent takes the first
            super()._assign_work_unit(node)

    # keep the order the workers collected (heavy units first, below), not by test count
    config.option.loadscopereorder = False
    return Units(config, log)


@pytest.hookimpl(trylast=True)  # after tests/tiers.py has marked the services
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a run in one process keeps the collection order
    marks: dict[str, set[str]] = {}
    for item in items:
        names = {name for name in _HEAVY if item.get_closest_marker(name)}
        marks.setdefault(unit_of(item.nodeid), set()).update(names)
    rank = {unit: i for i, unit in enumerate(hand_out_order(marks))}
    items.sort(key=lambda item: rank[unit_of(item.nodeid)])  # stable: files stay whole
    where = getattr(config, "workerinput", {}).get(_MARKS_KEY)
    if where:  # every worker writes the same marks; whole or absent for the reader
        part = Path(f"{where}.{os.getpid()}")
        part.write_text(json.dumps({unit: sorted(names) for unit, names in marks.items()}))
        part.replace(where)


def rewrite_test_modules(config: pytest.Config) -> list[Path]:
    """Rewrite the test modules for pytest's assertions and cache them, in the controller
    before xdist starts its workers; return the modules cached. Each worker collects every
    module, and on a clean clone all four rewrote and compiled the same 130 files at once:
    14-16 s of CPU each to collect rather than 8-9 with the cache, the run's first 25 to
    30 s. This is pytest's own rewriting and its atomic cache writes, through private
    functions: where they have changed, nothing more is cached and each worker rewrites
    what it imports, as before (tests/test_xdist_units.py fails then, to say so)."""
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
    except (ImportError, AttributeError, KeyError):  # no rewriting (--assert=plain)
        return []
    done: list[Path] = []
    for fn in sorted(Path(__file__).resolve().parent.rglob("*.py")):
        if not rewritten(fn):
            continue
        try:
            pyc = rewrite.get_cache_dir(fn) / (fn.name[:-3] + rewrite.PYC_TAIL)
            if rewrite._read_pyc(fn, pyc, state.trace) is None:
                source_hash, code = rewrite._rewrite_test(fn, config)
                pyc.parent.mkdir(exist_ok=True)
                rewrite._write_pyc(state, code, source_hash, pyc)
        except (SyntaxError, OSError, ValueError):
            continue  # pytest reports it where it imports the module
        except (AttributeError, TypeError):
            return done  # pytest's private functions changed
        done.append(fn)
    return done


def rewritten(path: Path) -> bool:
    """Whether pytest rewrites a module's assertions: the test files, conftest files and
    the plugins tests/conftest.py names."""
    return path.name.startswith("test_") or path.stem in {"conftest", "tiers", "xdist_units"}


def _marks_file(config: pytest.Config) -> Path:
    """This run's file of each unit's heavy markers (made once, by the controller)."""
    path = config.stash.get(_MARKS_PATH, None)
    if path is None:
        fd, name = tempfile.mkstemp(prefix="dnnframe-unit-marks-", suffix=".json")
        os.close(fd)
        path = config.stash[_MARKS_PATH] = Path(name)
        config.add_cleanup(lambda: path.unlink(missing_ok=True))
    return path


def _read_marks(path: Path) -> dict[str, set[str]]:
    try:
        return {unit: set(names) for unit, names in json.loads(path.read_text()).items()}
    except (OSError, ValueError):  # no marks: every unit is light, handed out in order
        return {}


def _cores() -> int:
    """The CPUs this process may run on (its affinity, where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):  # Linux; not macOS
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def waiting_lanes(workers: int, cores: int) -> int:
    """How many of ``workers`` are waiting lanes on ``cores`` CPUs: those beyond one per
    core (each core keeps a computing worker), at least one, at most
    :data:`WAITING_AT_ONCE`. The waiting units add up to more wall time than the run
    (900 s of it in a 710 s run of ``-n 3``): with one lane, a second worker took them once
    the computing units were handed out, and for the last 200 s one worker computed while
    two waited (the CPU 25-40 % idle)."""
    return max(1, min(WAITING_AT_ONCE, workers - cores))


class Lanes:
    """Which unit a worker gets next. The waiting lanes (one worker, or more where there
    are more workers than cores: :func:`waiting_lanes`) take the units that mostly wait (a
    broker, hosts, containers) one after another, and the other workers take the heavy
    computing units first. Where the waiting units are more than the lanes run in the time
    the others compute, once the computing ones are handed out a worker takes a waiting unit
    while fewer than :data:`WAITING_AT_ONCE` workers run them, else a light one (the light
    units, many and short, fill the end of the run). A worker whose kinds have run out takes
    what is left."""

    def __init__(self, marks: dict[str, set[str]], lanes: Sequence[object]) -> None:
        self.marks = marks
        self.waiting_lanes = list(lanes)

    def kind(self, unit: str) -> str:
        return kind_of(self.marks.get(unit, set()))

    def pick(self, worker: object, queue: list[str], waiting: int = 0) -> str:
        """The unit of ``queue`` (in hand-out order) for ``worker`` to run next, while
        ``waiting`` other workers run waiting units."""
        if any(worker is lane for lane in self.waiting_lanes):
            order = ("wait", "compute", "light")
        elif waiting < WAITING_AT_ONCE:
            order = ("compute", "wait", "light")
        else:
            order = ("compute", "light", "wait")
        for kind in order:
            for unit in queue:
                if self.kind(unit) == kind:
                    return unit
        return queue[0]


def kind_of(names: set[str]) -> str:
    """A unit's kind by the heavy markers its tests carry: "wait", "compute" or "light"."""
    if names & set(_WAITS):
        return "wait"
    return "compute" if names else "light"


def hand_out_order(marks: dict[str, set[str]]) -> list[str]:
    """The units (in collection order, each with the heavy markers its tests carry) as the
    workers collect them: the heavy ones first, the light ones after (:class:`Lanes` then
    picks from this order by kind)."""
    return sorted(marks, key=lambda unit: kind_of(marks[unit]) == "light")  # stable


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # which worker ran each test and when it started, kept in CI's junit file beside the
    # test's time: a run that grew can be read back as a timeline (the unit that ran last,
    # a worker left idle) rather than guessed at
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    item.user_properties += [("worker", worker), ("started", f"{time.time():.3f}")]
    item.stash[_CPU_AT_START] = _cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield
    # the CPU the test used, its own process's and that of the processes it started and
    # waited for (workers, hosts, CLI runs; not a container's): on two shared cores the
    # run's length is this work, so a test that grew costlier shows here even when its
    # wall time hides it behind another's wait
    start = item.stash.get(_CPU_AT_START, None)
    if start is not None:
        item.user_properties.append(("cpu", f"{_cpu_seconds() - start:.2f}"))


_CPU_AT_START = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


CPU_SHOWN = 15  # units in the summary's list


class UnitCpu:
    """The CPU of each unit (its tests' ``cpu`` properties), printed at the end of the run
    where the summary is: the controller under xdist, which receives every test's report
    with its properties, or the one process."""

    def __init__(self) -> None:
        self.by_unit: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":  # the property is added at teardown
            return
        for name, value in report.user_properties:
            if name == "cpu":
                unit = unit_of(report.nodeid)
                self.by_unit[unit] = self.by_unit.get(unit, 0.0) + float(value)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.by_unit:
            return
        total = sum(self.by_unit.values())
        terminalreporter.write_sep(
            "=", f"CPU by unit, its processes' included: {total:.0f} s in all, the costliest"
        )
        for unit, cpu in sorted(self.by_unit.items(), key=lambda kv: -kv[1])[:CPU_SHOWN]:
            share = 100 * cpu / total if total else 0.0
            terminalreporter.write_line(f"{cpu:8.1f} s  {share:5.1f} %  {unit}")


def pytest_configure(config: pytest.Config) -> None:
    # not on an xdist worker, which prints no summary (not by its environment variable:
    # a run started from a worker's test, as pytester's are, inherits it)
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(UnitCpu(), "dnnframe-unit-cpu")
