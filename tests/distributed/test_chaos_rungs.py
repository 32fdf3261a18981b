"""The chaos run's check of ASHA's decisions, on hand-made records: legal asynchronous
outcomes pass, and a decision no read of the rung could have given is caught."""

from __future__ import annotations

from typing import Any

from dnnframe.states import TrialState
from dnnframe.store.records import TrialRecord
from dnnframe.testing.chaos.rungs import Seen, Snapshot, asha_violations, seen

SEARCH = {
    "method": "asha",
    "num_samples": 9,
    "min_epochs": 1,
    "eta": 3,
    "objective": {"metric": "val_accuracy", "mode": "max"},
}  # one rung: epoch 1 of 3


def _trial(
    tid: str, state: TrialState, values: list[float], n: int | None = None, attempts: int = 1
) -> TrialRecord:
    """A trial of experiment "e" whose curve holds ``values`` (val_accuracy per epoch);
    ``n``: pruned at epoch 1 as one of ``n`` values."""
    result: dict[str, Any] | None = None
    if n is not None:
        result = {
            "pruned": {
                "experiment_id": "e",
                "epoch": 1,
                "metric": "val_accuracy",
                "value": values[0],
                "trials_at_rung": n,
                "eta": 3,
            }
        }
    return TrialRecord(
        id=tid,
        experiment_ids=["e"],
        state=state,
        config={"training": {"max_epochs": 3}},
        result=result,
        metrics=[{"epoch": e, "val_accuracy": v} for e, v in enumerate(values, start=1)],
        attempts=attempts,
        started_at=float(attempts),
    )


def _snap(*trials: TrialRecord) -> Snapshot:
    return {t.id: seen(t, "val_accuracy") for t in trials}


R, C, P = TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED


def _history() -> tuple[list[TrialRecord], list[Snapshot]]:
    """a and b reach the rung first (fewer than eta values: both go on); c, the worst,
    arrives third and is pruned as one of 3; d, the best, arrives fourth and goes on."""
    a, b = _trial("a", C, [0.5, 0.6, 0.7]), _trial("b", C, [0.3, 0.4, 0.5])
    c, d = _trial("c", P, [0.1], n=3), _trial("d", C, [0.9, 0.9, 0.9])
    snaps = [
        _snap(_trial("a", R, []), _trial("b", R, []), _trial("c", R, []), _trial("d", R, [])),
        _snap(_trial("a", R, [0.5]), _trial("b", R, [0.3]), _trial("c", R, []), _trial("d", R, [])),
        _snap(
            _trial("a", R, [0.5, 0.6]),
            _trial("b", R, [0.3, 0.4]),
            _trial("c", R, [0.1]),
            _trial("d", R, []),
        ),
        _snap(a, b, c, _trial("d", R, [0.9])),
        _snap(a, b, c, _trial("d", R, [0.9, 0.9])),
    ]
    return [a, b, c, d], snaps


def test_legal_asynchronous_decisions_pass():
    trials, snaps = _history()
    assert asha_violations("e", SEARCH, trials, snaps) == []
    # with no snapshots at all the check only knows the end: still nothing to report
    assert asha_violations("e", SEARCH, trials, []) == []


def test_a_prune_no_read_of_the_rung_gives_is_caught():
    trials, snaps = _history()
    # c claims to be pruned as one of 3, but only a and b (both worse) could have been read
    trials[2] = _trial("c", P, [0.8], n=3)
    for s in snaps[2:]:
        s["c"] = seen(trials[2], "val_accuracy")
    [problem] = asha_violations("e", SEARCH, trials, snaps)
    assert problem.startswith("trial c: pruned at rung 1 (val_accuracy 0.8) as one of 3")


def test_a_promotion_past_a_rung_that_should_have_pruned_is_caught():
    trials, snaps = _history()
    # d arrives fourth, worst of all, and still goes on: with a, b and c certainly at the
    # rung (two of them better), no read of 4 or more values keeps it
    trials[3] = _trial("d", C, [0.05, 0.9, 0.9])
    snaps[3]["d"] = seen(_trial("d", R, [0.05]), "val_accuracy")
    snaps[4]["d"] = seen(_trial("d", R, [0.05, 0.9]), "val_accuracy")
    [problem] = asha_violations("e", SEARCH, trials, snaps)
    assert problem.startswith("trial d: promoted past rung 1 with 0.05")
    # had it reached the rung second, it went on legally (fewer than eta values then)
    assert asha_violations("e", SEARCH, trials, []) == []


def test_a_rerun_elsewhere_may_have_held_any_value_at_the_rung():
    # d, the worst, reaches the rung after a and b: as one of 3 with 2 better it is pruned
    a = _trial("a", C, [0.5, 0.6, 0.7])
    d = _trial("d", C, [0.05, 0.9, 0.9])
    b_runs = [
        _trial("b", R, [0.3]),
        _trial("b", R, [0.3]),
        _trial("b", R, [0.3, 0.4]),
        _trial("b", C, [0.3, 0.4, 0.5]),
    ]

    def snaps() -> list[Snapshot]:
        return [
            _snap(_trial("a", R, [0.5]), b_runs[0], _trial("d", R, [])),
            _snap(_trial("a", R, [0.5, 0.6]), b_runs[1], _trial("d", R, [0.05])),
            _snap(_trial("a", R, [0.5, 0.6]), b_runs[2], _trial("d", R, [0.05, 0.9])),
        ]

    [problem] = asha_violations("e", SEARCH, [a, b_runs[3], d], snaps())
    assert problem.startswith("trial d: promoted past rung 1 with 0.05")
    # but b was claimed again meanwhile (its curve cleared, then trained anew, better): its
    # value when d read the rung is unknown, and a read without it (a and d: fewer than
    # eta values) keeps d
    b_runs[1:] = [
        _trial("b", R, [], attempts=2),
        _trial("b", R, [0.7, 0.8], attempts=2),
        _trial("b", C, [0.7, 0.8, 0.9], attempts=2),
    ]
    assert asha_violations("e", SEARCH, [a, b_runs[3], d], snaps()) == []


