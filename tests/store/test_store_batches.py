"""The batch calls of the trial life cycle (base_trials.py), run against every backend (see
conftest.py): each trial of a batch follows the single-trial rules, in one round trip."""

from __future__ import annotations

import pytest
from store_support import CFG, make, run

from dnnframe.exceptions import NotFoundError
from dnnframe.store import TrialState


def test_claim_trials_wins_what_it_can_and_applies_the_cap_per_trial(store):
    ids = make(store, 5)
    assert store.claim_trial(ids[2], "dead") is not None  # one delivery already spent
    assert store.requeue_stale(0) == [ids[2]]
    assert store.claim_trial(ids[0], "other") is not None  # running elsewhere
    run(store, ids[1], 0.5)  # finished
    cursor = store.latest_seq()
    won = store.claim_trials([*ids, ids[3]], "w", max_attempts=1)
    assert [r.id for r in won] == [ids[3], ids[4]]
    assert all(
        (r.state, r.worker, r.attempts, r.metrics) == (TrialState.RUNNING, "w", 1, []) for r in won
    )
    capped = store.get_trial(ids[2])
    assert capped.state is TrialState.FAILED and capped.error.startswith("delivery cap reached")
    assert store.get_trial(ids[0]).worker == "other"
    changed = store.list_trials(since=cursor)
    assert sorted(t.id for t in changed) == sorted(ids[2:])
    assert len({t.seq for t in changed}) == 3  # one seq per row
    assert store.claim_trials(ids, "w2") == []  # a redelivered pack is a no-op


def test_claim_trials_of_a_cancelled_experiment_cancels_them(store):
    ids = make(store, 2)
    store.create_experiment("live", "live", {}, 1)
    store.create_trials("live", [(ids[1], CFG)])  # shared with an experiment still wanted
    store.cancel_experiment("exp1")
    store.finish_trial(ids[1], TrialState.CANCELLED)  # ... but cancelled by hand meanwhile
    store.create_trials("exp1", [("late", CFG)])  # created after the cancel: still QUEUED
    assert store.claim_trials(["late", ids[0]], "w") == []
    assert store.get_trial("late").state is TrialState.CANCELLED


def test_batches_naming_an_unknown_trial_change_nothing(store):
    ids = make(store, 2)
    with pytest.raises(NotFoundError, match="nope"):
        store.claim_trials([ids[0], "nope"], "w")
    assert store.get_trial(ids[0]).state is TrialState.QUEUED
    store.claim_trial(ids[0], "w")
    with pytest.raises(NotFoundError, match="nope"):
        store.finish_trials(
            [(ids[0], TrialState.COMPLETE, None, None), ("nope", TrialState.COMPLETE, None, None)],
            worker="w",
        )
    assert store.get_trial(ids[0]).state is TrialState.RUNNING
    with pytest.raises(NotFoundError, match="nope"):
        store.cancel_requested([ids[0], "nope"])


def test_batch_arguments_are_named(store):
    ids = make(store, 1)
    with pytest.raises(ValueError, match="worker"):
        store.claim_trials(ids, "")
    with pytest.raises(ValueError, match="max_attempts"):
        store.claim_trials(ids, "w", max_attempts=0)
    with pytest.raises(ValueError, match="trial_ids"):
        store.claim_trials(ids[0], "w")  # a bare string is not a list of ids
    with pytest.raises(ValueError, match="metrics must be a dict"):
        store.append_metrics_many({ids[0]: [1, 2]}, worker="w")
    with pytest.raises(ValueError, match="metrics must be a dict"):
        store.append_metrics_many({ids[0]: "epoch 1"}, worker="w")
    with pytest.raises(ValueError, match="finished state"):
        store.finish_trials([(ids[0], TrialState.RUNNING, None, None)], worker="w")
    with pytest.raises(ValueError, match=r"items\[0\]"):
        store.finish_trials([(ids[0], TrialState.COMPLETE)], worker="w")


