"""How the workers split the suite (tests/xdist_units.py), run on a small suite through pytester
with three real xdist workers: each file stays on one worker, tests/deploy stays together,
one worker starts on the units that wait and the others on those that compute, and the junit
file names the worker that ran each test and when it started."""

from __future__ import annotations

import os
import re
import time
from collections import defaultdict
from pathlib import Path
from xml.etree import ElementTree

import pytest
from xdist_units import (
    DOCKER_UNIT,
    Lanes,
    hand_out_order,
    kind_of,
    rewrite_test_modules,
    unit_of,
    waiting_lanes,
)

TESTS = "".join(f"def test_{i}():\n    pass\n\n" for i in range(6))
BROKER = "import pytest\npytestmark = pytest.mark.broker\n" + TESTS
SLOW = "import pytest\npytestmark = pytest.mark.slow\n" + TESTS


def test_units() -> None:
    assert unit_of("tests/engine/test_x.py::test_a[1-2]") == "tests/engine/test_x.py"
    assert unit_of("tests/deploy/test_stack.py::TestX::test_a") == DOCKER_UNIT
    assert unit_of("tests/deploy/sub/test_y.py::test_b") == DOCKER_UNIT
    assert unit_of("tests/deployment/test_z.py::test_c") == "tests/deployment/test_z.py"


def test_heavy_units_go_before_the_light_ones_each_in_collection_order() -> None:
    marks = {
        "tests/dashboard/test_a.py": {"browser"},
        "tests/dashboard/test_b.py": {"browser", "broker"},
        "tests/deploy": {"docker", "slow"},
        "tests/engine/test_f.py": set(),
        "tests/distributed/test_c.py": {"broker"},
        "tests/test_g.py": set(),
        "tests/test_h.py": {"slow"},
    }
    assert hand_out_order(marks) == [
        "tests/dashboard/test_a.py",
        "tests/dashboard/test_b.py",
        "tests/deploy",
        "tests/distributed/test_c.py",
        "tests/test_h.py",
        "tests/engine/test_f.py",  # the light units last, in collection order
        "tests/test_g.py",
    ]
    assert [kind_of(marks[u]) for u in ("tests/dashboard/test_b.py", "tests/test_h.py")] == [
        "wait",  # a broker, with a browser: it mostly waits
        "compute",
    ]


def test_one_lane_takes_the_waiting_units_and_the_others_compute_first() -> None:
    marks = {
        "w1": {"broker"},
        "c1": {"slow"},
        "w2": {"netns", "slow"},
        "c2": {"browser"},
        "l1": set(),
        "w3": {"docker"},
    }
    lane, other = object(), object()
    lanes = Lanes(marks, [lane])
    queue = list(marks) + ["unknown"]  # a unit without marks is light

    def take(worker: object, waiting: int = 1) -> str:
        unit = lanes.pick(worker, queue, waiting)
        queue.remove(unit)
        return unit

    assert [take(lane), take(other), take(other), take(lane)] == ["w1", "c1", "c2", "w2"]
    # computing run out: another worker waits too while fewer than two waiting units run,
    # else it takes the light units first
    assert take(other, waiting=2) == "l1"
    assert take(other, waiting=1) == "w3"
    assert [take(other, waiting=2), take(lane) if queue else None] == ["unknown", None]
    # a lane whose kind has run out takes the next: computing, then light
    assert Lanes(marks, [lane]).pick(lane, ["l1", "c2"]) == "c2"
    # no marks read (the file missing): the hand-out order as it is
    assert Lanes({}, [lane]).pick(lane, ["c1", "w1"]) == "c1"


def test_workers_beyond_the_cores_wait_and_each_core_keeps_one_computing() -> None:
    assert [waiting_lanes(n, 2) for n in (1, 2, 3, 4, 5, 8)] == [1, 1, 1, 2, 2, 2]
    assert [waiting_lanes(n, 8) for n in (3, 4, 9, 10)] == [1, 1, 1, 2]
    marks = {"w1": {"broker"}, "w2": {"docker"}, "w3": {"netns"}, "c1": {"slow"}, "c2": {"slow"}}
    lanes, others = [object(), object()], [object(), object()]
    pick = Lanes(marks, lanes).pick
    queue = list(marks)
    firsts = []
    for worker in [*lanes, *others]:  # xdist hands each worker its first unit in turn
        firsts.append(pick(worker, queue, sum(kind_of(marks[u]) == "wait" for u in firsts)))
        queue.remove(firsts[-1])
    assert firsts == ["w1", "w2", "c1", "c2"]  # both lanes wait from the start, both cores compute