def test_a_pruned_curve_must_end_at_its_rung_with_the_value_judged():
    trials, snaps = _history()
    trials[2] = _trial("c", P, [0.1, 0.2], n=3)  # pruned at 1, yet trained epoch 2
    problems = asha_violations("e", SEARCH, trials, snaps)
    assert "trial c: pruned at rung 1, but its curve holds epochs [1, 2]" in problems
    trials[2] = _trial("c", P, [0.1], n=3)
    trials[2].metrics[0]["val_accuracy"] = 0.15  # judged on a value it does not hold
    assert any(
        "but its curve holds 0.15 there" in p for p in asha_violations("e", SEARCH, trials, snaps)
    )
    trials[2].result = None
    assert asha_violations("e", SEARCH, trials, snaps) == [
        "trial c: PRUNED without the pruner's reason"
    ]


def test_going_past_a_rung_without_a_value_there_is_caught():
    trials, snaps = _history()
    trials[0] = TrialRecord(
        id="a",
        experiment_ids=["e"],
        state=C,
        config={"training": {"max_epochs": 3}},
        metrics=[{"epoch": 2, "val_accuracy": 0.6}, {"epoch": 3, "val_accuracy": 0.7}],
        attempts=1,
        started_at=1.0,
    )
    problems = asha_violations("e", SEARCH, trials, [])
    assert problems == ["trial a: went past rung 1 without a value stored there (epochs [2, 3])"]


def test_a_trial_shared_with_another_experiment_is_left_out():
    trials, snaps = _history()
    trials[2] = _trial("c", P, [0.8], n=3)
    trials[2].experiment_ids = ["e", "grid"]
    assert asha_violations("e", SEARCH, trials, []) == []


def test_seen_tells_runs_apart_and_keeps_non_numbers_as_none():
    t = _trial("x", R, [0.5], attempts=2)
    t.metrics.append({"epoch": 2, "val_accuracy": None})
    assert seen(t, "val_accuracy") == Seen((2, 2.0), R, {1: 0.5, 2: None})


def _packed(
    tid: str, state: TrialState, values: list[float], pack: str, n: int | None = None
) -> TrialRecord:
    t = _trial(tid, state, values, n)
    t.result = {**(t.result or {}), "pack": {"id": pack, "size": 4, "index": 0}}
    return t


def test_a_pack_judged_in_lockstep_keeps_its_best_and_prunes_the_rest_on_one_read():
    # four members of one pack reach the rung in one epoch, read with 2 earlier values: of
    # 6 values, fewer than 2 better keeps a member
    early = [_trial("a", C, [0.95, 0.9, 0.9]), _trial("b", C, [0.9, 0.9, 0.9])]
    pack = [
        _packed("p1", C, [0.97, 0.9, 0.9], "k"),
        _packed("p2", P, [0.5], "k", n=6),
        _packed("p3", P, [0.4], "k", n=6),
        _packed("p4", P, [0.1], "k", n=6),
    ]
    assert asha_violations("e", SEARCH, early + pack, [], lockstep=True) == []
    # p3 kept while p2, better, was pruned in the same call: no one read does both
    swapped = [pack[0], pack[1], _packed("p3", C, [0.4, 0.6, 0.7], "k"), pack[3]]
    problems = asha_violations("e", SEARCH, early + swapped, [], lockstep=True)
    assert problems == [
        "pack k at rung 1: trial p3 kept with 0.4, trial p2 pruned with 0.5 in the same call",
        "pack k at rung 1: trial p3 kept with 0.4, though 2 of the pack were better of 6 values",
    ]
    # members trained one after another are judged each on its own read: p3 may have
    # been read early, with fewer than eta values
    assert asha_violations("e", SEARCH, early + swapped, [], lockstep=False) == []


def test_a_pack_pruned_on_different_counts_or_keeping_too_many_is_caught():
    pack = [
        _packed("p1", C, [0.9, 0.9, 0.9], "k"),
        _packed("p2", C, [0.8, 0.8, 0.8], "k"),
        _packed("p3", P, [0.4], "k", n=4),
        _packed("p4", P, [0.1], "k", n=5),
    ]
    problems = asha_violations("e", SEARCH, pack, [], lockstep=True)
    assert "pack k at rung 1: pruned in one call as one of different counts [4, 5]" in problems
    # one read of 4 values: only the best (fewer than 4 // 3 = 1 better) may go on
    pack[3] = _packed("p4", P, [0.1], "k", n=4)
    assert asha_violations("e", SEARCH, pack, [], lockstep=True) == [
        "pack k at rung 1: trial p2 kept with 0.8, though 1 of the pack were better of 4 values"
    ]