def test_heartbeat_trials_reports_what_is_still_owned(store, clock):
    a, b, c, d = make(store, 4)
    store.claim_trials([a, b, c], "w")
    store.claim_trial(d, "other")
    store.finish_trial(c, TrialState.COMPLETE, worker="w")
    before = {t.id: t.heartbeat_at for t in store.list_trials()}
    cursor = store.latest_seq()
    clock.advance(1)
    assert store.heartbeat_trials([a, b, c, d], "w") == {a, b}
    after = {t.id: t.heartbeat_at for t in store.list_trials()}
    assert after[a] > before[a] and after[b] > before[b]
    assert (after[c], after[d]) == (before[c], before[d])
    assert store.list_trials(since=cursor) == []  # heartbeats are not changes


def test_append_metrics_many_writes_owned_running_trials_only(store):
    a, b, c, d = make(store, 4)
    store.claim_trials([a, b], "w")
    store.claim_trial(c, "other")
    cursor = store.latest_seq()
    for epoch in (1, 2):
        written = store.append_metrics_many(
            {
                a: {"epoch": epoch, "val_loss": float("nan")},
                b: {"epoch": epoch},
                c: {"epoch": epoch},
                d: {"epoch": epoch},
            },
            worker="w",
        )
        assert written == {a, b}
    assert store.get_trial(a).metrics == [
        {"epoch": 1, "val_loss": None},
        {"epoch": 2, "val_loss": None},
    ]
    assert [m["epoch"] for m in store.get_trial(b).metrics] == [1, 2]
    assert store.get_trial(c).metrics == [] and store.get_trial(d).metrics == []
    changed = store.list_trials(since=cursor)
    assert [t.id for t in changed] == [a, b] and changed[0].seq != changed[1].seq
    assert store.append_metrics_many({}, worker="w") == set()


def test_append_metrics_many_appends_several_epochs_in_order(store):
    a, b, c = make(store, 3)
    store.claim_trials([a, b], "w")
    store.claim_trial(c, "other")
    store.append_metrics_many({a: {"epoch": 1}}, worker="w")
    cursor = store.latest_seq()
    written = store.append_metrics_many(
        {
            a: [{"epoch": 2}, {"epoch": 3, "val_loss": float("inf")}],
            b: [{"epoch": 1}, {"epoch": 2}, {"epoch": 3}, {"epoch": 4}],
            c: [{"epoch": 1}, {"epoch": 2}],
        },
        worker="w",
    )
    assert written == {a, b}
    assert store.get_trial(a).metrics == [
        {"epoch": 1},
        {"epoch": 2},
        {"epoch": 3, "val_loss": None},
    ]
    assert [m["epoch"] for m in store.get_trial(b).metrics] == [1, 2, 3, 4]
    assert store.get_trial(c).metrics == []
    assert sorted(t.id for t in store.list_trials(since=cursor)) == sorted([a, b])
    assert store.append_metrics_many({a: []}, worker="w") == set()  # nothing to append


def test_finish_trials_applies_each_trials_rules(store):
    a, b, c, d, e = make(store, 5)
    store.claim_trials([a, b], "w")
    store.claim_trial(c, "other")
    result = {"status": "COMPLETE", "metrics": {"test_accuracy": 0.75}}
    done = store.finish_trials(
        [
            (a, TrialState.COMPLETE, result, None),
            (b, "DIVERGED", None, "diverged at epoch 3"),
            (c, TrialState.COMPLETE, result, None),  # another worker's: refused
            (d, TrialState.CANCELLED, None, "user"),  # QUEUED may be cancelled
            (e, TrialState.COMPLETE, result, None),  # QUEUED may not complete
        ],
        worker="w",
    )
    assert done == {a, b, d}
    ta, tb = store.get_trial(a), store.get_trial(b)
    assert ta.state is TrialState.COMPLETE and ta.result["metrics"]["test_accuracy"] == 0.75
    assert (tb.state, tb.error) == (TrialState.DIVERGED, "diverged at epoch 3")
    assert store.get_trial(c).state is TrialState.RUNNING
    assert store.get_trial(e).state is TrialState.QUEUED
    again = store.finish_trials([(a, TrialState.FAILED, None, "late")], worker="w")
    assert again == set() and store.get_trial(a) == ta  # finished rows are read-only


