"""The chaos run's pure parts, on hand-made records: the seeded schedule replays and keeps
its bounds, and each invariant of the checker catches the breach it is there for."""

from __future__ import annotations

import time

import pytest

from dnnframe.states import TrialState
from dnnframe.store.records import TrialRecord
from dnnframe.testing.chaos.checker import (
    Findings,
    api_violations,
    check_experiment,
    expected_trials,
    flower_disagrees,
    p99,
    recovery_times,
    workers_disagree,
)
from dnnframe.testing.chaos.schedule import DEFAULT_KINDS, make_schedule, overlaps
from dnnframe.testing.chaos.workload import Call, specs


def test_a_seed_replays_its_schedule_and_another_seed_differs():
    assert make_schedule(7, 180) == make_schedule(7, 180)
    assert make_schedule(7, 180) != make_schedule(8, 180)


def test_a_schedule_stays_in_its_window_uses_every_kind_and_overlaps_some():
    faults = make_schedule(3, 600)
    assert all(0 < f.start <= 0.7 * 600 for f in faults)
    assert {f.kind for f in faults} == set(DEFAULT_KINDS)
    assert overlaps(faults) > 0
    for i, f in enumerate(faults):  # the same fault on the same target never twice at once
        assert not any(
            (g.kind, g.target) == (f.kind, f.target) and g.end >= f.start for g in faults[:i]
        )


def test_a_schedule_refuses_an_unknown_kind_by_name():
    with pytest.raises(ValueError, match="meteor"):
        make_schedule(1, 60, ("worker_kill", "meteor"))


def _trial(tid: str, state: TrialState, epochs: list[int], lr: float = 0.01) -> TrialRecord:
    return TrialRecord(
        id=tid,
        experiment_ids=["e"],
        state=state,
        config={"training": {"learning_rate": lr}},
        metrics=[{"epoch": e} for e in epochs],
    )


def test_the_workload_counts_its_trials():
    made = specs(0, waves=2)
    assert [expected_trials(made[r]) for r in ("grid", "resumed", "asha", "tpe", "wave2")] == [
        8,
        12,
        9,
        8,
        6,
    ]  # every other wave is ASHA


def test_a_sound_experiment_has_no_findings():
    spec = specs(0)["tpe"]
    trials = [_trial(f"t{i}", TrialState.COMPLETE, [1, 2, 3], lr=0.01 * (i + 1)) for i in range(8)]
    found = Findings()
    check_experiment("tpe", spec, trials, 3, False, found)
    assert (found.violations, found.lost, found.duplicated) == ([], 0, 0)
    assert found.states == {"COMPLETE": 8}


def test_lost_trials_unfinished_ones_and_broken_curves_are_found():
    spec = specs(0)["grid"]  # 8 trials
    trials = [
        _trial("a", TrialState.COMPLETE, [1, 2]),  # an epoch missing
        _trial("b", TrialState.PRUNED, [1, 1]),  # an epoch written twice
        _trial("c", TrialState.RUNNING, [1]),  # never ended
        _trial("d", TrialState.CANCELLED, []),  # not cancelled by anyone
        *[_trial(f"x{i}", TrialState.COMPLETE, [1, 2, 3]) for i in range(3)],
    ]
    found = Findings()
    check_experiment("grid", spec, trials, 3, False, found)
    text = "\n".join(found.violations)
    assert found.lost == 1 and found.duplicated == 1
    for part in (
        "7 trials stored, 8 submitted",
        "trial a is COMPLETE with epochs [1, 2]",
        "trial b (PRUNED) has epochs written twice",
        "trial c still RUNNING",
        "trial d CANCELLED",
    ):
        assert part in text


def test_a_tpe_configuration_asked_twice_is_a_duplicate():
    trials = [_trial(f"t{i}", TrialState.COMPLETE, [1, 2, 3], lr=0.01) for i in range(8)]
    found = Findings()
    check_experiment("tpe", specs(0)["tpe"], trials, 3, False, found)
    assert "TPE asked 1 configurations twice" in "\n".join(found.violations)


def test_the_api_may_refuse_with_a_reason_but_never_fail_hang_or_vanish_while_up():
    down = [(10.0, 12.0)]
    calls = [
        Call(1.0, "GET", "/ok", 200, 0.1),
        Call(2.0, "GET", "/busy", 503, 0.1),
        Call(3.0, "POST", "/bad", 400, 0.1),
        Call(11.0, "GET", "/down", None, 0.0, "ConnectionError: refused"),
    ]
    assert api_violations(calls, down) == []
    wrong = [
        Call(4.0, "GET", "/boom", 500, 0.1),
        Call(5.0, "GET", "/mute", 503, 0.1, "503 without a reason: "),
        Call(6.0, "GET", "/hang", None, 15.0, "ReadTimeout: read timed out"),
        Call(20.0, "GET", "/gone", None, 0.0, "ConnectionError: refused"),
    ]
    found = api_violations(wrong, down)
    assert [v.split(":")[0] for v in found] == ["GET /boom", "GET /mute", "GET /hang", "GET /gone"]


def test_p99_and_recovery_times():
    assert p99([]) == 0.0
    assert p99([float(i) for i in range(1, 101)]) == 99.0
    samples = [(1.0, 3, 10), (2.0, 3, 10), (3.0, 3, 10), (4.5, 2, 12), (6.0, 0, 15)]
    # undone at 2.0 with work left: the store changed next at 4.5; undone at 6.0: nothing left
    assert recovery_times([2.0, 6.0], samples) == [2.5, 0.0]
    assert recovery_times([3.0], samples[:3]) == [float("inf")]