def test_files_and_the_docker_tests_each_go_to_one_worker(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = str(Path(__file__).resolve().parent)  # where the plugin is
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    )
    pytester.makeconftest('pytest_plugins = ["xdist_units"]\n')
    pytester.makeini("[pytest]\nmarkers =\n    broker: waits\n    slow: computes\n")
    for path, text in (
        ("tests/deploy/test_build.py", TESTS),
        ("tests/deploy/test_stack.py", TESTS),
        ("tests/test_one.py", BROKER),
        ("tests/test_two.py", BROKER),
        ("tests/test_three.py", SLOW),
        ("tests/test_four.py", SLOW),
        ("tests/test_five.py", TESTS),
    ):
        (pytester.path / path).parent.mkdir(parents=True, exist_ok=True)
        (pytester.path / path).write_text(text)
    before = time.time()
    result = pytester.runpytest_subprocess("-n", "3", "-v", "--junitxml=junit.xml", "tests")
    assert result.ret == 0, result.stdout.str()
    workers: dict[str, set[str]] = defaultdict(set)
    ran_on: dict[str, str] = {}
    first: dict[str, str] = {}
    for line in result.stdout.lines:
        if m := re.match(r"\[(gw\d)\] .*PASSED (\S+)", line):
            workers[unit_of(m.group(2))].add(m.group(1))
            ran_on[m.group(2)] = m.group(1)
            first.setdefault(m.group(1), unit_of(m.group(2)))
    # the first units are handed out before any runs: one worker waits, two compute (handed
    # out in order, the waiting units alternating with the others, two would wait at once)
    assert sorted(first.values()) == [
        "tests/test_four.py",
        "tests/test_one.py",
        "tests/test_three.py",
    ], first
    # the junit file names each test's worker and start, as the output does
    recorded = {}
    for case in ElementTree.parse(pytester.path / "junit.xml").iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert before <= float(props["started"]) <= time.time()
        assert float(props["cpu"]) >= 0  # the CPU it used, its processes' included
        path = case.get("classname").replace(".", "/") + ".py"
        recorded[f"{path}::{case.get('name')}"] = props["worker"]
    assert recorded == ran_on
    assert set(workers) == {
        DOCKER_UNIT,
        *(f"tests/test_{n}.py" for n in ("one", "two", "three", "four", "five")),
    }, result.stdout.str()
    assert all(len(ws) == 1 for ws in workers.values()), dict(workers)
    assert {w for ws in workers.values() for w in ws} == {"gw0", "gw1", "gw2"}  # all worked
    # the summary lists the units by the CPU their tests used, as the junit file has it
    out = result.stdout.lines
    start = next(i for i, line in enumerate(out) if "CPU by unit" in line)
    listed = [line.split()[-1] for line in out[start + 1 : start + 7]]
    assert sorted(listed) == sorted(workers), out[start:]


def test_the_controller_caches_every_rewritten_test_module_for_the_workers(
    pytestconfig: pytest.Config,
) -> None:
    if pytestconfig.getoption("assertmode") != "rewrite":
        pytest.skip("assertions are not rewritten in this run (--assert=plain)")
    from _pytest.assertion import rewrite

    cached = rewrite_test_modules(pytestconfig)
    here = Path(__file__).resolve().parent
    # every test module and conftest file (an empty list: pytest's private functions moved)
    assert Path(__file__).resolve() in cached and here / "conftest.py" in cached
    assert len(cached) == len([p for p in here.rglob("*.py") if p.name.startswith("test_")]) + len(
        [p for p in here.rglob("*.py") if p.stem in ("conftest", "tiers", "xdist_units")]
    )
    state = pytestconfig.stash[rewrite.assertstate_key]
    for fn in cached:  # what a worker's import reads back instead of rewriting
        pyc = rewrite.get_cache_dir(fn) / (fn.name[:-3] + rewrite.PYC_TAIL)
        assert rewrite._read_pyc(fn, pyc, state.trace) is not None, fn