def _numbered(first: int, last: int, tag: str = "") -> list[dict]:
    return [{"epoch": e, "loss": 1.0 / e, "tag": tag} for e in range(first, last + 1)]


def test_finish_trials_appends_the_last_epochs_of_the_trials_it_finishes(store):
    a, b, c, d, e = make(store, 5)
    store.claim_trials([a, b, d, e], "w")
    store.claim_trial(c, "other")
    assert store.append_metrics_many({a: _numbered(1, 2), c: _numbered(1, 1)}, "w") == {a}
    assert store.append_metrics_many({c: _numbered(1, 1, "other's")}, "other") == {c}
    cursor = store.latest_seq()
    result = {"status": "COMPLETE", "metrics": {"test_accuracy": 0.75}}
    done = store.finish_trials(
        [
            (a, TrialState.COMPLETE, result, None),
            (b, TrialState.FAILED, None, "singular matrix"),
            (c, TrialState.COMPLETE, result, None),  # another worker's: refused
            (d, TrialState.COMPLETE, result, None),  # no epochs: finished as before
        ],
        worker="w",
        epochs={
            a: _numbered(1, 5, "resent"),  # 1 and 2 are stored already
            b: {"epoch": 1, "loss": 1.0, "tag": ""},  # one epoch, as a dict
            c: _numbered(2, 3),
        },
    )
    assert done == {a, b, d}
    ta, tb, tc, td = (store.get_trial(t) for t in (a, b, c, d))
    assert ta.metrics == _numbered(1, 2) + _numbered(3, 5, "resent")
    assert (ta.state, ta.result["metrics"]) == (TrialState.COMPLETE, result["metrics"])
    assert (tb.state, tb.error, tb.metrics) == (
        TrialState.FAILED,
        "singular matrix",
        _numbered(1, 1),
    )
    assert (tc.state, tc.metrics) == (TrialState.RUNNING, _numbered(1, 1, "other's"))
    assert (td.state, td.metrics) == (TrialState.COMPLETE, [])
    changed = store.list_trials(since=cursor)
    assert sorted(t.id for t in changed) == sorted([a, b, d])
    assert len({t.seq for t in changed}) == 3  # one seq per row
    # sent again (its answer was lost): refused, and nothing is stored twice
    assert (
        store.finish_trials([(a, TrialState.COMPLETE, result, None)], "w", {a: _numbered(4, 6)})
        == set()
    )
    assert store.get_trial(a) == ta


def test_finish_trials_refuses_epochs_of_a_trial_it_is_not_finishing(store):
    a, b = make(store, 2)
    store.claim_trials([a, b], "w")
    before = [store.get_trial(a), store.get_trial(b)]
    with pytest.raises(ValueError, match=repr(b)):
        store.finish_trials(
            [(a, TrialState.COMPLETE, None, None)], "w", {a: _numbered(1, 1), b: _numbered(1, 1)}
        )
    with pytest.raises(ValueError, match="list of dicts"):
        store.finish_trials([(a, TrialState.COMPLETE, None, None)], "w", {a: [1.0]})
    with pytest.raises(NotFoundError):
        store.finish_trials(
            [(a, TrialState.COMPLETE, None, None), ("nope", TrialState.COMPLETE, None, None)],
            "w",
            {a: _numbered(1, 1)},
        )
    assert [store.get_trial(a), store.get_trial(b)] == before


def test_cancel_requested_in_one_call(store):
    a, b = make(store, 2)
    store.create_experiment("other", "o", {}, 1)
    store.create_trials("other", [("x", CFG), (b, CFG)])
    store.claim_trials([a, b, "x"], "w")
    assert store.cancel_requested([a, b, "x"]) == set()
    store.cancel_experiment("exp1")
    assert store.cancel_requested([a, b, "x"]) == {a}  # b is still wanted by "other"
    store.cancel_experiment("other")
    assert store.cancel_requested([a, b, "x"]) == {a, b, "x"}