def test_the_workers_at_rest_are_the_processes_that_exist():
    node = {"role": "node"}
    rows = [
        {"name": "h0w2@a", "alive": True, "info": node},
        {"name": "h0w2@a:41", "alive": True, "info": {}},
        {"name": "h1w1@b", "alive": True, "info": node},
        {"name": "h0w1@a", "alive": False, "info": node},  # killed, and known to be
        {"name": "h0w1@a:17", "alive": False, "info": {}},
    ]
    exist = {"h0w2@a": {40, 41, 42}, "h1w1@b": {50, 51}}
    assert workers_disagree(rows, exist) is None
    rows[3]["alive"] = True  # a killed node still called alive
    assert "h0w1@a" in workers_disagree(rows, exist)
    rows[3]["alive"], rows[4]["alive"] = False, True  # a process of a killed node
    assert "gone nodes ['h0w1@a:17']" in workers_disagree(rows, exist)
    rows[4]["alive"] = False
    # a process of a live node that no longer exists (its pid is not among the node's)
    assert "do not exist ['h0w2@a:41']" in workers_disagree(rows, {**exist, "h0w2@a": {40}})
    assert "h1w1@b" in workers_disagree(rows[:2], exist)  # one missing


def test_flower_at_rest_calls_alive_exactly_the_nodes_that_exist():
    exist = {"h0w2@a", "h1w1@b"}
    assert flower_disagrees({"h0w2@a": True, "h1w1@b": True, "h0w1@a": False}, exist) is None
    assert flower_disagrees({"h0w2@a": True, "h1w1@b": True}, exist) is None  # never seen
    assert "Flower calls alive ['h0w1@a', 'h0w2@a', 'h1w1@b']" in flower_disagrees(
        {"h0w2@a": True, "h1w1@b": True, "h0w1@a": True}, exist
    )  # a killed one alive
    assert "Flower calls alive ['h0w2@a']" in flower_disagrees(
        {"h0w2@a": True, "h1w1@b": False}, exist
    )  # a live one dead
    assert flower_disagrees({}, exist) is not None


def test_a_faults_window_holds_its_action_and_every_fault_is_undone_at_cancel():
    # A request cut by the action (a killed dashboard's dropped connection) ends before the
    # runner hears the action is done: the window must open before it, close after the undo.
    import threading
    import time
    from types import SimpleNamespace

    from dnnframe.testing.chaos.faults import FaultRunner
    from dnnframe.testing.chaos.schedule import Fault

    acted: list[tuple[str, float]] = []
    killed = threading.Event()
    dashboard = SimpleNamespace(
        kill=lambda: (acted.append(("kill", time.monotonic())), killed.set())
    )
    dep = SimpleNamespace(
        hosts=[None],
        dashboard=dashboard,
        start_dashboard=lambda: acted.append(("start", time.monotonic())),
    )
    t0 = time.monotonic()
    runner = FaultRunner(dep, [Fault("dashboard_kill", 0.0, 600.0)], t0).start()
    assert killed.wait(30)  # the kill is done at once; its undo is 600 s away
    runner.undo_all()  # a run that ends undoes what is in effect, without waiting for it
    [applied] = runner.applied
    assert [what for what, _ in acted] == ["kill", "start"]
    assert applied.began <= acted[0][1] and acted[1][1] <= applied.ended
    assert runner.active_at(acted[0][1], "dashboard_kill") and applied.error is None


def test_a_worker_restarted_while_the_broker_is_down_does_not_hold_the_broker_down():
    # The worker is ready only once the broker is back, and the broker's return is the
    # schedule's next step: waiting for the worker inside the schedule held the broker down
    # for good (a run once reported "worker not ready after 120s").
    import threading
    from types import SimpleNamespace

    from dnnframe.testing.chaos.faults import FaultRunner
    from dnnframe.testing.chaos.schedule import Fault

    broker_up = threading.Event()
    broker_up.set()
    restarted: list[SimpleNamespace] = []

    def fake_worker(name: str) -> SimpleNamespace:
        proc = SimpleNamespace(returncode=None, poll=lambda: None, wait=lambda timeout: 0)
        return SimpleNamespace(
            name=name,
            proc=proc,
            kill_group=lambda sig: None,
            alive=lambda: True,
            log_text=lambda: " ready." if broker_up.is_set() else "connecting...",
        )

    host = SimpleNamespace(worker=fake_worker("w1"))

    def start_worker(h: SimpleNamespace, wait: bool = True) -> SimpleNamespace:
        assert not wait
        h.worker = fake_worker(f"w{len(restarted) + 2}")
        restarted.append(h.worker)
        return h.worker

    node = SimpleNamespace(stop_app=broker_up.clear, start_app=broker_up.set)
    dep = SimpleNamespace(hosts=[host], node=node, start_worker=start_worker)
    faults = [Fault("broker_restart", 0.0, 0.5), Fault("worker_kill", 0.1, 0.0)]
    runner = FaultRunner(dep, faults, time.monotonic()).start()
    runner.join(60)
    broker, kill = runner.applied
    assert [a.error for a in runner.applied] == [None, None]
    assert len(restarted) == 1 and broker_up.is_set()
    # the worker's fault ends when it is ready, which is after the broker came back
    assert 0 < broker.ended <= kill.ended


def test_the_command_refuses_store_faults_for_a_sqlite_store_by_name(capsys):
    from dnnframe.testing.chaos.__main__ import main

    with pytest.raises(SystemExit):
        main(["--store", "sqlite", "--kinds", "worker_kill,store_restart"])
    assert "['store_restart'] need a store server" in capsys.readouterr().err
